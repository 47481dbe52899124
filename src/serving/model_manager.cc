#include "serving/model_manager.h"

#include <malloc.h>

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <optional>

#include "serving/config_limits.h"
#include "serving/lifecycle.h"
#include "serving/model_config.h"
#include "serving/model_loader.h"
#include "serving/processing_models.h"
#include "serving/model_version.h"
#include "serving/repository.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

Status ShuttingDown() { return Unavailable("the server is shutting down"); }

InferenceResponse ResponseTo(const InferenceRequest& r) {
  return InferenceResponse{r.model_name, r.model_version, r.id, {}};
}

}  // namespace

StatusOr<ModelControlMode> ParseModelControlMode(const std::string& text) {
  if (text == "none") return ModelControlMode::kNone;
  if (text == "poll") return ModelControlMode::kPoll;
  if (text == "explicit") return ModelControlMode::kExplicit;
  return InvalidArgument("model control mode '{}' is not one of none, poll, explicit", text);
}

// ---- creation and start-up ----

ModelManager::ModelManager(const ModelManagerOptions& options)
    : options_(options),
      clock_(options.clock ? options.clock : &RealClock::Get()),
      cache_(std::make_shared<ModelCache>(
          ModelCacheOptions{options.cache_dir, options.build_id})) {
  lifecycle_ = std::make_unique<LifecycleThread>(*clock_, options_.poll_interval,
                                                 [this] { PollRepository(); });
}

ModelManager::~ModelManager() {
  BeginShutdown();     // abandons a load in progress, so that Stop below does not wait for it
  lifecycle_->Stop();  // finishes the operation in progress; cancels queued ones
  std::map<std::string, std::shared_ptr<ModelState>> models;
  {
    MutexLock l(&mu_);
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
  if (options.autocomplete_max_batch_size > ConfigBounds::kMaxBatchSize) {
    return InvalidArgument("autocomplete_max_batch_size {} exceeds the limit {}",
                           options.autocomplete_max_batch_size, ConfigBounds::kMaxBatchSize);
  }
  if (options.max_load_time.count() <= 0) {
    return InvalidArgument("max_load_time must be > 0");
  }
  if (options.max_warmup_bytes == 0) {
    return InvalidArgument("max_warmup_bytes must be > 0");
  }
  return std::unique_ptr<ModelManager>(new ModelManager(options));
}

ModelLoadOptions ModelManager::LoadOptions() const {
  ModelLoadOptions o{options_.repository, options_.strict_config,
                     ModelVersionOptions{clock_, cache_.get(), options_.total_threads,
                                         options_.default_instance_count,
                                         options_.threads_per_instance,
                                         options_.autocomplete_max_batch_size,
                                         options_.max_warmup_bytes}};
  // Ensembles run their steps through this manager (EnsembleHost; const only for the options).
  o.versions.ensembles = const_cast<ModelManager*>(this);
  return o;
}

void ModelManager::LoadModels(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    Status s = LoadModel(n);
    if (!s.ok()) spdlog::warn("model '{}' is unavailable: {}", n, s.message());
  }
  MutexLock l(&mu_);
  repository_loaded_ = true;
}

Status ModelManager::LoadRepository() {
  ASSIGN_OR_RETURN(std::vector<std::string> names, ScanModelFolders(options_.repository));
  LoadModels(OwnModels(std::move(names)));
  return Status::Ok();
}

Status ModelManager::Start() {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    RETURN_IF_ERROR(LoadRepository());
  } else {
    std::error_code ec;
    if (!fs::is_directory(options_.repository, ec)) {
      return Unavailable("cannot read model repository '{}'", options_.repository.string());
    }
    std::vector<std::string> names;
    for (const std::string& n : options_.startup_models) {
      if (n == "*") {
        names = OwnModels(ListModelFolders(options_.repository));
        break;
      }
      names.push_back(n);
    }
    LoadModels(names);
  }
  lifecycle_->SetPolling(options_.control_mode == ModelControlMode::kPoll);
  return Status::Ok();
}

std::vector<std::string> ModelManager::OwnModels(std::vector<std::string> names) const {
  std::erase_if(names, [&](const std::string& n) { return options_.external_models.count(n) != 0; });
  return names;
}

// ---- loading and unloading ----

Status ModelManager::LoadModel(const std::string& name) { return LoadWith(name, LoadOverride{}); }

namespace {

// The checks of a load's parameters that need no model, and the override they ask for (files
// still to be written into `override.model_dir`).
StatusOr<LoadOverride> PrepareOverride(const std::string& name, const LoadParameters& params) {
  LoadOverride o;
  o.force = true;
  if (params.config.has_value()) {
    auto config = ModelConfigFromJson(*params.config);
    if (!config.ok()) {
      return InvalidArgument("failed to load '{}': {}", name, config.status().message());
    }
    o.config = std::move(config).value();
  }
  if (params.files.empty()) return o;
  if (!params.config.has_value()) {
    return InvalidArgument("failed to load '{}': load parameter 'config' must be specified for "
                           "model file override",
                           name);
  }
  for (const auto& [path, _] : params.files) {
    const fs::path p = fs::path(path).lexically_normal();
    if (path.empty() || p.is_absolute() || p.empty() || *p.begin() == ".." ||
        p.filename().empty() || p.filename() == "." || p.filename() == "..") {
      return InvalidArgument("failed to load '{}': invalid file parameter 'file:{}': the path "
                             "must name a file within the model directory",
                             name, path);
    }
  }
  return o;
}

// LoadModelState with the load boundary's guarantee: an exception (std::bad_alloc from a huge
// allocation, one from a library) fails this model's load with its text, never the process (it
// would escape the load's thread and terminate the server).
ModelLoad LoadCatchingExceptions(const std::string& name, const ModelState* old,
                                 const ModelLoadOptions& options, const LoadOverride& override) {
  try {
    return LoadModelState(name, old, options, override);
  } catch (const std::bad_alloc&) {
    return FailedLoad(name, old, options,
                      ResourceExhausted("out of memory while loading (std::bad_alloc)"));
  } catch (const std::exception& e) {
    return FailedLoad(name, old, options, Internal("exception while loading: {}", e.what()));
  } catch (...) {
    return FailedLoad(name, old, options, Internal("unknown exception while loading"));
  }
}

// A file the file system refuses (a path component over NAME_MAX, a full disk) is INTERNAL with
// Triton's "failed to poll from model repository" wording, as Triton answers it.
Status WriteOverrideFiles(const std::string& name, const fs::path& dir,
                          const std::map<std::string, std::string>& files) {
  for (const auto& [path, bytes] : files) {
    const fs::path target = dir / fs::path(path).lexically_normal();
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    std::ofstream out(target, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      return Internal("failed to load '{}', failed to poll from model repository: cannot write "
                      "override file '{}': {}",
                      name, path, std::strerror(errno));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ModelManager::LoadModel(const std::string& name, const LoadParameters& params) {
  if (!IsValidModelName(name)) return InvalidArgument("invalid model name '{}'", name);
  ASSIGN_OR_RETURN(LoadOverride o, PrepareOverride(name, params));
  if (params.files.empty()) return LoadWith(name, o);
  // The files go to a scratch folder that is the model's folder for this load only: versions
  // keep nothing open once loaded (sessions, warmup data and labels are read at load).
  o.model_dir = fs::temp_directory_path() /
                fmt::format("inferd-load-{}-{}-{}", getpid(), name, override_dirs_.fetch_add(1));
  std::error_code ec;
  fs::remove_all(o.model_dir, ec);
  Status s = WriteOverrideFiles(name, o.model_dir, params.files);
  if (s.ok()) s = LoadWith(name, o);
  fs::remove_all(o.model_dir, ec);
  return s;
}

Status ModelManager::LoadWith(const std::string& name, const LoadOverride& override) {
  if (options_.external_models.count(name) != 0) {
    return FailedPrecondition("model '{}' is a generative model, loaded once at start", name);
  }
  if (override.model_dir.empty() && !HasModelFolder(options_.repository, name)) {
    // The repository's path is the operator's business, not the client's.
    return NotFound("failed to load '{}', failed to poll from model repository: no folder '{}' "
                    "in the model repository",
                    name, name);
  }
  MutexLock serial(&load_mu_);
  std::vector<std::string> loading;
  return LoadLocked(name, override, &loading);
}

Status ModelManager::LoadLocked(const std::string& name, const LoadOverride& override,
                                std::vector<std::string>* loading) {
  std::shared_ptr<const ModelState> old;
  {
    MutexLock l(&mu_);
    if (shutting_down_ || draining_.load()) return ShuttingDown();
    auto it = models_.find(name);
    if (it != models_.end() && !it->second->unloaded) old = it->second;
  }
  loading->push_back(name);
  LoadComposingModels(name, override, loading);
  std::optional<ModelLoad> load = RunLoad(name, old, override);
  loading->pop_back();
  if (!load.has_value()) {
    if (draining_.load()) return ShuttingDown();
    const Status why = DeadlineExceeded(
        "the load did not finish within the max load time of {} s and was abandoned",
        std::chrono::duration<double>(options_.max_load_time).count());
    spdlog::warn("model '{}': {} (it stops at its next stage; the lifecycle goes on)", name,
                 why.message());
    load = FailedLoad(name, old.get(), LoadOptions(), why);
  }
  return Publish(std::move(load->state), std::move(old), load->status);
}

std::optional<ModelLoad> ModelManager::RunLoad(const std::string& name,
                                               const std::shared_ptr<const ModelState>& old,
                                               const LoadOverride& override) {
  // The work owns copies of everything it reads (the cache shared), so that it may outlive this
  // call, and the manager, once abandoned.
  auto work = AbandonableWork<ModelLoad>::Start(
      [name, old, override, options = LoadOptions(), cache = cache_](
          const std::atomic<bool>& abandoned) mutable {
        (void)cache;  // held only to keep options.versions.cache alive
        options.versions.abandoned = &abandoned;
        return LoadCatchingExceptions(name, old.get(), options, override);
      });
  {
    MutexLock l(&mu_);
    current_load_ = work;
    if (draining_.load()) work->Abandon();  // BeginShutdown ran before current_load_ was set
  }
  std::optional<ModelLoad> load = work->Wait(*clock_, clock_->Now() + options_.max_load_time);
  MutexLock l(&mu_);
  current_load_.reset();
  return load;
}

int ModelManager::RunningLoads() { return AbandonableWork<ModelLoad>::Running(); }

void ModelManager::LoadComposingModels(const std::string& name, const LoadOverride& override,
                                       std::vector<std::string>* loading) {
  for (const std::string& dep : ComposingModels(name, LoadOptions(), override)) {
    // A model loading on this thread already (ensembles in a cycle) is left to fail the
    // ensemble's checks; generative models are not the manager's.
    if (std::find(loading->begin(), loading->end(), dep) != loading->end() ||
        options_.external_models.count(dep) != 0 || !IsValidModelName(dep) ||
        !HasModelFolder(options_.repository, dep)) {
      continue;
    }
    {
      MutexLock l(&mu_);
      auto it = models_.find(dep);
      if (it != models_.end() && !it->second->unloaded && !it->second->versions.empty()) continue;
    }
    spdlog::info("loading '{}', a composing model of ensemble '{}'", dep, name);
    Status s = LoadLocked(dep, LoadOverride{}, loading);
    if (!s.ok()) spdlog::warn("composing model of '{}': {}", name, s.message());
  }
}

Status ModelManager::Publish(std::shared_ptr<ModelState> model,
                             std::shared_ptr<const ModelState> old,
                             const Status& result) {
  const std::string name = model->name;
  {
    MutexLock l(&mu_);
    if (shutting_down_) return ShuttingDown();
    models_[name] = model;  // readiness switches here, atomically for every version
  }
  std::vector<std::shared_ptr<ModelVersion>> retired;
  if (old != nullptr) {
    for (const auto& [v, version] : old->versions) {
      auto it = model->versions.find(v);
      if (it == model->versions.end() || it->second != version) retired.push_back(version);
    }
    old.reset();
  }
  model.reset();
  Retire(std::move(retired));
  malloc_trim(0);  // loading's temporaries (parsed protobuf, unoptimized graph) are gone now
  return result.ok() ? Status::Ok()
                     : InvalidArgument("failed to load '{}': {}", name, result.message());
}

Status ModelManager::UnloadModel(const std::string& name) {
  MutexLock serial(&load_mu_);
  std::shared_ptr<ModelState> old;
  {
    MutexLock l(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      // In the repository but not loaded: nothing to do.
      if (HasModelFolder(options_.repository, name)) return Status::Ok();
      return NotFound("failed to unload '{}': Request for unknown model: '{}' is not found", name,
                      name);
    }
    auto replacement = std::make_shared<ModelState>();
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
  const Clock::TimePoint deadline = clock_->Now() + options_.retire_timeout;
  for (auto& v : retired) {
    if (!WaitForSoleOwner(v, *clock_, deadline)) {
      spdlog::warn("model '{}' version {} is still referenced after {} ms; released anyway",
                   v->name(), v->version(), options_.retire_timeout.count());
    } else {
      spdlog::info("model '{}' version {} retired", v->name(), v->version());
    }
    v.reset();
  }
  malloc_trim(0);  // give the freed weights and arenas back to the OS
}

// ---- repository polling and the repository API ----

void ModelManager::PollRepository() {
  const std::map<std::string, std::string> loaded = LoadedFingerprints();
  const std::vector<std::string> on_disk = OwnModels(ListModelFolders(options_.repository));
  for (const std::string& name : on_disk) {
    auto it = loaded.find(name);
    if (it != loaded.end() && it->second == FolderFingerprint(options_.repository / name)) continue;
    spdlog::info("repository poll: model '{}' {}", name,
                 it == loaded.end() ? "is new" : "changed; reloading");
    Status s = LoadModel(name);
    if (!s.ok()) spdlog::warn("repository poll: {}", s.message());
  }
  for (const auto& [name, _] : loaded) {
    if (std::binary_search(on_disk.begin(), on_disk.end(), name)) continue;
    spdlog::info("repository poll: model '{}' was removed; unloading", name);
    Status s = UnloadModel(name);
    if (!s.ok()) spdlog::warn("repository poll: {}", s.message());
  }
}

Status ModelManager::CheckExplicitMode() const {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return FailedPrecondition(
        "explicit model load/unload is not allowed unless the server runs "
        "with --model-control-mode explicit");
  }
  if (draining_.load()) return ShuttingDown();
  return Status::Ok();
}

void ModelManager::RequestLoad(const std::string& name, LoadParameters params,
                               std::function<void(Status)> done) {
  if (Status s = CheckExplicitMode(); !s.ok()) return done(std::move(s));
  if (auto checked = PrepareOverride(name, params); !checked.ok()) return done(checked.status());
  lifecycle_->Enqueue([this, name, params = std::move(params), done = std::move(done)](bool run) {
    done(run ? LoadModel(name, params) : ShuttingDown());
  });
}

void ModelManager::RequestUnload(const std::string& name, std::function<void(Status)> done) {
  if (Status s = CheckExplicitMode(); !s.ok()) return done(std::move(s));
  lifecycle_->Enqueue([this, name, done = std::move(done)](bool run) {
    done(run ? UnloadModel(name) : ShuttingDown());
  });
}

// ---- serving ----

void ModelManager::BeginShutdown() {
  draining_.store(true);
  lifecycle_->SetPolling(false);
  // A load in progress is abandoned, so the lifecycle thread (joined on destruction) is free.
  std::shared_ptr<AbandonableWork<ModelLoad>> load;
  {
    MutexLock l(&mu_);
    load = current_load_;
  }
  if (load != nullptr) {
    spdlog::warn("shutdown: a model load in progress is abandoned");
    load->Abandon();
  }
}

bool ModelManager::WaitForIdle(std::chrono::milliseconds timeout) {
  const Clock::TimePoint deadline = clock_->Now() + timeout;
  MutexLock l(&idle_mu_);
  while (in_flight_.load() != 0 && clock_->Now() < deadline) {
    idle_.WaitUntil(&idle_mu_, *clock_, deadline);
  }
  return in_flight_.load() == 0;
}

void ModelManager::DoneInFlight() {
  if (in_flight_.fetch_sub(1) == 1 && draining_.load()) {
    MutexLock l(&idle_mu_);
    idle_.NotifyAll();
  }
}

StatusOr<std::shared_ptr<ModelVersion>> ModelManager::FindVersion(const std::string& name,
                                                                  int64_t version) const {
  MutexLock l(&mu_);
  auto it = models_.find(name);
  // Triton's wording ("Request for unknown model: ..."): clients match on it.
  if (it == models_.end()) {
    if (options_.control_mode == ModelControlMode::kExplicit &&
        HasModelFolder(options_.repository, name)) {
      return Unavailable("Request for unknown model: '{}' has no available versions (not "
                         "loaded)",
                         name);
    }
    return NotFound("Request for unknown model: '{}' is not found", name);
  }
  const ModelState& m = *it->second;
  if (m.unloaded) {
    return Unavailable("Request for unknown model: '{}' has no available versions (unloaded)",
                       name);
  }
  if (!m.error.empty()) {
    return Unavailable("Request for unknown model: '{}' has no available versions: {}", name,
                       m.error);
  }
  if (version < 0) {
    if (m.versions.empty()) {
      return Unavailable("Request for unknown model: '{}' has no available versions", name);
    }
    return m.versions.rbegin()->second;
  }
  auto v = m.versions.find(version);
  if (v != m.versions.end()) return v->second;
  auto f = m.failed.find(version);
  if (f != m.failed.end()) {
    return Unavailable("Request for unknown model: '{}' version {} is not at ready state: {}",
                       name, version, f->second);
  }
  return NotFound("Request for unknown model: '{}' version {} is not found", name, version);
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
    callback(ShuttingDown(), ResponseTo(*request));
    return;
  }
  InferAccepted(std::move(request), std::move(callback));
}

void ModelManager::InferAccepted(std::unique_ptr<InferenceRequest> request,
                                 ResponseCallback callback) {
  callback = [this, cb = std::move(callback)](Status s, InferenceResponse r) {
    cb(std::move(s), std::move(r));
    DoneInFlight();
  };
  auto found = FindVersion(request->model_name, request->model_version);
  if (!found.ok()) {
    callback(found.status(), ResponseTo(*request));
    return;
  }
  (*found)->Enqueue(std::move(request), std::move(callback));
}

void ModelManager::InferStep(std::unique_ptr<InferenceRequest> request,
                             ResponseCallback callback) {
  in_flight_.fetch_add(1);
  InferAccepted(std::move(request), std::move(callback));
}

StatusOr<ModelSignature> ModelManager::StepSignature(const std::string& name,
                                                     int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> v, FindVersion(name, version));
  return v->signature();
}

// ---- state and metadata ----

bool ModelManager::IsLive() const {
  MutexLock l(&mu_);
  return !shutting_down_;
}

bool ModelManager::IsReady() const {
  if (draining_.load()) return false;
  MutexLock l(&mu_);
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
    MutexLock l(&mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      for (const auto& [n, _] : it->second->versions) md.versions.push_back(std::to_string(n));
    }
  }
  const auto& c = *v->config();
  md.platform = !c.platform().empty() ? c.platform()
                : IsProcessingModel(c)  ? c.backend()
                                        : "onnxruntime_onnx";
  const ModelSignature& sig = v->signature();
  auto describe = [&](const std::string& n, DataType dtype, const Shape& dims) {
    TensorMetadata t{n, KServeName(dtype), dims};
    if (sig.batching()) t.shape.insert(t.shape.begin(), -1);
    return t;
  };
  // Sequence control and state tensors (internal) are not the client's.
  for (const auto& in : sig.inputs) {
    if (!in.internal) md.inputs.push_back(describe(in.name, in.dtype, in.dims));
  }
  for (const auto& out : sig.outputs) {
    if (!out.internal) md.outputs.push_back(describe(out.name, out.dtype, out.dims));
  }
  return md;
}

StatusOr<std::shared_ptr<const inference::ModelConfig>> ModelManager::GetConfig(
    const std::string& name, int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> v, FindVersion(name, version));
  return v->config();
}

StatusOr<std::string> ModelManager::GetConfigJson(const std::string& name,
                                                  int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const inference::ModelConfig> c, GetConfig(name, version));
  return ModelConfigToJson(*c);
}

std::vector<ModelStatisticsSnapshot> ModelManager::GetStatistics(const std::string& name,
                                                                 int64_t version) const {
  std::vector<std::shared_ptr<ModelVersion>> versions;
  {
    MutexLock l(&mu_);
    for (const auto& [n, m] : models_) {
      if (!name.empty() && n != name) continue;
      for (const auto& [num, v] : m->versions) {
        if (version < 0 || num == version) versions.push_back(v);
      }
    }
  }
  std::vector<ModelStatisticsSnapshot> out;
  for (const auto& v : versions) out.push_back(v->Statistics());
  return out;
}

std::vector<ModelIndexEntry> ModelManager::Index() const {
  std::vector<std::string> on_disk;
  if (options_.control_mode == ModelControlMode::kExplicit) {
    on_disk = OwnModels(ListModelFolders(options_.repository));
  }
  MutexLock l(&mu_);
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
  MutexLock l(&mu_);
  std::map<std::string, std::string> out;
  for (const auto& [name, m] : models_) {
    if (!m->unloaded) out[name] = m->fingerprint;
  }
  return out;
}

}  // namespace inferd::serving
