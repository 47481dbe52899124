#include "serving/model_manager.h"

#include <malloc.h>

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "batching/batch_assembly.h"
#include "batching/batch_scheduler.h"
#include "session/session.h"
#include "serving/model_config.h"
#include "serving/repository_scan.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;
using SteadyTime = std::chrono::steady_clock::time_point;

uint64_t NsBetween(SteadyTime a, SteadyTime b) {
  return static_cast<uint64_t>(
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count()));
}

// One queued request: the scheduler's Task.
struct InferTask {
  std::unique_ptr<InferenceRequest> request;
  ResponseCallback callback;
  int64_t rows = 1;
  SteadyTime enqueued;  // real time, for statistics (queue delays use the injected Clock)
  int64_t size() const { return rows; }
};

std::vector<double> LatencyBoundsUs() { return Histogram::ExponentialBounds(50, 2, 18); }

std::string FailureReason(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kUnavailable:
      if (s.message().find("queue is full") != std::string::npos) return "queue_full";
      if (s.message().find("timeout") != std::string::npos) return "timeout";
      return "unavailable";
    default: return "internal";
  }
}

std::string ReadFile(const fs::path& p, bool* ok) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  *ok = static_cast<bool>(f) || f.eof();
  return ss.str();
}

}  // namespace

// Statistics of one model version. Histograms are lock-free; the rest is guarded by mu.
struct VersionStats {
  std::mutex mu;
  uint64_t last_inference_ms = 0, inference_count = 0, execution_count = 0, success_requests = 0;
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::map<int64_t, BatchStat> batches;
  std::map<std::string, uint64_t> failures;
  Histogram request_us{LatencyBoundsUs()}, queue_us{LatencyBoundsUs()},
      compute_us{LatencyBoundsUs()}, batch_size{Histogram::ExponentialBounds(1, 2, 11)};
  std::atomic<int64_t> pending{0};

  void RecordFailure(const Status& s, uint64_t ns) {
    std::lock_guard<std::mutex> l(mu);
    ++failures[FailureReason(s)];
    ++fail.count;
    fail.ns += ns;
  }
};

struct ModelManager::ModelVersion {
  struct InputSpec {
    std::string name;
    DataType dtype;
    Shape dims;  // config dims, without the batch dim
    bool ragged = false;
    std::optional<Shape> reshape;
    std::vector<std::string> params;  // the model's symbolic dim names (with the batch dim)
  };
  struct OutputSpec {
    std::string name;
    DataType dtype;
    Shape dims;
    size_t model_index = 0;
    // Per output dim: the (input, dim) it follows under ragged batching, or (-1, -1).
    std::vector<std::pair<int, int>> follows;
  };

  std::string name;
  int64_t version = 0;
  std::string fingerprint;  // of the version folder when it was loaded
  std::shared_ptr<const inference::ModelConfig> config;
  std::unique_ptr<Session> session;
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
  double pad_value = 0;
  VersionStats stats;
  // True while warmup requests run through the scheduler, before the version is published.
  std::atomic<bool> warming{false};
  std::unique_ptr<batching::BatchScheduler<InferTask>> scheduler;  // destroyed first

  ~ModelVersion() { scheduler.reset(); }  // drains: every queued callback runs

  int max_batch_size() const { return config->max_batch_size(); }
  StatusOr<int64_t> Validate(const InferenceRequest& r) const;
  void ProcessBatch(std::vector<std::unique_ptr<InferTask>> batch);
  void RunGroup(std::span<std::unique_ptr<InferTask>> tasks, SteadyTime start);
  void Finish(InferTask& task, Status s, std::vector<std::pair<std::string, Tensor>> outputs);
  InferenceResponse EmptyResponse(const InferenceRequest& r) const {
    return InferenceResponse{name, version, r.id, {}};
  }
};

// Immutable once published in models_: a (re)load builds a new Model and swaps it in.
struct ModelManager::Model {
  std::string name;
  std::string error;  // whole-model failure (bad config, no versions)
  bool unloaded = false;
  std::string fingerprint;  // of the model folder when this load started
  std::string config_text;  // config.pbtxt the READY versions were loaded with
  std::map<int64_t, std::shared_ptr<ModelVersion>> versions;  // READY
  std::map<int64_t, std::string> failed;                      // version → reason
  // READY versions kept serving although their reload failed: version → reason.
  std::map<int64_t, std::string> reload_errors;
};

// ---- validation and execution ----

StatusOr<int64_t> ModelManager::ModelVersion::Validate(const InferenceRequest& r) const {
  const bool batching = max_batch_size() > 0;
  std::vector<const Tensor*> given(inputs.size(), nullptr);
  for (const InferInput& in : r.inputs) {
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const InputSpec& s) { return s.name == in.name; });
    if (it == inputs.end()) {
      std::string names;
      for (const auto& s : inputs) names += (names.empty() ? "" : ", ") + s.name;
      return InvalidArgument("unexpected input '{}' for model '{}' (expected: {})", in.name, name,
                             names);
    }
    const size_t k = it - inputs.begin();
    if (given[k] != nullptr) return InvalidArgument("input '{}' is given twice", in.name);
    given[k] = &in.tensor;
  }
  int64_t batch = -1;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const InputSpec& spec = inputs[k];
    if (given[k] == nullptr) {
      return InvalidArgument("missing input '{}' for model '{}'", spec.name, name);
    }
    const Tensor& t = *given[k];
    Shape expected = spec.dims;
    if (batching) expected.insert(expected.begin(), -1);
    if (t.dtype() != spec.dtype) {
      return InvalidArgument("input '{}': datatype {} but model '{}' expects {}", spec.name,
                             KServeName(t.dtype()), name, KServeName(spec.dtype));
    }
    bool match = t.rank() == static_cast<int64_t>(expected.size());
    for (size_t d = 0; match && d < expected.size(); ++d) {
      match = expected[d] == -1 || expected[d] == t.dim(d);
    }
    if (!match) {
      return InvalidArgument("input '{}': shape {} does not match the model's {}", spec.name,
                             ShapeToString(t.shape()), ShapeToString(expected));
    }
    if (t.NumElements() > 0 && t.raw_data() == nullptr) {
      return InvalidArgument("input '{}' has no data", spec.name);
    }
    if (batching) {
      if (t.dim(0) < 1 || t.dim(0) > max_batch_size()) {
        return InvalidArgument("input '{}': batch size {} is outside [1, max_batch_size {}]",
                               spec.name, t.dim(0), max_batch_size());
      }
      if (batch != -1 && t.dim(0) != batch) {
        return InvalidArgument("input '{}': batch size {} differs from the other inputs' {}",
                               spec.name, t.dim(0), batch);
      }
      batch = t.dim(0);
    }
  }
  std::set<std::string> requested;
  for (const std::string& o : r.requested_outputs) {
    if (std::none_of(outputs.begin(), outputs.end(),
                     [&](const OutputSpec& s) { return s.name == o; })) {
      return InvalidArgument("unknown output '{}' requested from model '{}'", o, name);
    }
    if (!requested.insert(o).second) return InvalidArgument("output '{}' requested twice", o);
  }
  return batching ? std::max<int64_t>(batch, 1) : 1;
}

void ModelManager::ModelVersion::Finish(InferTask& task, Status s,
                                        std::vector<std::pair<std::string, Tensor>> outs) {
  const SteadyTime now = std::chrono::steady_clock::now();
  const uint64_t ns = NsBetween(task.enqueued, now);
  if (warming.load(std::memory_order_relaxed)) {
    // Warmup through the scheduler: not a request, no statistics.
  } else if (stats.request_us.Record(static_cast<double>(ns) / 1000.0); s.ok()) {
    std::lock_guard<std::mutex> l(stats.mu);
    ++stats.success.count;
    stats.success.ns += ns;
    ++stats.success_requests;
  } else {
    stats.RecordFailure(s, ns);
  }
  InferenceResponse response = EmptyResponse(*task.request);
  if (s.ok()) response.outputs = std::move(outs);
  stats.pending.fetch_sub(1, std::memory_order_relaxed);
  ResponseCallback cb = std::move(task.callback);
  cb(std::move(s), std::move(response));
}

void ModelManager::ModelVersion::ProcessBatch(std::vector<std::unique_ptr<InferTask>> batch) {
  const SteadyTime start = std::chrono::steady_clock::now();
  for (auto& t : batch) {
    if (warming.load(std::memory_order_relaxed)) break;
    const uint64_t ns = NsBetween(t->enqueued, start);
    stats.queue_us.Record(static_cast<double>(ns) / 1000.0);
    std::lock_guard<std::mutex> l(stats.mu);
    ++stats.queue.count;
    stats.queue.ns += ns;
  }
  RunGroup(std::span(batch), start);
}

void ModelManager::ModelVersion::RunGroup(std::span<std::unique_ptr<InferTask>> tasks,
                                          SteadyTime start) {
  const bool batching = max_batch_size() > 0;
  std::vector<int64_t> rows;
  int64_t total_rows = 0;
  for (auto& t : tasks) {
    rows.push_back(t->rows);
    total_rows += t->rows;
  }
  auto fail_all = [&](const Status& s) {
    for (auto& t : tasks) Finish(*t, s, {});
  };

  // Inputs: concatenate (padding ragged ones), then reshape as configured.
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const InputSpec& spec : inputs) {
    std::vector<Tensor> parts;
    for (auto& t : tasks) {
      for (const InferInput& in : t->request->inputs) {
        if (in.name == spec.name) parts.push_back(in.tensor);
      }
    }
    Tensor fed;
    if (batching) {
      auto concat = batching::ConcatBatch(parts, {.allow_ragged = spec.ragged,
                                                  .pad_value = pad_value});
      if (!concat.ok()) {
        if (tasks.size() > 1) {
          // Requests whose shapes cannot share a batch run one by one.
          for (size_t i = 0; i < tasks.size(); ++i) RunGroup(tasks.subspan(i, 1), start);
          return;
        }
        fail_all(concat.status());
        return;
      }
      fed = std::move(concat).value();
    } else {
      fed = parts.at(0);
    }
    if (spec.reshape) {
      Shape shape = *spec.reshape;
      if (batching) shape.insert(shape.begin(), total_rows);
      auto r = fed.Reshaped(shape);
      if (!r.ok()) {
        fail_all(InvalidArgument("input '{}': cannot reshape {} to {}", spec.name,
                                 ShapeToString(fed.shape()), ShapeToString(shape)));
        return;
      }
      fed = std::move(r).value();
    }
    feeds.emplace_back(spec.name, std::move(fed));
  }
  const SteadyTime t_input = std::chrono::steady_clock::now();

  std::vector<Tensor> results;
  Status run = session->Run(feeds, &results);
  const SteadyTime t_infer = std::chrono::steady_clock::now();
  if (!run.ok()) {
    fail_all(run.code() == StatusCode::kInvalidArgument ? run
                                                        : Internal("{}", run.ToString()));
    return;
  }

  // Outputs: split per request, cropping dims that follow a padded input dim.
  std::vector<std::vector<std::pair<std::string, Tensor>>> per_task(tasks.size());
  for (const OutputSpec& spec : outputs) {
    bool wanted = false;
    for (auto& t : tasks) {
      const auto& req = t->request->requested_outputs;
      wanted |= req.empty() || std::find(req.begin(), req.end(), spec.name) != req.end();
    }
    if (!wanted) continue;
    if (spec.model_index >= results.size()) {
      fail_all(Internal("model '{}' produced no output '{}'", name, spec.name));
      return;
    }
    const Tensor& out = results[spec.model_index];
    std::vector<Tensor> pieces;
    if (batching) {
      if (out.rank() < 1 || out.dim(0) != total_rows) {
        fail_all(Internal("output '{}' has shape {}, expected a batch of {}", spec.name,
                          ShapeToString(out.shape()), total_rows));
        return;
      }
      std::vector<Shape> shapes;
      bool crop = false;
      for (size_t i = 0; i < tasks.size(); ++i) {
        Shape s(out.rank(), -1);
        s[0] = rows[i];
        for (size_t d = 1; d < spec.follows.size() && d < s.size(); ++d) {
          auto [k, e] = spec.follows[d];
          if (k < 0) continue;
          for (const InferInput& in : tasks[i]->request->inputs) {
            if (in.name == inputs[k].name && e < in.tensor.rank()) s[d] = in.tensor.dim(e);
          }
          crop |= s[d] != out.dim(d);
        }
        shapes.push_back(std::move(s));
      }
      auto split = batching::SplitBatch(out, rows, crop ? std::span<const Shape>(shapes)
                                                        : std::span<const Shape>());
      if (!split.ok()) {
        fail_all(Internal("output '{}': {}", spec.name, split.status().message()));
        return;
      }
      pieces = std::move(split).value();
    } else {
      pieces.push_back(out);
    }
    for (size_t i = 0; i < tasks.size(); ++i) {
      Tensor piece = pieces[i];
      // Never hand out a view into the request body (an Identity output may alias its input).
      if (!piece.owns_data()) piece = piece.Clone();
      for (const InferInput& in : tasks[i]->request->inputs) {
        const auto* p = static_cast<const uint8_t*>(piece.raw_data());
        const auto* b = static_cast<const uint8_t*>(in.tensor.raw_data());
        if (b != nullptr && p >= b && p < b + in.tensor.ByteSize()) piece = piece.Clone();
      }
      per_task[i].emplace_back(spec.name, std::move(piece));
    }
  }
  const SteadyTime t_output = std::chrono::steady_clock::now();

  if (!warming.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> l(stats.mu);
    ++stats.execution_count;
    stats.inference_count += total_rows;
    stats.last_inference_ms = WallMillis();
    const uint64_t n_in = NsBetween(start, t_input), n_inf = NsBetween(t_input, t_infer),
                   n_out = NsBetween(t_infer, t_output);
    for (DurationStat* d : {&stats.compute_input, &stats.compute_infer, &stats.compute_output}) {
      d->count += tasks.size();
    }
    stats.compute_input.ns += n_in * tasks.size();
    stats.compute_infer.ns += n_inf * tasks.size();
    stats.compute_output.ns += n_out * tasks.size();
    BatchStat& b = stats.batches[total_rows];
    b.batch_size = total_rows;
    b.compute_input.count++;
    b.compute_input.ns += n_in;
    b.compute_infer.count++;
    b.compute_infer.ns += n_inf;
    b.compute_output.count++;
    b.compute_output.ns += n_out;
  }
  if (!warming.load(std::memory_order_relaxed)) {
    stats.compute_us.Record(static_cast<double>(NsBetween(start, t_output)) / 1000.0);
    stats.batch_size.Record(static_cast<double>(total_rows));
  }

  for (size_t i = 0; i < tasks.size(); ++i) {
    // Order as requested (all outputs in config order when none was named).
    auto& outs = per_task[i];
    const auto& req = tasks[i]->request->requested_outputs;
    if (!req.empty()) {
      std::vector<std::pair<std::string, Tensor>> ordered;
      for (const std::string& n : req) {
        for (auto& o : outs) {
          if (o.first == n) ordered.push_back(o);
        }
      }
      outs = std::move(ordered);
    }
    Finish(*tasks[i], Status::Ok(), std::move(outs));
  }
}

// ---- ModelManager ----

ModelManager::ModelManager(const ModelManagerOptions& options)
    : options_(options),
      clock_(options.clock ? options.clock : &RealClock::Get()),
      cache_(std::make_unique<ModelCache>(
          ModelCacheOptions{options.cache_dir, options.build_id})) {
  lifecycle_ = std::thread([this] { LifecycleLoop(); });
}

ModelManager::~ModelManager() {
  {
    std::lock_guard<std::mutex> l(ops_mu_);
    ops_stop_ = true;
  }
  ops_cv_.notify_all();
  lifecycle_.join();  // finishes the load in progress; cancels queued ones
  std::map<std::string, std::shared_ptr<Model>> models;
  {
    std::lock_guard<std::mutex> l(mu_);
    shutting_down_ = true;
    models.swap(models_);
  }
  models.clear();  // drains every version's queue
}

StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(const ModelManagerOptions& options) {
  std::error_code ec;
  if (options.repository.empty() || !fs::is_directory(options.repository, ec)) {
    return InvalidArgument("model repository '{}' is not a directory",
                           options.repository.string());
  }
  if (options.total_threads < 0 || options.default_instance_count < 0 ||
      options.threads_per_instance < 0 || options.autocomplete_max_batch_size < 0) {
    return InvalidArgument("model manager thread, instance and batch options must be >= 0");
  }
  if (options.control_mode == ModelControlMode::kPoll && options.poll_interval.count() <= 0) {
    return InvalidArgument("the repository poll interval must be > 0 in poll mode");
  }
  if (options.retire_timeout.count() < 0) {
    return InvalidArgument("retire_timeout must be >= 0");
  }
  return std::unique_ptr<ModelManager>(new ModelManager(options));
}

Status ModelManager::LoadRepository() {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(options_.repository, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.empty() || n[0] == '.' || !it->is_directory()) continue;
    names.push_back(n);
  }
  if (ec) {
    return Unavailable("cannot read model repository '{}': {}", options_.repository.string(),
                       ec.message());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    Status s = LoadModel(n);
    if (!s.ok()) spdlog::warn("model '{}' is unavailable: {}", n, s.message());
  }
  std::lock_guard<std::mutex> l(mu_);
  repository_loaded_ = true;
  return Status::Ok();
}

StatusOr<std::shared_ptr<ModelManager::ModelVersion>> ModelManager::LoadVersion(
    const std::string& name, int64_t version, const fs::path& model_path,
    inference::ModelConfig config) {
  const int hw = options_.total_threads > 0
                     ? options_.total_threads
                     : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  int instances = ConfiguredInstanceCount(config);
  if (instances == 0) instances = std::max(1, options_.default_instance_count);
  int threads = config.inferd().threads_per_instance();
  if (threads == 0) threads = options_.threads_per_instance;
  if (threads == 0) threads = std::max(1, hw / instances);

  SessionOptions so;
  so.num_threads = threads;
  // Graph optimizer level from config.pbtxt: inferd { optimization_level } (-1 none, 1 basic,
  // 2 extended, 3 all; 0 the default), else Triton's optimization { graph { level } } (-1 none,
  // >= 1 all).
  if (const int level = config.inferd().optimization_level(); level != 0) {
    so.optimization_level = level < 0 ? OptimizationLevel::kNone
                                      : static_cast<OptimizationLevel>(std::min(level, 3));
  } else if (const int graph = config.optimization().graph().level(); graph != 0) {
    so.optimization_level = graph < 0 ? OptimizationLevel::kNone : OptimizationLevel::kAll;
  }
  const auto t0 = std::chrono::steady_clock::now();
  bool cache_hit = false;
  auto session = cache_->CreateSession(model_path, so, &cache_hit);
  if (!session.ok()) return session.status();
  const double build_ms = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - t0).count();
  auto v = std::make_shared<ModelVersion>();
  v->name = name;
  v->version = version;
  v->session = std::move(session).value();
  RETURN_IF_ERROR(CompleteConfig(name, v->session->inputs(), v->session->outputs(),
                                 options_.autocomplete_max_batch_size, &config));
  // Record the effective instance count in the config shown to clients.
  if (ConfiguredInstanceCount(config) == 0 && config.instance_group_size() > 0) {
    config.mutable_instance_group(0)->set_count(instances);
  }
  v->pad_value = config.inferd().ragged_pad_value();
  const auto& model_inputs = v->session->inputs();
  for (const auto& in : config.input()) {
    ModelVersion::InputSpec spec;
    spec.name = in.name();
    ASSIGN_OR_RETURN(spec.dtype, FromConfigDataType(in.data_type()));
    spec.dims.assign(in.dims().begin(), in.dims().end());
    spec.ragged = in.allow_ragged_batch();
    if (in.has_reshape()) spec.reshape = Shape(in.reshape().shape().begin(),
                                               in.reshape().shape().end());
    for (const ValueInfo& vi : model_inputs) {
      if (vi.name == in.name() && vi.shape) {
        for (const Dim& d : *vi.shape) spec.params.push_back(d.known() ? "" : d.param);
      }
    }
    v->inputs.push_back(std::move(spec));
  }
  const auto& model_outputs = v->session->outputs();
  for (const auto& out : config.output()) {
    ModelVersion::OutputSpec spec;
    spec.name = out.name();
    ASSIGN_OR_RETURN(spec.dtype, FromConfigDataType(out.data_type()));
    spec.dims.assign(out.dims().begin(), out.dims().end());
    for (size_t i = 0; i < model_outputs.size(); ++i) {
      if (model_outputs[i].name != out.name()) continue;
      spec.model_index = i;
      if (!model_outputs[i].shape) continue;
      for (const Dim& d : *model_outputs[i].shape) {
        std::pair<int, int> f{-1, -1};
        for (size_t k = 0; k < v->inputs.size() && !d.param.empty() && f.first < 0; ++k) {
          if (!v->inputs[k].ragged) continue;
          const auto& ps = v->inputs[k].params;
          for (size_t e = 1; e < ps.size(); ++e) {
            if (ps[e] == d.param) f = {static_cast<int>(k), static_cast<int>(e)};
          }
        }
        spec.follows.push_back(f);
      }
    }
    v->outputs.push_back(std::move(spec));
  }
  v->config = std::make_shared<const inference::ModelConfig>(config);
  malloc_trim(0);  // loading's temporaries are gone; trimming after warmup would undo it
  const auto t1 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(Warmup(*v, model_path.parent_path().parent_path(), instances));
  const double warmup_ms = std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - t1).count();

  ModelVersion* raw = v.get();
  auto scheduler = batching::BatchScheduler<InferTask>::Create(
      SchedulerOptionsFromConfig(config, instances), *clock_,
      [raw](int, std::vector<std::unique_ptr<InferTask>> batch) {
        raw->ProcessBatch(std::move(batch));
      },
      [raw](std::unique_ptr<InferTask> task, Status s) {
        raw->Finish(*task, std::move(s), {});
      });
  if (!scheduler.ok()) return scheduler.status().WithContext("dynamic_batching");
  v->scheduler = std::move(scheduler).value();
  WarmupWorkers(*v, instances);
  spdlog::info(
      "loaded model '{}' version {} ({} instance(s) × {} thread(s), max_batch_size {}{}; "
      "session {:.1f} ms{}, warmup {:.1f} ms)",
      name, version, instances, threads, config.max_batch_size(),
      config.has_dynamic_batching() ? ", dynamic batching" : "", build_ms,
      cache_->enabled() ? (cache_hit ? " from cache" : " (cache miss)") : "", warmup_ms);
  return v;
}

namespace {

// One warmup step: the feeds of one model_warmup entry and how often to run them.
struct WarmupPlan {
  std::string name;
  std::vector<std::pair<std::string, Tensor>> feeds;
  uint32_t count = 1;
};

}  // namespace

// The scheduler's worker threads (thread-local allocator arenas, intra-op thread pools) get one
// batch-1 request each, so that the first real request finds them warm. Best effort: a failure is
// only logged (Warmup already ran the model).
void ModelManager::WarmupWorkers(ModelVersion& v, int instances) {
  v.warming.store(true);
  std::mutex mu;
  std::condition_variable cv;
  int left = std::max(1, instances);
  for (int i = 0, n = left; i < n; ++i) {
    auto request = std::make_unique<InferenceRequest>();
    request->model_name = v.name;
    for (const auto& in : v.inputs) {
      Shape shape = in.dims;
      for (int64_t& d : shape) d = d < 0 ? 1 : d;
      if (v.max_batch_size() > 0) shape.insert(shape.begin(), 1);
      Tensor t = Tensor::Allocate(in.dtype, shape);
      std::memset(t.raw_data(), 0, t.ByteSize());
      request->inputs.push_back({in.name, std::move(t)});
    }
    auto task = std::make_unique<InferTask>();
    task->request = std::move(request);
    task->enqueued = std::chrono::steady_clock::now();
    task->callback = [&](Status s, InferenceResponse) {
      if (!s.ok()) spdlog::debug("worker warmup of '{}': {}", v.name, s.message());
      std::lock_guard<std::mutex> l(mu);
      if (--left == 0) cv.notify_all();
    };
    v.stats.pending.fetch_add(1, std::memory_order_relaxed);
    Status s = v.scheduler->Schedule(&task, {});
    if (!s.ok()) v.Finish(*task, std::move(s), {});
  }
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return left == 0; });
  v.warming.store(false);
}

Status ModelManager::Warmup(ModelVersion& v, const fs::path& model_dir, int instances) {
  const auto& config = *v.config;
  std::vector<WarmupPlan> plans;
  for (const auto& w : config.model_warmup()) {
    WarmupPlan plan{w.name(), {}, std::max<uint32_t>(1, w.count())};
    std::mt19937 rng(0);
    for (const auto& [name, in] : w.inputs()) {
      ASSIGN_OR_RETURN(DataType dtype, FromConfigDataType(in.data_type()));
      Shape shape(in.dims().begin(), in.dims().end());
      if (config.max_batch_size() > 0) shape.insert(shape.begin(), w.batch_size());
      for (int64_t d : shape) {
        if (d < 0) return InvalidArgument("model_warmup '{}': input '{}' needs fixed dims",
                                          w.name(), name);
      }
      Tensor t = Tensor::Allocate(dtype, shape);
      if (in.has_random_data()) {
        DispatchNumeric(
            dtype,
            [&](auto tag) {
              using T = decltype(tag);
              for (int64_t i = 0; i < t.NumElements(); ++i) t.data<T>()[i] = static_cast<T>(rng() % 4);
            },
            [] {});
      } else if (in.has_input_data_file()) {
        bool ok = false;
        const std::string bytes = ReadFile(model_dir / "warmup" / in.input_data_file(), &ok);
        if (!ok || bytes.size() != t.ByteSize()) {
          return InvalidArgument("model_warmup '{}': file '{}' must hold {} bytes", w.name(),
                                 in.input_data_file(), t.ByteSize());
        }
        std::memcpy(t.raw_data(), bytes.data(), bytes.size());
      }
      plan.feeds.emplace_back(name, std::move(t));
    }
    plans.push_back(std::move(plan));
  }
  // Without model_warmup: zeros at batch 1 and at max_batch_size (variable dims as 1), so the
  // kernels' per-shape state and the arenas exist before the first request.
  const bool default_warmup = plans.empty();
  if (default_warmup) {
    std::vector<int64_t> batches{1};
    if (config.max_batch_size() > 1) batches.push_back(config.max_batch_size());
    for (int64_t b : batches) {
      WarmupPlan plan{fmt::format("default warmup at batch {}", b), {}, 1};
      for (const auto& in : v.inputs) {
        Shape shape = in.dims;
        for (int64_t& d : shape) d = d < 0 ? 1 : d;
        if (config.max_batch_size() > 0) shape.insert(shape.begin(), b);
        Tensor t = Tensor::Allocate(in.dtype, shape);
        std::memset(t.raw_data(), 0, t.ByteSize());
        if (in.reshape) {
          Shape r = *in.reshape;
          if (config.max_batch_size() > 0) r.insert(r.begin(), b);
          auto reshaped = t.Reshaped(r);
          if (!reshaped.ok()) break;
          t = std::move(reshaped).value();
        }
        plan.feeds.emplace_back(in.name, std::move(t));
      }
      plans.push_back(std::move(plan));
    }
  }
  // Every instance runs the plans, concurrently as they will serve.
  auto run_all = [&]() -> Status {
    for (const WarmupPlan& plan : plans) {
      for (uint32_t i = 0; i < plan.count; ++i) {
        std::vector<Tensor> outs;
        Status s = v.session->Run(plan.feeds, &outs);
        if (!s.ok()) return s.WithContext(fmt::format("model_warmup '{}'", plan.name));
      }
    }
    return Status::Ok();
  };
  std::vector<Status> results(std::max(1, instances));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = run_all(); });
  }
  results[0] = run_all();
  for (auto& t : threads) t.join();
  for (const Status& s : results) {
    if (s.ok()) continue;
    if (!default_warmup) return s;
    // Zeros may not be valid input for every model (e.g. a dim that must match another); the
    // model still loads, its first requests are just slower.
    spdlog::warn("model '{}' version {}: {} failed: {}", v.name, v.version, "default warmup",
                 s.message());
    break;
  }
  return Status::Ok();
}

Status ModelManager::LoadModel(const std::string& name) {
  const fs::path dir = options_.repository / name;
  std::error_code ec;
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' ||
      !fs::is_directory(dir, ec)) {
    return NotFound("no model '{}' in repository '{}'", name, options_.repository.string());
  }
  std::lock_guard<std::mutex> serial(load_mu_);
  std::shared_ptr<const Model> old;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutting_down_) return Unavailable("the server is shutting down");
    auto it = models_.find(name);
    if (it != models_.end() && !it->second->unloaded) old = it->second;
  }
  auto model = std::make_shared<Model>();
  model->name = name;
  model->fingerprint = FolderFingerprint(dir);  // before reading: a later change is seen again
  Status result = [&]() -> Status {
    inference::ModelConfig config;
    const fs::path config_path = dir / "config.pbtxt";
    if (fs::exists(config_path, ec)) {
      bool ok = false;
      model->config_text = ReadFile(config_path, &ok);
      if (!ok) return InvalidArgument("cannot read {}", config_path.string());
      std::vector<std::string> warnings;
      ASSIGN_OR_RETURN(config,
                       ParseModelConfig(model->config_text, options_.strict_config, &warnings));
      for (const auto& w : warnings) spdlog::warn("model '{}': {} (ignored)", name, w);
    }
    RETURN_IF_ERROR(ValidateConfigStandalone(config));
    // Versions on disk.
    std::vector<int64_t> on_disk;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (!it->is_directory() || n.empty() || n.size() > 18 ||
          !std::all_of(n.begin(), n.end(), ::isdigit) || std::stoll(n) < 1) {
        continue;
      }
      on_disk.push_back(std::stoll(n));
    }
    std::sort(on_disk.begin(), on_disk.end());
    std::vector<int64_t> chosen;
    const auto& policy = config.version_policy();
    if (policy.has_all()) {
      chosen = on_disk;
    } else if (policy.has_specific()) {
      for (int64_t v : policy.specific().versions()) {
        if (std::find(on_disk.begin(), on_disk.end(), v) == on_disk.end()) {
          model->failed[v] = fmt::format("version folder {}/{} does not exist", name, v);
        } else {
          chosen.push_back(v);
        }
      }
    } else {
      const size_t n = std::max<uint32_t>(1, policy.latest().num_versions());
      chosen.assign(on_disk.end() - std::min(n, on_disk.size()), on_disk.end());
    }
    if (chosen.empty() && model->failed.empty()) {
      return InvalidArgument("no version folders (e.g. {}/1/model.onnx)", name);
    }
    const std::string file =
        config.default_model_filename().empty() ? "model.onnx" : config.default_model_filename();
    for (int64_t v : chosen) {
      const fs::path vdir = dir / std::to_string(v);
      const std::string fingerprint = FolderFingerprint(vdir);
      std::shared_ptr<ModelVersion> running;
      if (old != nullptr) {
        auto it = old->versions.find(v);
        if (it != old->versions.end()) running = it->second;
      }
      // Unchanged files and config: keep the running version as it is (no reload, no blip).
      if (running != nullptr && running->fingerprint == fingerprint &&
          old->config_text == model->config_text && old->reload_errors.count(v) == 0) {
        model->versions[v] = running;
        continue;
      }
      auto loaded = LoadVersion(name, v, vdir / file, config);
      if (loaded.ok()) {
        (*loaded)->fingerprint = fingerprint;
        model->versions[v] = std::move(loaded).value();
        continue;
      }
      const std::string why = loaded.status().message();
      if (running != nullptr) {
        spdlog::warn("model '{}' version {} failed to reload, the running one keeps serving: {}",
                     name, v, why);
        model->versions[v] = running;
        model->reload_errors[v] = why;
      } else {
        spdlog::warn("model '{}' version {} failed to load: {}", name, v, why);
        model->failed[v] = why;
      }
    }
    if (model->versions.empty()) {
      const auto& [v, why] = *model->failed.begin();
      return InvalidArgument("version {}: {}", v, why);
    }
    return Status::Ok();
  }();
  if (!result.ok() && model->versions.empty() && old != nullptr && !old->versions.empty()) {
    // Nothing new is ready: the running versions keep serving, the index shows why.
    spdlog::warn("model '{}' failed to reload, versions {}..{} keep serving: {}", name,
                 old->versions.begin()->first, old->versions.rbegin()->first, result.message());
    model->versions = old->versions;
    model->config_text = old->config_text;
    for (const auto& [v, _] : old->versions) model->reload_errors[v] = result.message();
  } else if (!result.ok() && model->versions.empty() && model->failed.empty()) {
    model->error = result.message();
  }
  std::vector<std::shared_ptr<ModelVersion>> retired;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutting_down_) return Unavailable("the server is shutting down");
    models_[name] = model;  // readiness switches here, atomically for every version
  }
  if (old != nullptr) {
    for (const auto& [v, version] : old->versions) {
      auto it = model->versions.find(v);
      if (it == model->versions.end() || it->second != version) retired.push_back(version);
    }
    old.reset();
  }
  Retire(std::move(retired));
  malloc_trim(0);  // loading's temporaries (parsed protobuf, unoptimized graph) are gone now
  return result.ok() ? Status::Ok()
                     : InvalidArgument("model '{}' failed to load: {}", name, result.message());
}

Status ModelManager::UnloadModel(const std::string& name) {
  std::lock_guard<std::mutex> serial(load_mu_);
  std::shared_ptr<Model> old;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      std::error_code ec;
      if (!name.empty() && name.find('/') == std::string::npos && name[0] != '.' &&
          fs::is_directory(options_.repository / name, ec)) {
        return Status::Ok();  // in the repository but not loaded: nothing to do
      }
      return NotFound("unknown model '{}'", name);
    }
    auto replacement = std::make_shared<Model>();
    replacement->name = name;
    replacement->unloaded = true;
    old = std::move(it->second);
    it->second = std::move(replacement);
  }
  std::vector<std::shared_ptr<ModelVersion>> retired;
  for (const auto& [v, version] : old->versions) retired.push_back(version);
  old.reset();
  Retire(std::move(retired));
  spdlog::info("unloaded model '{}'", name);
  return Status::Ok();
}

void ModelManager::Retire(std::vector<std::shared_ptr<ModelVersion>> retired) {
  if (retired.empty()) return;
  // Infer holds a version only from lookup to enqueue; statistics readers briefly. Waiting for
  // them here keeps the drain (the version's destructor runs every queued request) on this thread
  // rather than on a frontend's I/O thread.
  const auto deadline = std::chrono::steady_clock::now() + options_.retire_timeout;
  for (auto& v : retired) {
    while (v.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (v.use_count() > 1) {
      spdlog::warn("model '{}' version {} is still referenced after {} ms; released anyway",
                   v->name, v->version, options_.retire_timeout.count());
    } else {
      spdlog::info("model '{}' version {} retired", v->name, v->version);
    }
    v.reset();
  }
  malloc_trim(0);  // give the freed weights and arenas back to the OS
}

StatusOr<std::shared_ptr<ModelManager::ModelVersion>> ModelManager::FindVersion(
    const std::string& name, int64_t version) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::error_code ec;
    if (options_.control_mode == ModelControlMode::kExplicit && !name.empty() &&
        name.find('/') == std::string::npos && name[0] != '.' &&
        fs::is_directory(options_.repository / name, ec)) {
      return Unavailable("model '{}' is not loaded", name);
    }
    return NotFound("unknown model '{}'", name);
  }
  const Model& m = *it->second;
  if (m.unloaded) return Unavailable("model '{}' is unloaded", name);
  if (!m.error.empty()) return Unavailable("model '{}' is not ready: {}", name, m.error);
  if (version < 0) {
    if (m.versions.empty()) return Unavailable("model '{}' has no ready version", name);
    return m.versions.rbegin()->second;
  }
  auto v = m.versions.find(version);
  if (v != m.versions.end()) return v->second;
  auto f = m.failed.find(version);
  if (f != m.failed.end()) {
    return Unavailable("version {} of model '{}' is not ready: {}", version, name, f->second);
  }
  return NotFound("unknown version {} of model '{}'", version, name);
}

void ModelManager::Infer(std::unique_ptr<InferenceRequest> request, ResponseCallback callback) {
  if (!callback) return;
  if (request == nullptr) {
    callback(InvalidArgument("null inference request"), InferenceResponse{});
    return;
  }
  // Counted before the draining check (both sequentially consistent): once BeginShutdown set
  // draining_, WaitForIdle sees every request that got past the check.
  in_flight_.fetch_add(1);
  if (draining_.load()) {
    DoneInFlight();
    callback(Unavailable("the server is shutting down"),
             InferenceResponse{request->model_name, request->model_version, request->id, {}});
    return;
  }
  callback = [this, cb = std::move(callback)](Status s, InferenceResponse r) {
    cb(std::move(s), std::move(r));
    DoneInFlight();
  };
  auto found = FindVersion(request->model_name, request->model_version);
  if (!found.ok()) {
    callback(found.status(), InferenceResponse{request->model_name, request->model_version,
                                               request->id, {}});
    return;
  }
  std::shared_ptr<ModelVersion> v = std::move(found).value();
  auto rows = v->Validate(*request);
  if (!rows.ok()) {
    v->stats.RecordFailure(rows.status(), 0);
    callback(rows.status(), v->EmptyResponse(*request));
    return;
  }
  auto task = std::make_unique<InferTask>();
  task->rows = *rows;
  task->enqueued = std::chrono::steady_clock::now();
  task->callback = std::move(callback);
  const batching::ScheduleOptions so{request->priority, request->timeout};
  task->request = std::move(request);
  v->stats.pending.fetch_add(1, std::memory_order_relaxed);
  Status s = v->scheduler->Schedule(&task, so);
  if (!s.ok()) v->Finish(*task, std::move(s), {});  // ownership stayed with us
}

bool ModelManager::IsLive() const {
  std::lock_guard<std::mutex> l(mu_);
  return !shutting_down_;
}

void ModelManager::DoneInFlight() {
  if (in_flight_.fetch_sub(1) == 1 && draining_.load()) {
    std::lock_guard<std::mutex> l(idle_mu_);
    idle_cv_.notify_all();
  }
}

bool ModelManager::IsReady() const {
  if (draining_.load()) return false;
  std::lock_guard<std::mutex> l(mu_);
  if (shutting_down_ || !repository_loaded_) return false;
  if (!options_.strict_readiness) return true;
  for (const auto& [name, m] : models_) {
    if (!m->unloaded && m->versions.empty()) return false;
  }
  return true;
}

bool ModelManager::IsModelReady(const std::string& name, int64_t version) const {
  return FindVersion(name, version).ok();
}

StatusOr<ModelMetadata> ModelManager::GetMetadata(const std::string& name,
                                                  int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> v, FindVersion(name, version));
  ModelMetadata md;
  md.name = name;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      for (const auto& [n, _] : it->second->versions) md.versions.push_back(std::to_string(n));
    }
  }
  const auto& c = *v->config;
  md.platform = c.platform().empty() ? "onnxruntime_onnx" : c.platform();
  const bool batching = c.max_batch_size() > 0;
  for (const auto& in : v->inputs) {
    TensorMetadata t{in.name, KServeName(in.dtype), in.dims};
    if (batching) t.shape.insert(t.shape.begin(), -1);
    md.inputs.push_back(std::move(t));
  }
  for (const auto& out : v->outputs) {
    TensorMetadata t{out.name, KServeName(out.dtype), out.dims};
    if (batching) t.shape.insert(t.shape.begin(), -1);
    md.outputs.push_back(std::move(t));
  }
  return md;
}

StatusOr<std::shared_ptr<const inference::ModelConfig>> ModelManager::GetConfig(
    const std::string& name, int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> v, FindVersion(name, version));
  return v->config;
}

StatusOr<std::string> ModelManager::GetConfigJson(const std::string& name,
                                                  int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const inference::ModelConfig> c, GetConfig(name, version));
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string json;
  auto s = google::protobuf::util::MessageToJsonString(*c, &json, o);
  if (!s.ok()) return Internal("config to JSON: {}", s.ToString());
  return json;
}

std::vector<ModelStatisticsSnapshot> ModelManager::GetStatistics(const std::string& name,
                                                                 int64_t version) const {
  std::vector<std::shared_ptr<ModelVersion>> versions;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [n, m] : models_) {
      if (!name.empty() && n != name) continue;
      for (const auto& [num, v] : m->versions) {
        if (version < 0 || num == version) versions.push_back(v);
      }
    }
  }
  std::vector<ModelStatisticsSnapshot> out;
  for (const auto& v : versions) {
    ModelStatisticsSnapshot s;
    s.name = v->name;
    s.version = v->version;
    VersionStats& st = v->stats;
    {
      std::lock_guard<std::mutex> l(st.mu);
      s.last_inference_ms = st.last_inference_ms;
      s.inference_count = st.inference_count;
      s.execution_count = st.execution_count;
      s.success = st.success;
      s.fail = st.fail;
      s.queue = st.queue;
      s.compute_input = st.compute_input;
      s.compute_infer = st.compute_infer;
      s.compute_output = st.compute_output;
      for (const auto& [size, b] : st.batches) s.batch_stats.push_back(b);
      s.failures = st.failures;
      s.success_requests = st.success_requests;
    }
    s.request_us = st.request_us.Snapshot();
    s.queue_us = st.queue_us.Snapshot();
    s.compute_us = st.compute_us.Snapshot();
    s.batch_size = st.batch_size.Snapshot();
    s.pending = st.pending.load(std::memory_order_relaxed);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<ModelIndexEntry> ModelManager::Index() const {
  std::vector<std::string> on_disk;
  if (options_.control_mode == ModelControlMode::kExplicit) {
    on_disk = ListModelFolders(options_.repository);
  }
  std::lock_guard<std::mutex> l(mu_);
  std::vector<ModelIndexEntry> out;
  for (const std::string& name : on_disk) {
    if (models_.count(name) == 0) out.push_back({name, -1, "UNAVAILABLE", "not loaded"});
  }
  for (const auto& [name, m] : models_) {
    if (m->unloaded) {
      out.push_back({name, -1, "UNAVAILABLE", "unloaded"});
      continue;
    }
    if (!m->error.empty()) {
      out.push_back({name, -1, "UNAVAILABLE", m->error});
      continue;
    }
    std::map<int64_t, ModelIndexEntry> rows;
    for (const auto& [v, _] : m->versions) {
      auto e = m->reload_errors.find(v);
      rows[v] = {name, v, "READY",
                 e == m->reload_errors.end() ? "" : "keeps serving; reload failed: " + e->second};
    }
    for (const auto& [v, why] : m->failed) rows[v] = {name, v, "UNAVAILABLE", why};
    for (auto& [v, e] : rows) out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ModelIndexEntry& a, const ModelIndexEntry& b) { return a.name < b.name; });
  return out;
}

std::map<std::string, std::string> ModelManager::LoadedFingerprints() const {
  std::lock_guard<std::mutex> l(mu_);
  std::map<std::string, std::string> out;
  for (const auto& [name, m] : models_) {
    if (!m->unloaded) out[name] = m->fingerprint;
  }
  return out;
}

}  // namespace inferd::serving
