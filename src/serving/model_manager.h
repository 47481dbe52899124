// ModelManager: the serving core. Owns the model repository's models, their versions, instances,
// batch schedulers and statistics; frontends (HTTP, gRPC, metrics) talk only to this class.
//
//   ModelManagerOptions opts;
//   opts.repository = "/models";
//   ASSIGN_OR_RETURN(auto manager, ModelManager::Create(opts));
//   RETURN_IF_ERROR(manager->LoadRepository());   // fails only if the folder is unreadable
//   manager->Infer(std::move(request), [](Status s, InferenceResponse r) { ... });
//
// Repository layout (Triton's): DIR/<model>/config.pbtxt (optional, see model_config.h) and
// DIR/<model>/<version>/model.onnx, versions being positive integers. A model whose config or
// ONNX file is invalid is recorded UNAVAILABLE with the reason (see Index()); the others load.
// What a repository can make a load do is bounded: numeric config fields (config_limits.h), warmup
// bytes (max_warmup_bytes), load time (max_load_time: a load past it is abandoned and fails, the
// lifecycle goes on); every file a load reads stays inside its model folder and is a regular file
// (repository.h's ResolveModelFile); an exception in a load fails that model only; reasons name
// files relative to the repository, never its absolute path.
//
// Thread-safety: every method may be called concurrently from any thread. Infer never blocks on
// inference: it validates, enqueues and returns; the callback runs on a model worker thread (or on
// the caller's thread when the request is rejected before queuing). Destruction rejects nothing
// already queued: it drains the queues (every callback runs), then joins the workers.
//
// The manager is the facade of src/serving; the pieces behind it:
//   repository.h       folders, version folders, name checks, version policy (pure functions)
//   model_loader.h     one model's (re)load into a new ModelState, blue-green
//   model_version.h    one loaded version: session, config, signature, scheduler, instances
//   model_signature.h  a version's input/output specs and request validation
//   model_instance.h   one instance: merge inputs → Session::Run → split outputs
//   model_stats.h      FailureReason and the per-version statistics
//   warmup.h           warmup requests and tensors
//   lifecycle.h        the lifecycle thread (operations, poll timer), the retire deadline and
//                      AbandonableWork (the load deadline)
//   config_limits.h    upper bounds on numeric config fields
//   ensemble.h         ensembles (platform "ensemble"): steps run through this manager
// An ensemble's composing models are loaded before it when they are not loaded yet (in every
// control mode, as Triton's explicit mode does); unloading one leaves the ensemble READY, and its
// requests then fail naming the step.
// Lock order: load_mu_ (one load or unload at a time) before mu_ (the published models).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "serving/ensemble.h"
#include "serving/inference.h"
#include "serving/model_cache.h"
#include "serving/model_stats.h"

namespace inference {
class ModelConfig;  // generated from proto/model_config.proto
}

namespace inferd::serving {

class LifecycleThread;  // lifecycle.h
template <class T>
class AbandonableWork;  // lifecycle.h
struct ModelLoad;       // model_loader.h
class ModelVersion;  // model_version.h
struct ModelState;   // model_loader.h
struct ModelLoadOptions;
struct LoadOverride;

// How the set of served models changes after start (Triton's --model-control-mode).
enum class ModelControlMode {
  kNone,      // Start() loads every model; the repository API cannot load or unload
  kPoll,      // as kNone, and the repository is re-scanned every poll_interval: new or changed
              // models (re)load, removed ones unload
  kExplicit,  // Start() loads only startup_models; the repository API loads and unloads
};
// "none", "poll", "explicit"; INVALID_ARGUMENT otherwise.
StatusOr<ModelControlMode> ParseModelControlMode(const std::string& text);

struct ModelManagerOptions {
  // Folder holding one sub-folder per model. Required.
  std::filesystem::path repository;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // kPoll: time between repository scans (Triton's default 15 s). Must be > 0 in poll mode.
  std::chrono::milliseconds poll_interval{15000};
  // kExplicit: the models Start() loads; "*" loads them all.
  std::vector<std::string> startup_models;
  // Compiled-model cache folder (see model_cache.h); empty = no cache.
  std::filesystem::path cache_dir;
  // inferd's version, part of the cache key.
  std::string build_id = "dev";
  // How long a replaced or unloaded version may take to finish the requests it already accepted
  // before it is destroyed anyway (its remaining queued requests then still run on destruction).
  std::chrono::milliseconds retire_timeout{30000};
  // Cores the server may use for inference; 0 = std::thread::hardware_concurrency().
  int total_threads = 0;
  // Instances per model version when the config has no instance_group; 0 = auto (1 instance per
  // model version; each model's instances × threads per instance ≤ total_threads).
  int default_instance_count = 0;
  // Intra-op threads per instance; 0 = auto: max(1, total_threads / instance count).
  int threads_per_instance = 0;
  // max_batch_size given to a model without config.pbtxt (or with one that leaves it unset and
  // has no inputs listed) whose every input and output has a symbolic first dim. 0 disables
  // batching for auto-completed models.
  int autocomplete_max_batch_size = 8;
  // Reject config.pbtxt fields that are not in Triton's schema (true, as Triton: the error names
  // the field), or skip them with a warning (false).
  bool strict_config = true;
  // Server readiness requires every model of the repository to be READY (Triton's
  // --strict-readiness); false: ready once the repository was scanned.
  bool strict_readiness = true;
  // Model folders that another frontend serves (generative models: src/genserve, wired by
  // `inferd serve`): the manager never loads them and leaves them out of scans, Index() and
  // readiness; LoadModel on one is FAILED_PRECONDITION.
  std::set<std::string> external_models;
  // Longest one model's load (read, optimize, warm up every version) may take. Past it the load
  // fails (DEADLINE_EXCEEDED; running versions keep serving) and the lifecycle goes on: the load
  // is abandoned, stops at its next stage and is freed in the background. Must be > 0.
  std::chrono::milliseconds max_load_time{300000};
  // Most bytes of input one warmup sample may hold, checked before allocating (warmup.h): a
  // config model_warmup over it fails the load, a default warmup step over it is skipped.
  uint64_t max_warmup_bytes = uint64_t{1} << 30;
  // Time source for queue delays and timeouts, the poll interval, the retire deadline and
  // WaitForIdle; nullptr = the process's RealClock. Must outlive the manager.
  Clock* clock = nullptr;
};

// The repository API's load parameters (Triton's). `config` replaces config.pbtxt for this load,
// in Triton's JSON form (model_config.h's ModelConfigFromJson; a partial config is completed from
// the model as config.pbtxt is). `files` ("file:<path>" parameters, contents already decoded)
// replace the model's folder: the model loads from these files only, paths relative to the model
// folder ("1/model.onnx"); they require `config`, as Triton.
struct LoadParameters {
  std::optional<std::string> config;
  std::map<std::string, std::string> files;  // relative path → contents
};

// KServe v2 model metadata.
struct TensorMetadata {
  std::string name;
  std::string datatype;        // KServe name, e.g. "FP32"
  std::vector<int64_t> shape;  // -1 for variable dims; with max_batch_size > 0 the first is -1
};
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // READY versions, ascending
  std::string platform;               // "onnxruntime_onnx" or the config's platform/backend
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

// Repository index row (Triton's RepositoryIndex).
struct ModelIndexEntry {
  std::string name;
  int64_t version = -1;  // -1 when the failure is for the whole model (e.g. invalid config)
  std::string state;     // "READY", "UNAVAILABLE" or "LOADING"
  std::string reason;    // why UNAVAILABLE; for READY, why a newer load of it failed; or empty
};

class ModelManager : private EnsembleHost {
 public:
  // Validates options (the repository must be an existing directory). Loads nothing yet.
  static StatusOr<std::unique_ptr<ModelManager>> Create(const ModelManagerOptions& options);
  ~ModelManager() override;
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // Scans the repository and loads every model (versions chosen by each config's version_policy,
  // default: latest 1). Per-model failures are recorded in Index() and logged, not returned; a
  // non-OK status means the repository itself could not be read.
  Status LoadRepository() EXCLUDES(load_mu_, mu_);
  // Loads the models the control mode asks for (every model, or startup_models in kExplicit),
  // then in kPoll starts the thread that re-scans the repository. Like LoadRepository, per-model
  // failures are only recorded; a non-OK status means the repository could not be read.
  Status Start() EXCLUDES(load_mu_, mu_);

  // Loads (or reloads) one model of the repository, blue-green: the versions its version_policy
  // selects load (optimize, warm up) while the running ones keep serving; versions whose files and
  // config did not change are kept as they are; readiness switches atomically once the new
  // versions are ready; replaced versions then finish the requests they accepted and are freed.
  // A version that fails to load leaves its running copy serving; Index() shows the reason. The
  // Status is an error only when the load made no version ready (unreadable config, no version
  // folder, every selected version failed); then the running versions, if any, keep serving.
  // A failure of some versions while others are ready is reported in Index() and the log only.
  // Loads and unloads are serialized.
  Status LoadModel(const std::string& name) EXCLUDES(load_mu_, mu_);
  // As above with a repository-API load's parameters (see RequestLoad), run on this thread.
  Status LoadModel(const std::string& name, const LoadParameters& params) EXCLUDES(load_mu_, mu_);
  // Unloads a model: it stays in Index() as UNAVAILABLE ("unloaded"), new requests get
  // UNAVAILABLE, requests already accepted still complete, then its memory is freed (returns once
  // done or after retire_timeout). NOT_FOUND for a name that is neither loaded nor in the
  // repository.
  Status UnloadModel(const std::string& name) EXCLUDES(load_mu_, mu_);
  // One repository scan of poll mode, run now: loads new models, reloads models whose folder
  // changed (file sizes or modification times, config.pbtxt), unloads models whose folder is gone.
  void PollRepository() EXCLUDES(load_mu_, mu_);

  // The repository API (HTTP POST /v2/repository/models/M/load|unload, gRPC RepositoryModelLoad/
  // Unload): runs LoadModel/UnloadModel on the manager's lifecycle thread and calls `done` there
  // (or at once with UNAVAILABLE unless the control mode is kExplicit, or while shutting down).
  // A load request always reloads: every selected version is created anew, even when unchanged
  // (as Triton; polling keeps unchanged versions). `params` are checked before anything is queued:
  // an invalid `config` or file path is INVALID_ARGUMENT at once and the model stays as it was; a
  // config that fails to load leaves the running versions serving (LoadModel's contract).
  void RequestLoad(const std::string& name, std::function<void(Status)> done) {
    RequestLoad(name, LoadParameters{}, std::move(done));
  }
  void RequestLoad(const std::string& name, LoadParameters params,
                   std::function<void(Status)> done);
  void RequestUnload(const std::string& name, std::function<void(Status)> done);

  // Graceful shutdown, step 1: readiness turns false at once, new requests get UNAVAILABLE
  // ("server is shutting down"), polling stops, a load in progress is abandoned (its LoadModel
  // returns UNAVAILABLE at once; later loads are refused); requests already accepted keep running.
  void BeginShutdown() EXCLUDES(mu_);
  // Step 2: waits until every accepted request has had its callback, at most `timeout`. True when
  // none is left.
  bool WaitForIdle(std::chrono::milliseconds timeout) EXCLUDES(idle_mu_);
  // Requests accepted (queued or executing) whose callback has not returned yet.
  int64_t InFlight() const { return in_flight_.load(); }

  // Validates `request` (unknown model/version → NOT_FOUND; model not ready → UNAVAILABLE;
  // unknown, missing or duplicate input names, wrong dtype, rank or fixed dims, batch over
  // max_batch_size, unknown requested output → INVALID_ARGUMENT), then queues it. A full queue
  // answers UNAVAILABLE at once. `callback` is called exactly once (see inference.h).
  void Infer(std::unique_ptr<InferenceRequest> request, ResponseCallback callback);

  // Loads abandoned (max_load_time, shutdown) whose work is still running, process-wide. A
  // process that exits while one runs should leave with _exit: the work still uses the heap.
  static int RunningLoads();

  bool IsLive() const EXCLUDES(mu_);  // true until destruction starts
  // True when every model in the repository has at least one READY version and the repository
  // was loaded. An empty repository is ready
  // (with strict_readiness; otherwise once LoadRepository ran).
  bool IsReady() const EXCLUDES(mu_);
  // version -1: any READY version.
  bool IsModelReady(const std::string& name, int64_t version = -1) const;

  // NOT_FOUND for unknown model/version.
  StatusOr<ModelMetadata> GetMetadata(const std::string& name, int64_t version = -1) const;
  // The effective (auto-completed) config as Triton's JSON (model_config.h's ModelConfigToJson:
  // proto field names, enums as names, int64 as numbers).
  StatusOr<std::string> GetConfigJson(const std::string& name, int64_t version = -1) const;
  // The effective config message (for gRPC ModelConfig). Shared, immutable.
  StatusOr<std::shared_ptr<const inference::ModelConfig>> GetConfig(const std::string& name,
                                                                     int64_t version = -1) const;
  // name "" = every model; version -1 = every loaded version. Unknown name → empty vector.
  std::vector<ModelStatisticsSnapshot> GetStatistics(const std::string& name = "",
                                                     int64_t version = -1) const;
  // Every loaded model's versions; in kExplicit also the repository's models not loaded
  // (UNAVAILABLE, "not loaded"). A READY row may carry a reason: a newer load of that version
  // failed and it keeps serving.
  std::vector<ModelIndexEntry> Index() const EXCLUDES(mu_);

 private:
  explicit ModelManager(const ModelManagerOptions& options);
  // Loads each model (failures are logged and shown in Index()), then marks the repository
  // loaded.
  void LoadModels(const std::vector<std::string>& names) EXCLUDES(load_mu_, mu_);
  StatusOr<std::shared_ptr<ModelVersion>> FindVersion(const std::string& name,
                                                      int64_t version) const EXCLUDES(mu_);
  // Swaps `model` in for `old` (readiness switches here) and retires the versions it replaced.
  // Returns `result`, the load's outcome, as LoadModel does.
  Status Publish(std::shared_ptr<ModelState> model, std::shared_ptr<const ModelState> old,
                 const Status& result) REQUIRES(load_mu_) EXCLUDES(mu_);
  // Destroys replaced versions once nobody but `retired` holds them (or after retire_timeout),
  // then returns freed memory to the OS.
  void Retire(std::vector<std::shared_ptr<ModelVersion>> retired);
  void DoneInFlight() EXCLUDES(idle_mu_);
  // Folder fingerprints of the models loaded (not unloaded), by name.
  std::map<std::string, std::string> LoadedFingerprints() const EXCLUDES(mu_);
  Status CheckExplicitMode() const;
  // The repository's model folders less external_models (`names` as scanned).
  std::vector<std::string> OwnModels(std::vector<std::string> names) const;
  // Loads with `override` (model_loader.h); LoadModel's contract.
  Status LoadWith(const std::string& name, const LoadOverride& override)
      EXCLUDES(load_mu_, mu_);
  // LoadWith's work once load_mu_ is held; `loading` are the models whose load is in progress on
  // this thread (an ensemble loading its composing models first).
  Status LoadLocked(const std::string& name, const LoadOverride& override,
                    std::vector<std::string>* loading) REQUIRES(load_mu_) EXCLUDES(mu_);
  // Loads the composing models of `name` (when its config is an ensemble) that are not loaded
  // and are folders of the repository. Their failures only show in Index() and in the ensemble's
  // own load error.
  void LoadComposingModels(const std::string& name, const LoadOverride& override,
                           std::vector<std::string>* loading) REQUIRES(load_mu_) EXCLUDES(mu_);
  // Infer after the draining check: the lookup and the enqueue, counted in InFlight().
  void InferAccepted(std::unique_ptr<InferenceRequest> request, ResponseCallback callback);
  // EnsembleHost: the composing models of ensembles.
  StatusOr<ModelSignature> StepSignature(const std::string& name,
                                         int64_t version) const override;
  void InferStep(std::unique_ptr<InferenceRequest> request, ResponseCallback callback) override;
  ModelLoadOptions LoadOptions() const;
  // Runs the load on a thread of its own (AbandonableWork) and waits for it up to max_load_time or
  // BeginShutdown; nullopt when it was abandoned.
  std::optional<ModelLoad> RunLoad(const std::string& name,
                                   const std::shared_ptr<const ModelState>& old,
                                   const LoadOverride& override) REQUIRES(load_mu_) EXCLUDES(mu_);

  ModelManagerOptions options_;
  Clock* clock_;
  std::shared_ptr<ModelCache> cache_;  // shared with loads, which may outlive the manager
  Mutex load_mu_ ACQUIRED_BEFORE(mu_);  // serializes LoadModel/UnloadModel
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<ModelState>> models_ GUARDED_BY(mu_);
  bool repository_loaded_ GUARDED_BY(mu_) = false;
  bool shutting_down_ GUARDED_BY(mu_) = false;
  // The load LoadWith waits for (BeginShutdown abandons it); null when none.
  std::shared_ptr<AbandonableWork<ModelLoad>> current_load_ GUARDED_BY(mu_);
  std::atomic<bool> draining_{false};  // BeginShutdown ran: reject new requests
  std::atomic<int64_t> in_flight_{0};
  Mutex idle_mu_;
  CondVar idle_;  // notified when in_flight_ drops to 0 while draining_
  // Repository API operations and polling; stopped first on destruction.
  std::unique_ptr<LifecycleThread> lifecycle_;
  std::atomic<int64_t> override_dirs_{0};  // names the scratch folders of file overrides
};

}  // namespace inferd::serving
