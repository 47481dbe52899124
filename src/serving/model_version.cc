#include "serving/model_version.h"

#include <malloc.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "batching/batch_scheduler.h"
#include "common/mutex.h"
#include "serving/model_config.h"
#include "serving/processing_models.h"
#include "serving/warmup.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Parallelism {
  int instances = 1;      // instances at the start
  int max_instances = 1;  // scheduler workers: instances, or autoscaling's max_instances
  int threads = 1;        // intra-op threads per instance
};

Parallelism ResolveParallelism(const inference::ModelConfig& config,
                               const std::optional<AutoscaleOptions>& autoscale,
                               const ModelVersionOptions& o) {
  const int hw = o.total_threads > 0
                     ? o.total_threads
                     : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  Parallelism p;
  p.instances = ConfiguredInstanceCount(config);
  if (p.instances == 0) p.instances = std::max(1, o.default_instance_count);
  p.max_instances = p.instances;
  if (autoscale) {
    p.instances = AutoscaleStartCount(config, *autoscale);
    p.max_instances = autoscale->max_instances;
  }
  p.threads = config.inferd().threads_per_instance();
  if (p.threads == 0) p.threads = o.threads_per_instance;
  // Autoscaled: split the cores by the most instances, so a scale-up never oversubscribes them
  // (fewer instances at low load is the point: they are not needed then).
  if (p.threads == 0) p.threads = std::max(1, hw / p.max_instances);
  return p;
}

// Input-shape signatures whose memory plans each run context of the session keeps: a batching
// model sees every batch size from 1 to max_batch_size (the config's, or the one CompleteConfig
// fills in later, at most `autocomplete_max_batch_size`), each a signature of its own; with the
// executor's default of 8, batch sizes beyond the 8 most recent were re-planned (a recording run
// allocating every activation on the heap) again and again in steady state.
size_t PlansToKeep(const inference::ModelConfig& config, int autocomplete_max_batch_size) {
  const int max_batch = config.max_batch_size() > 0
                            ? config.max_batch_size()
                            : (config.input_size() == 0 && config.output_size() == 0
                                   ? autocomplete_max_batch_size
                                   : 0);
  return static_cast<size_t>(std::max(ExecutorOptions{}.max_cached_plans,
                                      static_cast<size_t>(std::max(0, max_batch))));
}

SessionOptions SessionOptionsFor(const inference::ModelConfig& config, int threads,
                                 int autocomplete_max_batch_size) {
  SessionOptions so;
  so.num_threads = threads;
  so.max_cached_plans = PlansToKeep(config, autocomplete_max_batch_size);
  // Graph optimizer level from config.pbtxt: inferd { optimization_level } (-1 none, 1 basic,
  // 2 extended, 3 all; 0 the default), else Triton's optimization { graph { level } } (-1 none,
  // >= 1 all).
  if (const int level = config.inferd().optimization_level(); level != 0) {
    so.optimization_level = level < 0 ? OptimizationLevel::kNone
                                      : static_cast<OptimizationLevel>(std::min(level, 3));
  } else if (const int graph = config.optimization().graph().level(); graph != 0) {
    so.optimization_level = graph < 0 ? OptimizationLevel::kNone : OptimizationLevel::kAll;
  }
  return so;
}

// The version's session: a processing model's graph built from its config (no file, nothing to
// cache or optimize), else the model file through the compiled-model cache.
StatusOr<std::unique_ptr<Session>> CreateVersionSession(const fs::path& model_path,
                                                        const inference::ModelConfig& config,
                                                        const ModelVersionOptions& options,
                                                        int threads, bool* cache_hit) {
  SessionOptions so = SessionOptionsFor(config, threads, options.autocomplete_max_batch_size);
  if (!IsProcessingModel(config)) return options.cache->CreateSession(model_path, so, cache_hit);
  ASSIGN_OR_RETURN(Model model,
                   BuildProcessingModel(config, model_path.parent_path().parent_path()));
  so.optimization_level = OptimizationLevel::kNone;
  return Session::Create(std::move(model), so);
}

// DEADLINE_EXCEEDED once the load was abandoned: checked between stages.
Status CheckNotAbandoned(const ModelVersionOptions& o, const char* before) {
  if (o.abandoned == nullptr || !o.abandoned->load()) return Status::Ok();
  return DeadlineExceeded("the load was abandoned before {}", before);
}

}  // namespace

StatusOr<std::shared_ptr<ModelVersion>> ModelVersion::Create(const std::string& name,
                                                             int64_t version,
                                                             const fs::path& model_path,
                                                             std::string fingerprint,
                                                             inference::ModelConfig config,
                                                             const ModelVersionOptions& options) {
  if (config.platform() == "ensemble") {
    return CreateEnsemble(name, version, model_path, std::move(fingerprint), std::move(config),
                          options);
  }
  ASSIGN_OR_RETURN(const std::optional<AutoscaleOptions> autoscale,
                   AutoscaleOptionsFromConfig(config));
  const Parallelism par = ResolveParallelism(config, autoscale, options);
  const auto t0 = std::chrono::steady_clock::now();
  bool cache_hit = false;
  auto session = CreateVersionSession(model_path, config, options, par.threads, &cache_hit);
  if (!session.ok()) return session.status();
  RETURN_IF_ERROR(CheckNotAbandoned(options, "warmup"));
  const double build_ms = MsSince(t0);
  std::shared_ptr<ModelVersion> v(new ModelVersion());
  v->fingerprint_ = std::move(fingerprint);
  v->session_ = std::move(session).value();
  RETURN_IF_ERROR(CompleteConfig(name, v->session_->inputs(), v->session_->outputs(),
                                 options.autocomplete_max_batch_size, &config));
  // Record the effective instance count in the config shown to clients.
  if (ConfiguredInstanceCount(config) == 0 && config.instance_group_size() > 0) {
    config.mutable_instance_group(0)->set_count(par.instances);
  }
  ASSIGN_OR_RETURN(v->signature_, BuildSignature(name, version, config, v->session_->inputs(),
                                                 v->session_->outputs()));
  RETURN_IF_ERROR(LoadLabels(model_path.parent_path().parent_path(), config, &v->signature_));
  v->config_ = std::make_shared<const inference::ModelConfig>(std::move(config));
  malloc_trim(0);  // loading's temporaries are gone; trimming after warmup would undo it
  const auto t1 = std::chrono::steady_clock::now();
  const bool warmup = DefaultWarmupRuns(*v->config_) || v->config_->model_warmup_size() > 0;
  if (warmup) {
    RETURN_IF_ERROR(WarmupSession(*v->session_, *v->config_, v->signature_,
                                  model_path.parent_path().parent_path(), par.instances,
                                  WarmupLimits{options.max_warmup_bytes, options.abandoned}));
  }
  const double warmup_ms = MsSince(t1);
  RETURN_IF_ERROR(CheckNotAbandoned(options, "starting the scheduler"));
  RETURN_IF_ERROR(v->StartScheduler(par.max_instances, par.instances, *options.clock));
  if (DefaultWarmupRuns(*v->config_)) v->WarmupWorkers(par.instances, options.max_warmup_bytes);
  if (autoscale) RETURN_IF_ERROR(v->StartAutoscaler(*autoscale, par.instances, *options.clock));
  const auto& c = *v->config_;
  spdlog::info(
      "loaded model '{}' version {} ({} instance(s){} × {} thread(s), max_batch_size {}{}; "
      "session {:.1f} ms{}, warmup {:.1f} ms)",
      name, version, par.instances,
      autoscale ? fmt::format(", autoscaled {}..{}", autoscale->min_instances,
                              autoscale->max_instances)
                : std::string(),
      par.threads, c.max_batch_size(),
      c.has_dynamic_batching() ? ", dynamic batching" : "", build_ms,
      options.cache->enabled() ? (cache_hit ? " from cache" : " (cache miss)") : "", warmup_ms);
  return v;
}

StatusOr<std::shared_ptr<ModelVersion>> ModelVersion::CreateEnsemble(
    const std::string& name, int64_t version, const fs::path& model_path, std::string fingerprint,
    inference::ModelConfig config, const ModelVersionOptions& options) {
  if (options.ensembles == nullptr) return FailedPrecondition("ensembles cannot be loaded here");
  if (config.name().empty()) config.set_name(name);
  if (config.name() != name) {
    return InvalidArgument("config name '{}' does not match the model folder '{}'", config.name(),
                           name);
  }
  std::shared_ptr<ModelVersion> v(new ModelVersion());
  v->fingerprint_ = std::move(fingerprint);
  ASSIGN_OR_RETURN(v->signature_, BuildSignature(name, version, config, {}, {}));
  RETURN_IF_ERROR(LoadLabels(model_path.parent_path().parent_path(), config, &v->signature_));
  ASSIGN_OR_RETURN(v->ensemble_, Ensemble::Create(v->signature_, config, options.ensembles));
  v->config_ = std::make_shared<const inference::ModelConfig>(std::move(config));
  spdlog::info("loaded ensemble '{}' version {} ({} step(s), max_batch_size {})", name, version,
               v->config_->ensemble_scheduling().step_size(), v->config_->max_batch_size());
  return v;
}

ModelVersion::~ModelVersion() {
  autoscaler_.reset();  // no scale event may reach the scheduler while it drains
  if (sequences_) sequences_->Shutdown();  // requests waiting for their turn fail
  scheduler_.reset();                      // drains: every queued callback runs
}

Status ModelVersion::StartScheduler(int max_instances, int instances, Clock& clock) {
  for (int i = 0; i < max_instances; ++i) {
    instances_.push_back(std::make_unique<ModelInstance>(i, signature_, *session_, stats_));
  }
  batching::BatchSchedulerOptions so = SchedulerOptionsFromConfig(*config_, max_instances);
  so.active_workers = instances;
  auto scheduler = batching::BatchScheduler<InferTask>::Create(
      std::move(so), clock,
      [this](int worker, std::vector<std::unique_ptr<InferTask>> batch) {
        instances_[worker]->ProcessBatch(std::move(batch));
      },
      // The scheduler gives up on a task only when its queue timeout expired.
      [this](std::unique_ptr<InferTask> task, Status s) {
        FailTask(signature_, stats_, *task, FailureReason::kTimeout, std::move(s));
      });
  if (!scheduler.ok()) return scheduler.status().WithContext("dynamic_batching");
  scheduler_ = std::move(scheduler).value();
  stats_.set_instances(instances);
  if (!config_->has_sequence_batching()) return Status::Ok();
  batching::BatchScheduler<InferTask>* raw = scheduler_.get();
  auto sequences = SequenceBatcher::Create(
      signature_, *config_, instances, clock,
      [raw](std::unique_ptr<InferTask>* task) { return raw->Schedule(task, {}); },
      [this](InferTask& task, FailureReason reason, Status s) {
        FailTask(signature_, stats_, task, reason, std::move(s));
      });
  if (!sequences.ok()) return sequences.status().WithContext("sequence_batching");
  sequences_ = std::move(sequences).value();
  return Status::Ok();
}

Status ModelVersion::StartAutoscaler(const AutoscaleOptions& options, int instances,
                                     Clock& clock) {
  ASSIGN_OR_RETURN(AutoscalePolicy policy, AutoscalePolicy::Create(options, instances));
  autoscaler_ = std::make_unique<Autoscaler>(
      std::move(policy), clock,
      [this] {
        const ModelStatisticsSnapshot s = stats_.Snapshot();
        LoadSample sample;
        sample.busy_ns = s.busy_ns;
        sample.requests = s.success.count + s.fail.count;
        return sample;
      },
      [this](const ScaleDecision& d) { ApplyScale(d); });
  return Status::Ok();
}

void ModelVersion::ApplyScale(const ScaleDecision& d) {
  const int before = scheduler_->active_workers();
  const int now = scheduler_->SetActiveWorkers(d.instances);
  stats_.set_instances(now);
  stats_.RecordScaleEvent(d.direction == ScaleDirection::kUp);
  spdlog::info("autoscaling '{}' version {}: {} -> {} instance(s) (utilization {:.0f}%, {:.1f} "
               "requests/s)",
               name(), version(), before, now, d.utilization * 100, d.qps);
}

void ModelVersion::Enqueue(std::unique_ptr<InferenceRequest> request, ResponseCallback callback) {
  auto rows = ValidateRequest(signature_, *request);
  if (!rows.ok()) {
    (ensemble_ ? ensemble_->stats() : stats_).RecordRejected(FailureReason::kInvalidInput);
    callback(rows.status(), EmptyResponse(signature_, *request));
    return;
  }
  if (ensemble_) return ensemble_->Run(std::move(request), *rows, std::move(callback));
  auto task = std::make_unique<InferTask>();
  task->rows = *rows;
  task->enqueued = std::chrono::steady_clock::now();
  task->callback = std::move(callback);
  const batching::ScheduleOptions so{request->priority, request->timeout};
  task->request = std::move(request);
  stats_.AddPending(1);
  if (sequences_) return sequences_->Enqueue(std::move(task));
  Status s = scheduler_->Schedule(&task, so);
  if (s.ok()) return;
  // Ownership stayed with us. The scheduler stops only when this version is destroyed, which
  // cannot happen during Enqueue: its UNAVAILABLE here is a full queue.
  const FailureReason reason = s.code() == StatusCode::kUnavailable
                                   ? FailureReason::kQueueFull
                                   : FailureReasonFromCode(s.code());
  FailTask(signature_, stats_, *task, reason, std::move(s));
}

// Best effort: a failure is only logged (WarmupSession already ran the model). Each request is a
// whole batch (max_batch_size rows), which the scheduler dispatches at once: batch-1 requests
// would wait out max_queue_delay (a 5 s delay made every load take 5 s).
void ModelVersion::WarmupWorkers(int instances, uint64_t max_bytes) {
  const int64_t rows = signature_.batching() ? std::max(1, signature_.max_batch_size) : 1;
  if (ZeroRequestBytes(signature_, rows) > max_bytes) {
    spdlog::debug("worker warmup of '{}' skipped: a batch of {} is over the warmup byte limit",
                  name(), rows);
    return;
  }
  stats_.set_paused(true);  // warmup requests are not requests
  Mutex mu;
  CondVar done;
  int left = std::max(1, instances);  // guarded by mu
  for (int i = 0, n = left; i < n; ++i) {
    auto task = std::make_unique<InferTask>();
    task->request = ZeroRequest(signature_, rows);
    task->rows = rows;
    task->enqueued = std::chrono::steady_clock::now();
    task->callback = [&](Status s, InferenceResponse) {
      if (!s.ok()) spdlog::debug("worker warmup of '{}': {}", name(), s.message());
      MutexLock l(&mu);
      if (--left == 0) done.NotifyAll();
    };
    stats_.AddPending(1);
    Status s = scheduler_->Schedule(&task, {});
    if (!s.ok()) FailTask(signature_, stats_, *task, FailureReasonFromCode(s.code()), std::move(s));
  }
  MutexLock l(&mu);
  while (left != 0) done.Wait(&mu);
  stats_.set_paused(false);
}

ModelStatisticsSnapshot ModelVersion::Statistics() const {
  ModelStatisticsSnapshot s = ensemble_ ? ensemble_->Statistics() : stats_.Snapshot();
  if (session_) s.memory_plans_recorded = session_->executor().plans_recorded();
  s.name = name();
  s.version = version();
  return s;
}

}  // namespace inferd::serving
