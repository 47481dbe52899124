// ModelVersion: one loaded version of a model — its session, effective config, signature,
// statistics, instances and batch scheduler.
//
//   ASSIGN_OR_RETURN(auto v, ModelVersion::Create(name, 1, dir / "1" / "model.onnx", fingerprint,
//                                                 std::move(config), options));
//   v->Enqueue(std::move(request), std::move(callback));
//
// Create builds the session (through the compiled-model cache), completes and applies the config,
// warms the session up and then the scheduler's workers, so a version is ready to serve when
// Create returns. Destruction drains: every request still queued runs (its callback is called)
// before the workers are joined.
//
// Thread-safety: Enqueue and Statistics may be called concurrently from any thread; everything else
// is immutable after Create, except the active instance count, which the version's Autoscaler
// thread moves (inferd.autoscaling, serving/autoscaler.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model_config.pb.h"
#include "session/session.h"
#include "serving/autoscaler.h"
#include "serving/ensemble.h"
#include "serving/inference.h"
#include "serving/model_cache.h"
#include "serving/model_instance.h"
#include "serving/model_signature.h"
#include "serving/model_stats.h"
#include "serving/sequence_batcher.h"

namespace inferd::batching {
template <class Task>
class BatchScheduler;
}

namespace inferd::serving {

// The server-wide settings a version is created with (see ModelManagerOptions).
struct ModelVersionOptions {
  Clock* clock = nullptr;             // the schedulers' time source; required, outlives versions
  const ModelCache* cache = nullptr;  // required
  int total_threads = 0;              // 0: hardware_concurrency
  int default_instance_count = 0;     // 0: 1 instance without instance_group
  int threads_per_instance = 0;       // 0: total_threads / instances
  int autocomplete_max_batch_size = 8;
  // Most bytes of input one warmup sample may hold (ModelManagerOptions::max_warmup_bytes).
  uint64_t max_warmup_bytes = uint64_t{1} << 30;
  // Set when the load was abandoned (its deadline passed, or shutdown): Create stops at the next
  // stage or warmup run with DEADLINE_EXCEEDED. nullptr: never. Outlives Create.
  const std::atomic<bool>* abandoned = nullptr;
  // Serves ensembles' composing models (the manager's link); required to load an ensemble.
  std::shared_ptr<EnsembleHostLink> ensembles;
};

class ModelVersion {
 public:
  // Loads `model_path` as version `version` of model `name` with `config` (parsed and validated
  // standalone; completed here against the model). `fingerprint` is the version folder's at the
  // time it was read. Any failure (model file, config against the model, warmup) is returned.
  // A config with platform "ensemble" makes an ensemble version (ensemble.h): no session, no
  // scheduler; `model_path` only locates label files; its composing models must be served by
  // options.ensembles already.
  static StatusOr<std::shared_ptr<ModelVersion>> Create(const std::string& name, int64_t version,
                                                        const std::filesystem::path& model_path,
                                                        std::string fingerprint,
                                                        inference::ModelConfig config,
                                                        const ModelVersionOptions& options);
  ~ModelVersion();
  ModelVersion(const ModelVersion&) = delete;
  ModelVersion& operator=(const ModelVersion&) = delete;

  const std::string& name() const { return signature_.name; }
  int64_t version() const { return signature_.version; }
  const std::string& fingerprint() const { return fingerprint_; }
  // The effective (auto-completed) config. Shared, immutable.
  const std::shared_ptr<const inference::ModelConfig>& config() const { return config_; }
  const ModelSignature& signature() const { return signature_; }

  // Validates `request` and queues it. Invalid requests (INVALID_ARGUMENT) and a full queue
  // (UNAVAILABLE) are answered at once on the caller's thread; the others on a worker. `callback`
  // is called exactly once.
  void Enqueue(std::unique_ptr<InferenceRequest> request, ResponseCallback callback);

  ModelStatisticsSnapshot Statistics() const;

 private:
  ModelVersion() = default;
  static StatusOr<std::shared_ptr<ModelVersion>> CreateEnsemble(
      const std::string& name, int64_t version, const std::filesystem::path& model_path,
      std::string fingerprint, inference::ModelConfig config, const ModelVersionOptions& options);
  // `max_instances` workers, `instances` of them active (taking batches).
  Status StartScheduler(int max_instances, int instances, Clock& clock);
  Status StartAutoscaler(const AutoscaleOptions& options, int instances, Clock& clock);
  // The autoscaler thread's scale event: moves the scheduler's active workers and the metrics.
  void ApplyScale(const ScaleDecision& decision);
  // Gives each scheduler worker one request, so its thread-local state is warm. The requests fill
  // a whole batch, so no queue delay holds them back.
  void WarmupWorkers(int instances, uint64_t max_bytes);

  std::string fingerprint_;
  std::shared_ptr<const inference::ModelConfig> config_;
  std::unique_ptr<Session> session_;
  ModelSignature signature_;
  ModelStats stats_;
  // One per scheduler worker (autoscaled: max_instances, the active ones take batches).
  std::vector<std::unique_ptr<ModelInstance>> instances_;
  // With sequence_batching: decides when each sequence's requests go to scheduler_. Shut down
  // before scheduler_ drains, destroyed after it.
  std::unique_ptr<SequenceBatcher> sequences_;
  std::unique_ptr<batching::BatchScheduler<InferTask>> scheduler_;  // destroyed first
  // With inferd.autoscaling: samples stats_ and moves scheduler_'s active workers. Stopped first
  // in the destructor.
  std::unique_ptr<Autoscaler> autoscaler_;
  // An ensemble version's dataflow (then session_, instances_ and scheduler_ are empty). Shared
  // with its requests in flight, which may outlive the version.
  std::shared_ptr<Ensemble> ensemble_;
};

}  // namespace inferd::serving
