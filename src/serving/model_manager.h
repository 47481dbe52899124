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
//
// Thread-safety: every method may be called concurrently from any thread. Infer never blocks on
// inference: it validates, enqueues and returns; the callback runs on a model worker thread (or on
// the caller's thread when the request is rejected before queuing). Destruction rejects nothing
// already queued: it drains the queues (every callback runs), then joins the workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/histogram.h"
#include "common/status.h"
#include "serving/inference.h"

namespace inference {
class ModelConfig;  // generated from proto/model_config.proto
}

namespace inferd::serving {

struct ModelManagerOptions {
  // Folder holding one sub-folder per model. Required.
  std::filesystem::path repository;
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
  // Reject config.pbtxt fields inferd does not know (true), or accept them with a warning (false),
  // so a full Triton config with fields we ignore still loads.
  bool strict_config = false;
  // Server readiness requires every model of the repository to be READY (Triton's
  // --strict-readiness); false: ready once the repository was scanned.
  bool strict_readiness = true;
  // Time source for queue delays and timeouts; nullptr = the process's RealClock. Must outlive the
  // manager.
  Clock* clock = nullptr;
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
  std::string reason;    // why UNAVAILABLE; empty otherwise
};

// A count and the total time it took (Triton's StatisticDuration).
struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// Per batch size executed (Triton's InferBatchStatistics).
struct BatchStat {
  int64_t batch_size = 0;
  DurationStat compute_input, compute_infer, compute_output;
};

// Statistics and metrics of one model version, a consistent snapshot.
struct ModelStatisticsSnapshot {
  std::string name;
  int64_t version = 0;
  uint64_t last_inference_ms = 0;  // wall-clock ms since the Unix epoch of the last inference; 0
  uint64_t inference_count = 0;    // requests' batch rows inferred successfully
  uint64_t execution_count = 0;    // Session::Run calls (batches)
  // Triton's InferStatistics.
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::vector<BatchStat> batch_stats;  // ascending batch size
  // Prometheus: failed requests by reason: "invalid_argument", "timeout", "queue_full",
  // "unavailable", "internal".
  std::map<std::string, uint64_t> failures;
  uint64_t success_requests = 0;
  HistogramSnapshot request_us;  // end-to-end (enqueue → callback), µs
  HistogramSnapshot queue_us;    // enqueue → batch start, µs
  HistogramSnapshot compute_us;  // batch assembly + Session::Run + split, µs
  HistogramSnapshot batch_size;  // rows per executed batch
  int64_t pending = 0;           // requests queued or executing now
};

class ModelManager {
 public:
  // Validates options (the repository must be an existing directory). Loads nothing yet.
  static StatusOr<std::unique_ptr<ModelManager>> Create(const ModelManagerOptions& options);
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // Scans the repository and loads every model (versions chosen by each config's version_policy,
  // default: latest 1). Per-model failures are recorded in Index() and logged, not returned; a
  // non-OK status means the repository itself could not be read.
  Status LoadRepository();
  // Loads (or reloads, replacing the running versions once the new ones are ready) one model of
  // the repository. Returns the model's failure reason as a Status too.
  Status LoadModel(const std::string& name);
  // Unloads a model: it stays in Index() as UNAVAILABLE ("unloaded"), new requests get
  // UNAVAILABLE, requests already queued still run. NOT_FOUND for a name never loaded.
  Status UnloadModel(const std::string& name);

  // Validates `request` (unknown model/version → NOT_FOUND; model not ready → UNAVAILABLE;
  // unknown, missing or duplicate input names, wrong dtype, rank or fixed dims, batch over
  // max_batch_size, unknown requested output → INVALID_ARGUMENT), then queues it. A full queue
  // answers UNAVAILABLE at once. `callback` is called exactly once (see inference.h).
  void Infer(std::unique_ptr<InferenceRequest> request, ResponseCallback callback);

  bool IsLive() const;  // true until destruction starts
  // True when every model in the repository has at least one READY version and the repository
  // was loaded. An empty repository is ready
  // (with strict_readiness; otherwise once LoadRepository ran).
  bool IsReady() const;
  // version -1: any READY version.
  bool IsModelReady(const std::string& name, int64_t version = -1) const;

  // NOT_FOUND for unknown model/version.
  StatusOr<ModelMetadata> GetMetadata(const std::string& name, int64_t version = -1) const;
  // The effective (auto-completed) config, as JSON with Triton's field names (snake_case,
  // enums as names, int64 as strings as protobuf's JSON mapping does).
  StatusOr<std::string> GetConfigJson(const std::string& name, int64_t version = -1) const;
  // The effective config message (for gRPC ModelConfig). Shared, immutable.
  StatusOr<std::shared_ptr<const inference::ModelConfig>> GetConfig(const std::string& name,
                                                                     int64_t version = -1) const;
  // name "" = every model; version -1 = every loaded version. Unknown name → empty vector.
  std::vector<ModelStatisticsSnapshot> GetStatistics(const std::string& name = "",
                                                     int64_t version = -1) const;
  std::vector<ModelIndexEntry> Index() const;

 private:
  struct Model;         // one model: its versions and their state
  struct ModelVersion;  // one loaded version: session, config, scheduler, instances, stats
  explicit ModelManager(const ModelManagerOptions& options);
  StatusOr<std::shared_ptr<ModelVersion>> FindVersion(const std::string& name,
                                                      int64_t version) const;
  StatusOr<std::shared_ptr<ModelVersion>> LoadVersion(const std::string& name, int64_t version,
                                                      const std::filesystem::path& model_path,
                                                      inference::ModelConfig config);
  static Status Warmup(ModelVersion& version, const std::filesystem::path& model_dir);

  ModelManagerOptions options_;
  Clock* clock_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Model>> models_;  // guarded by mu_
  bool repository_loaded_ = false;                        // guarded by mu_
  bool shutting_down_ = false;                            // guarded by mu_
};

}  // namespace inferd::serving
