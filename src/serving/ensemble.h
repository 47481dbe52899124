// Ensembles (Triton's `platform: "ensemble"`): a model whose config's ensemble_scheduling lists
// steps, each a composing model of the repository with an input_map (composing model input →
// ensemble tensor) and an output_map (composing model output → ensemble tensor). The tensors named
// are the ensemble's inputs, its outputs and the values of the maps; each is produced once (by the
// request or by one step) and may be consumed by any number of steps.
//
//   // at load (model_version.cc), once the composing models are loaded:
//   ASSIGN_OR_RETURN(auto e, Ensemble::Create(signature, config, host));
//   // per request, after ValidateRequest:
//   e->Run(std::move(request), rows, std::move(callback));
//
// A request runs the steps as a dataflow graph: a step starts as soon as all its inputs exist, so
// independent steps run in parallel. Each step is a request to its composing model through the
// host (ModelManager), so it is batched by that model's scheduler and runs on its instances.
// Tensors move between steps by shared ownership (Tensor copies share the producing response's
// buffer; the request's own inputs are views kept alive by the run): nothing is copied here. No
// thread waits for a request: steps start from the callbacks of the steps before them.
// `max_inflight_requests` (Triton's field, > 0) caps, per step, the step requests in flight across
// all the ensemble's requests; a step over the cap waits in that step's FIFO, not on a thread.
// A failing step fails the request with the step's status code and a message naming the step; the
// steps already running finish first, the ones not started never start; other requests are
// unaffected.
//
// Thread-safety: Run and Statistics may be called concurrently from any thread. The ensemble and
// each request's state live as long as a request still runs (shared ownership), so a version
// retired or destroyed mid-request is safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "model_config.pb.h"
#include "serving/inference.h"
#include "serving/model_signature.h"
#include "serving/model_stats.h"

namespace inferd::serving {

// What an ensemble needs from the manager that serves it: its composing models.
class EnsembleHost {
 public:
  virtual ~EnsembleHost() = default;
  // The signature of model `name` version `version` (-1: the highest READY one) as served now;
  // the error ModelManager::Infer would answer when there is none.
  virtual StatusOr<ModelSignature> StepSignature(const std::string& name,
                                                 int64_t version) const = 0;
  // Runs one step's request as ModelManager::Infer does, also while the server drains (the
  // ensemble request it belongs to was accepted before). `callback` is called exactly once.
  virtual void InferStep(std::unique_ptr<InferenceRequest> request, ResponseCallback callback) = 0;
};

// The way ensembles reach their host, which may go away first: a load abandoned at shutdown
// (ModelManager's max load time) can still be validating an ensemble on its own thread while the
// manager is destroyed. The manager resets the link first thing in its destructor; from then on
// StepSignature and InferStep answer UNAVAILABLE ("the server is shutting down") without touching
// it. Thread-safe.
class EnsembleHostLink {
 public:
  explicit EnsembleHostLink(EnsembleHost* host) : host_(host) {}
  void Reset() EXCLUDES(mu_);
  // The host's StepSignature, run under the link's lock (so Reset waits for it).
  StatusOr<ModelSignature> StepSignature(const std::string& name, int64_t version) const
      EXCLUDES(mu_);
  // The host's InferStep (not under the lock: the step's callback may start the next step).
  // The host outlives every step it runs (it drains them before it is destroyed).
  void InferStep(std::unique_ptr<InferenceRequest> request, ResponseCallback callback)
      EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  EnsembleHost* host_ GUARDED_BY(mu_);
};

// The checks of an ensemble config that need no composing model: platform "ensemble" with
// ensemble_scheduling and listed inputs and outputs; no instance_group, warmup or dynamic
// batching; every step names a model and maps at least one input and one output; every tensor is
// produced once; every step input and ensemble output is produced; every ensemble input is
// consumed; the steps form no cycle. INVALID_ARGUMENT naming the step (index and model) and the
// tensor.
Status CheckEnsembleConfig(const inference::ModelConfig& config);

// The model names of an ensemble config's steps (in step order, repeats removed); empty for a
// config that is not an ensemble.
std::vector<std::string> EnsembleStepModels(const inference::ModelConfig& config);

// Shared by the config checks (ensemble_config.cc) and the runtime (ensemble.cc): "step 2 ('m')",
// and a proto map's entries sorted by key so that checks and messages do not depend on hash order.
std::string EnsembleStepLabel(int index, const inference::ModelEnsembling::Step& step);
std::vector<std::pair<std::string, std::string>> SortedMapEntries(
    const google::protobuf::Map<std::string, std::string>& m);

class Ensemble : public std::enable_shared_from_this<Ensemble> {
 public:
  // Validates `config` (already through CheckEnsembleConfig; a step model_version unset or -1
  // means the latest READY version) against its composing models as
  // `host` serves them now: each step's model and version exist and are ready, its maps name
  // inputs and outputs the model has, every input of the model is mapped, and each tensor's data
  // type and shape (with the batch dim when batching) agree between producer and consumers; a
  // composing model with batching must allow the ensemble's max_batch_size. INVALID_ARGUMENT
  // naming the step and tensor. `signature` is the ensemble's own (from its config).
  static StatusOr<std::shared_ptr<Ensemble>> Create(ModelSignature signature,
                                                    const inference::ModelConfig& config,
                                                    std::shared_ptr<EnsembleHostLink> host);
  Ensemble(const Ensemble&) = delete;
  Ensemble& operator=(const Ensemble&) = delete;

  // Runs a request ValidateRequest accepted (`rows` batch rows). `callback` is called exactly
  // once, on the thread of the last step's callback (or this one when a step fails at once).
  void Run(std::unique_ptr<InferenceRequest> request, int64_t rows, ResponseCallback callback);

  // The ensemble's own statistics (end to end: success, failures, inference count, request
  // latency); each composing model reports its steps in its own statistics. Name and version are
  // the caller's.
  ModelStatisticsSnapshot Statistics() const { return stats_.Snapshot(); }
  ModelStats& stats() { return stats_; }  // for requests the version rejects
  const ModelSignature& signature() const { return signature_; }

 private:
  struct RunState;  // one request's state (ensemble.cc)
  struct Step {
    std::string model;
    int64_t version = -1;
    std::string label;  // "step 0 ('model')", for messages
    std::vector<std::pair<std::string, int>> inputs;   // model input ← tensor id
    std::vector<std::pair<std::string, int>> outputs;  // model output → tensor id
  };
  // Caps a step's requests in flight (max_inflight_requests); waiting ones queue, FIFO.
  class Gate {
   public:
    explicit Gate(int limit) : limit_(limit) {}
    // Runs `start` now when under the cap, else once a request in flight leaves.
    void Enter(std::function<void()> start) EXCLUDES(mu_);
    void Leave() EXCLUDES(mu_);

   private:
    const int limit_;  // 0: no cap
    Mutex mu_;
    int in_flight_ GUARDED_BY(mu_) = 0;
    std::deque<std::function<void()>> waiting_ GUARDED_BY(mu_);
  };

  Ensemble(ModelSignature signature, std::shared_ptr<EnsembleHostLink> host)
      : signature_(std::move(signature)), host_(std::move(host)) {}
  Status Build(const inference::ModelConfig& config);
  Status CheckStep(const Step& step, const ModelSignature& model) const;
  // Data types and shapes between each tensor's producer and its consumers (asks the host).
  Status CheckTypes();
  // Starts step `s` of `run` (through its gate).
  void Launch(const std::shared_ptr<RunState>& run, int s);
  void Dispatch(const std::shared_ptr<RunState>& run, int s);
  void StepDone(const std::shared_ptr<RunState>& run, int s, Status status,
                InferenceResponse response, bool skipped);
  void Finish(const std::shared_ptr<RunState>& run);

  ModelSignature signature_;
  std::shared_ptr<EnsembleHostLink> host_;
  ModelStats stats_;
  std::vector<std::string> tensor_names_;        // by tensor id
  std::vector<std::vector<int>> consumers_;      // tensor id → steps reading it
  std::vector<int> input_ids_;                   // signature_.inputs[i] → tensor id
  std::vector<int> output_ids_;                  // signature_.outputs[i] → tensor id
  std::vector<Step> steps_;
  std::vector<int> waits_;                       // per step: inputs that steps produce
  std::vector<std::unique_ptr<Gate>> gates_;     // one per step
};

}  // namespace inferd::serving
