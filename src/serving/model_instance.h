// ModelInstance: one execution instance of a loaded model version (Triton's model instance). The
// batch scheduler hands each of its workers' batches to that worker's instance, which merges the
// requests' inputs into one batch (padding ragged ones), runs the session, splits the outputs back
// per request (cropping padded dims) and completes every request.
//
// Instances of a version share its Session (weights, read-only) and signature; each Run draws its
// own run context (intermediate values, arena) from the session, so instances never share one.
// Thread-safety: one instance is used by one worker thread at a time; CompleteTask and
// FailTask may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "session/session.h"
#include "serving/inference.h"
#include "serving/model_signature.h"
#include "serving/model_stats.h"

namespace inferd::serving {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// One queued request: the batch scheduler's Task.
struct InferTask {
  std::unique_ptr<InferenceRequest> request;
  ResponseCallback callback;
  int64_t rows = 1;
  SteadyTime enqueued;  // real time, for statistics (queue delays use the injected Clock)
  int64_t size() const { return rows; }
};

// The response to `request` from this version, without outputs.
InferenceResponse EmptyResponse(const ModelSignature& signature, const InferenceRequest& request);
// Completes a request that ran: records its latency, answers with `outputs` and runs the callback.
void CompleteTask(const ModelSignature& signature, ModelStats& stats, InferTask& task,
                  NamedTensors outputs);
// Completes a request that failed for `reason` (before or after it ran).
void FailTask(const ModelSignature& signature, ModelStats& stats, InferTask& task,
              FailureReason reason, Status status);

class ModelInstance {
 public:
  // `signature`, `session` and `stats` belong to the version and outlive the instance.
  ModelInstance(int index, const ModelSignature& signature, const Session& session,
                ModelStats& stats);

  int index() const { return index_; }

  // Runs one batch from the scheduler (tasks in queue order) and completes every task.
  void ProcessBatch(std::vector<std::unique_ptr<InferTask>> batch);

 private:
  // Runs `tasks` as one batch, or one by one when their shapes cannot share one.
  void Execute(std::span<std::unique_ptr<InferTask>> tasks, SteadyTime start);
  // The session's feeds for `tasks`. *unbatchable: the tasks' inputs cannot be concatenated
  // (they must run one by one); else a non-OK status fails them all.
  Status MergeInputs(std::span<std::unique_ptr<InferTask>> tasks, int64_t total_rows,
                     NamedTensors* feeds, bool* unbatchable) const;
  // Splits the session's `results` into each task's outputs (`per_task`, in config order).
  Status SplitOutputs(std::span<std::unique_ptr<InferTask>> tasks,
                      const std::vector<int64_t>& rows, int64_t total_rows,
                      const std::vector<Tensor>& results,
                      std::vector<NamedTensors>* per_task) const;
  // The shapes each task's piece of `out` has once cropped to its own unpadded dims; false when
  // no dim needs cropping.
  bool CropShapes(const OutputSpec& spec, const Tensor& out,
                  std::span<std::unique_ptr<InferTask>> tasks, const std::vector<int64_t>& rows,
                  std::vector<Shape>* shapes) const;
  void FailAll(std::span<std::unique_ptr<InferTask>> tasks, FailureReason reason,
               const Status& status) const;

  const int index_;
  const ModelSignature& signature_;
  const Session& session_;
  ModelStats& stats_;
};

}  // namespace inferd::serving
