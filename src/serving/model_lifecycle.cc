// ModelManager's lifecycle around the models: start-up per control mode, repository polling, the
// asynchronous repository API and graceful shutdown. Loading itself is in model_manager.cc.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "serving/model_manager.h"
#include "serving/repository_scan.h"

namespace inferd::serving {

StatusOr<ModelControlMode> ParseModelControlMode(const std::string& text) {
  if (text == "none") return ModelControlMode::kNone;
  if (text == "poll") return ModelControlMode::kPoll;
  if (text == "explicit") return ModelControlMode::kExplicit;
  return InvalidArgument("model control mode '{}' is not one of none, poll, explicit", text);
}

Status ModelManager::Start() {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    RETURN_IF_ERROR(LoadRepository());
  } else {
    std::error_code ec;
    if (!std::filesystem::is_directory(options_.repository, ec)) {
      return Unavailable("cannot read model repository '{}'", options_.repository.string());
    }
    std::vector<std::string> names;
    for (const std::string& n : options_.startup_models) {
      if (n == "*") {
        names = ListModelFolders(options_.repository);
        break;
      }
      names.push_back(n);
    }
    for (const std::string& n : names) {
      Status s = LoadModel(n);
      if (!s.ok()) spdlog::warn("model '{}' is unavailable: {}", n, s.message());
    }
    std::lock_guard<std::mutex> l(mu_);
    repository_loaded_ = true;
  }
  if (options_.control_mode == ModelControlMode::kPoll) {
    std::lock_guard<std::mutex> l(ops_mu_);
    polling_ = true;
  }
  ops_cv_.notify_all();
  return Status::Ok();
}

void ModelManager::PollRepository() {
  const std::map<std::string, std::string> loaded = LoadedFingerprints();
  const std::vector<std::string> on_disk = ListModelFolders(options_.repository);
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

void ModelManager::Enqueue(std::function<void(bool run)> op) {
  {
    std::lock_guard<std::mutex> l(ops_mu_);
    if (!ops_stop_) {
      ops_.push_back(std::move(op));
      op = nullptr;
    }
  }
  if (op) {
    op(false);
  } else {
    ops_cv_.notify_all();
  }
}

void ModelManager::RequestLoad(const std::string& name, std::function<void(Status)> done) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return done(FailedPrecondition("explicit model load/unload is not allowed unless the server runs "
                            "with --model-control-mode explicit"));
  }
  if (draining_.load()) return done(Unavailable("the server is shutting down"));
  Enqueue([this, name, done = std::move(done)](bool run) {
    done(run ? LoadModel(name) : Unavailable("the server is shutting down"));
  });
}

void ModelManager::RequestUnload(const std::string& name, std::function<void(Status)> done) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return done(FailedPrecondition("explicit model load/unload is not allowed unless the server runs "
                            "with --model-control-mode explicit"));
  }
  if (draining_.load()) return done(Unavailable("the server is shutting down"));
  Enqueue([this, name, done = std::move(done)](bool run) {
    done(run ? UnloadModel(name) : Unavailable("the server is shutting down"));
  });
}

void ModelManager::LifecycleLoop() {
  std::unique_lock<std::mutex> l(ops_mu_);
  auto next_poll = std::chrono::steady_clock::now() + options_.poll_interval;
  while (true) {
    if (ops_stop_) break;
    if (!ops_.empty()) {
      auto op = std::move(ops_.front());
      ops_.pop_front();
      l.unlock();
      op(true);
      l.lock();
      continue;
    }
    if (polling_ && std::chrono::steady_clock::now() >= next_poll) {
      l.unlock();
      PollRepository();
      l.lock();
      next_poll = std::chrono::steady_clock::now() + options_.poll_interval;
      continue;
    }
    if (polling_) {
      ops_cv_.wait_until(l, next_poll);
    } else {
      ops_cv_.wait(l);
      next_poll = std::chrono::steady_clock::now() + options_.poll_interval;
    }
  }
  auto cancelled = std::move(ops_);
  l.unlock();
  for (auto& op : cancelled) op(false);
}

void ModelManager::BeginShutdown() {
  draining_.store(true);
  {
    std::lock_guard<std::mutex> l(ops_mu_);
    polling_ = false;
  }
  ops_cv_.notify_all();
}

bool ModelManager::WaitForIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(idle_mu_);
  return idle_cv_.wait_for(l, timeout, [this] { return in_flight_.load() == 0; });
}

}  // namespace inferd::serving
