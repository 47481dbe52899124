#include "serving/model_loader.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "serving/ensemble.h"
#include "serving/model_config.h"
#include "serving/processing_models.h"
#include "serving/repository.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

Status ReadConfig(const fs::path& dir, bool strict, const LoadOverride& override,
                  ModelState* model, inference::ModelConfig* config) {
  std::error_code ec;
  const fs::path config_path = dir / "config.pbtxt";
  if (override.config.has_value()) {
    *config = *override.config;
    // Differs from any config.pbtxt text, so a later load from the repository reloads.
    model->config_text = "# load parameter 'config'\n" + config->DebugString();
  } else if (fs::exists(config_path, ec)) {
    ASSIGN_OR_RETURN(const fs::path path,
                     ResolveModelFile(dir, model->name, "", "config.pbtxt", "config.pbtxt"));
    if (!ReadRepositoryFile(path, &model->config_text)) {
      return InvalidArgument("cannot read {}/config.pbtxt", model->name);
    }
    std::vector<std::string> warnings;
    ASSIGN_OR_RETURN(*config, ParseModelConfig(model->config_text, strict, &warnings));
    for (const auto& w : warnings) spdlog::warn("model '{}': {} (ignored)", model->name, w);
  }
  RETURN_IF_ERROR(ValidateConfigStandalone(*config));
  for (const auto& w : IgnoredConfigFields(*config)) {
    spdlog::warn("model '{}': config.pbtxt {}", model->name, w);
  }
  return Status::Ok();
}

// Version `v` into `model`: kept from `old` when unchanged, else created; on failure the running
// one keeps serving, or the version is recorded failed.
void LoadOrKeepVersion(const ModelState* old, const inference::ModelConfig& config,
                       const fs::path& dir, const std::string& file, int64_t v,
                       const ModelLoadOptions& options, bool force, ModelState* model) {
  const fs::path vdir = dir / std::to_string(v);
  std::string fingerprint = FolderFingerprint(vdir);
  std::shared_ptr<ModelVersion> running;
  if (old != nullptr) {
    auto it = old->versions.find(v);
    if (it != old->versions.end()) running = it->second;
  }
  // Unchanged files and config: keep the running version as it is (no reload, no blip).
  if (!force && running != nullptr && running->fingerprint() == fingerprint &&
      old->config_text == model->config_text && old->reload_errors.count(v) == 0) {
    model->versions[v] = running;
    return;
  }
  const std::string folder = std::to_string(v);
  auto loaded = [&]() -> StatusOr<std::shared_ptr<ModelVersion>> {
    // Ensembles and processing models have no model file: the path only locates label files.
    if (config.platform() == "ensemble" || IsProcessingModel(config)) {
      return ModelVersion::Create(model->name, v, dir / folder / file, std::move(fingerprint),
                                  config, options.versions);
    }
    ASSIGN_OR_RETURN(const fs::path path,
                     ResolveModelFile(dir, model->name, folder, fs::path(folder) / file,
                                      config.default_model_filename().empty()
                                          ? "model file"
                                          : "default_model_filename"));
    return ModelVersion::Create(model->name, v, path, std::move(fingerprint), config,
                                options.versions);
  }();
  if (loaded.ok()) {
    model->versions[v] = std::move(loaded).value();
    return;
  }
  const std::string why = HidePath(loaded.status().message(), dir, model->name);
  if (running != nullptr) {
    spdlog::warn("model '{}' version {} failed to reload, the running one keeps serving: {}",
                 model->name, v, why);
    model->versions[v] = running;
    model->reload_errors[v] = why;
  } else {
    spdlog::warn("model '{}' version {} failed to load: {}", model->name, v, why);
    model->failed[v] = why;
  }
}

Status LoadVersions(const ModelState* old, const ModelLoadOptions& options,
                    const LoadOverride& override, ModelState* model) {
  const fs::path dir =
      override.model_dir.empty() ? options.repository / model->name : override.model_dir;
  inference::ModelConfig config;
  RETURN_IF_ERROR(ReadConfig(dir, options.strict_config, override, model, &config));
  VersionSelection selection =
      SelectVersions(config.version_policy(), ListVersionFolders(dir), model->name);
  model->failed = std::move(selection.missing);
  if (selection.chosen.empty() && model->failed.empty()) {
    return InvalidArgument("no version folders (e.g. {}/1/model.onnx)", model->name);
  }
  const std::string file =
      config.default_model_filename().empty() ? "model.onnx" : config.default_model_filename();
  for (int64_t v : selection.chosen) {
    LoadOrKeepVersion(old, config, dir, file, v, options, override.force, model);
  }
  if (model->versions.empty()) {
    const auto& [v, why] = *model->failed.begin();
    return InvalidArgument("version {}: {}", v, why);
  }
  // A load request (not a poll) that could not replace a running version fails, although the
  // running one keeps serving.
  if (override.force && !model->reload_errors.empty()) {
    const auto& [v, why] = *model->reload_errors.begin();
    return InvalidArgument("version {}: {}", v, why);
  }
  return Status::Ok();
}

// After a failed load: nothing new is ready, so the running versions keep serving; or, with
// nothing running either and no version to blame, the failure is the whole model's.
void KeepServing(const ModelState* old, const Status& result, ModelState* model) {
  if (model->versions.empty() && old != nullptr && !old->versions.empty()) {
    spdlog::warn("model '{}' failed to reload, versions {}..{} keep serving: {}", model->name,
                 old->versions.begin()->first, old->versions.rbegin()->first, result.message());
    model->versions = old->versions;
    model->config_text = old->config_text;
    for (const auto& [v, _] : old->versions) model->reload_errors[v] = result.message();
  } else if (model->versions.empty() && model->failed.empty()) {
    model->error = result.message();
  }
}

}  // namespace

ModelLoad LoadModelState(const std::string& name, const ModelState* old,
                         const ModelLoadOptions& options, const LoadOverride& override) {
  ModelLoad load{std::make_shared<ModelState>(), Status::Ok()};
  load.state->name = name;
  // Taken before reading: a change during the load is seen again by the next poll.
  load.state->fingerprint = FolderFingerprint(options.repository / name);
  const fs::path dir =
      override.model_dir.empty() ? options.repository / name : override.model_dir;
  load.status = LoadVersions(old, options, override, load.state.get());
  if (!load.status.ok()) {
    load.status = Status(load.status.code(), HidePath(load.status.message(), dir, name));
    KeepServing(old, load.status, load.state.get());
  }
  return load;
}

ModelLoad FailedLoad(const std::string& name, const ModelState* old,
                     const ModelLoadOptions& options, Status why) {
  ModelLoad load{std::make_shared<ModelState>(), std::move(why)};
  load.state->name = name;
  // The folder as it is now: polling retries only once it changes.
  load.state->fingerprint = FolderFingerprint(options.repository / name);
  KeepServing(old, load.status, load.state.get());
  return load;
}

std::vector<std::string> ComposingModels(const std::string& name, const ModelLoadOptions& options,
                                         const LoadOverride& override) {
  if (override.config.has_value()) return EnsembleStepModels(*override.config);
  const fs::path dir =
      override.model_dir.empty() ? options.repository / name : override.model_dir;
  std::string text;
  if (!ReadRepositoryFile(dir / "config.pbtxt", &text)) return {};
  auto config = ParseModelConfig(text, /*strict=*/false, nullptr);
  if (!config.ok() || config->platform() != "ensemble") return {};
  return EnsembleStepModels(*config);
}

}  // namespace inferd::serving
