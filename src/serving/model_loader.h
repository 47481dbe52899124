// Loading one model of the repository into a new ModelState, blue-green: its config.pbtxt is
// read and validated, the versions its version_policy chooses are created (model_version.h), and
// versions whose folder and config did not change are taken over from the running state as they
// are. When a version fails to reload, the running one keeps serving (a reload error on its row);
// when nothing new loads, the running versions all keep serving.
//
// The caller (ModelManager) serializes loads of the manager, publishes the returned state and
// retires the versions it replaced. Nothing here touches the manager's state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model_config.pb.h"
#include "serving/model_version.h"

namespace inferd::serving {

// One model as served: its versions and their state. Immutable once published; a (re)load or an
// unload builds a new one and swaps it in.
struct ModelState {
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

struct ModelLoadOptions {
  std::filesystem::path repository;
  bool strict_config = true;  // unknown config.pbtxt fields are errors (else warnings)
  ModelVersionOptions versions;
};

// What a repository-API load changes about the load (Triton's load parameters).
struct LoadOverride {
  // Create every version anew even when its files and config did not change (an explicit load
  // request reloads; a repository poll keeps unchanged versions).
  bool force = false;
  // Replaces config.pbtxt (the `config` load parameter).
  std::optional<inference::ModelConfig> config;
  // Replaces the model's folder in the repository (file overrides: the model loads from these
  // files only, as Triton). Empty: the repository's folder.
  std::filesystem::path model_dir;
};

struct ModelLoad {
  std::shared_ptr<ModelState> state;  // to publish (never null)
  // OK, or why the model or one of its versions failed (also recorded in `state`).
  Status status;
};

// Loads model `name` (a folder of options.repository) as described above. `old` is the state
// serving now (nullptr: none, or unloaded).
// With `override.force`, a version that fails to reload makes the status an error although its
// running copy keeps serving.
ModelLoad LoadModelState(const std::string& name, const ModelState* old,
                         const ModelLoadOptions& options, const LoadOverride& override = {});

// The outcome of a load that produced nothing (it passed its deadline and was abandoned): as a
// failed LoadModelState, the running versions of `old` keep serving (with `why` as their reload
// error), or the whole model is UNAVAILABLE with `why`.
ModelLoad FailedLoad(const std::string& name, const ModelState* old,
                     const ModelLoadOptions& options, Status why);

// The composing models of model `name` when its config (as LoadModelState would read it) is an
// ensemble, in step order; empty otherwise or when the config cannot be read (the load reports
// that).
std::vector<std::string> ComposingModels(const std::string& name, const ModelLoadOptions& options,
                                         const LoadOverride& override = {});

}  // namespace inferd::serving
