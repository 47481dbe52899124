// The model repository on disk (Triton's layout): pure functions over its folders, no state.
//
//   DIR/<model>/config.pbtxt            optional (model_config.h)
//   DIR/<model>/<version>/model.onnx    versions are positive integers
//
// A model name is a folder name: non-empty, no '/', not starting with '.' (hidden folders are
// never models). Every check of a requested model name goes through IsValidModelName, so a name
// like "../x" can never reach the filesystem.
//
// A folder's fingerprint lists every file below it (relative path, size, modification time in ns),
// sorted, so any added, removed, rewritten or touched file — config.pbtxt, a version's model.onnx,
// warmup data — changes it. Writers should still replace files atomically (write elsewhere, then
// rename): a poll that sees a half-written model fails that load, the running version keeps
// serving, and the next poll (the file's size or time changed again) retries.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model_config.pb.h"

namespace inferd::serving {

// Non-empty, no '/', not starting with '.'.
bool IsValidModelName(std::string_view name);

// True when `name` is a valid model name and `repository`/`name` is a directory.
bool HasModelFolder(const std::filesystem::path& repository, const std::string& name);

// Sub-folders of `repository` that are valid model names, sorted. UNAVAILABLE when the folder
// cannot be read.
StatusOr<std::vector<std::string>> ScanModelFolders(const std::filesystem::path& repository);
// As ScanModelFolders; empty when the folder cannot be read.
std::vector<std::string> ListModelFolders(const std::filesystem::path& repository);

// The fingerprint of everything below `dir` ("" when it does not exist).
std::string FolderFingerprint(const std::filesystem::path& dir);

// Reads the whole file at `path` (config.pbtxt, warmup data) into *bytes; false when it cannot be
// read or is not a regular file (a FIFO or device would block the reader).
bool ReadRepositoryFile(const std::filesystem::path& path, std::string* bytes);

// The one check of every file a model's load reads from its folder (the model file, config.pbtxt,
// labels, warmup data; ONNX external data is confined to the model file's folder by graph/onnx_io
// itself): the file `model_dir / relative` (`relative` as the config or the layout names it) is
// resolved with symlinks followed and `..` applied (weakly_canonical) and must lie strictly inside
// `model_dir / within` (resolved likewise; "" = the model folder, "1" = version 1's folder) and be
// a regular file, checked before it is opened. So `../../other/1/model.onnx`, an absolute path or
// a symlink to /etc/passwd is refused, and a FIFO, device or folder never blocks a load.
// Messages name the file as `<name>/<relative>`, never model_dir's absolute path: NOT_FOUND when it
// does not exist, INVALID_ARGUMENT when it is outside or not a regular file. `what` names the
// config field or role ("default_model_filename", "label_filename").
StatusOr<std::filesystem::path> ResolveModelFile(const std::filesystem::path& model_dir,
                                                 std::string_view name,
                                                 const std::filesystem::path& within,
                                                 const std::filesystem::path& relative,
                                                 std::string_view what);

// `message` with every occurrence of the folder `dir` (as given and resolved, followed by '/')
// replaced by `shown_as` + '/' ("" drops it): error texts name files relative to the repository
// and never reveal its absolute path. Only whole path starts are replaced.
std::string HidePath(std::string message, const std::filesystem::path& dir,
                     std::string_view shown_as);

// The version folders of `model_dir` (names of 1 to 18 digits, value >= 1), ascending.
std::vector<int64_t> ListVersionFolders(const std::filesystem::path& model_dir);

// The versions a version_policy chooses among those on disk: all; the specific ones (a version
// without a folder goes to `missing` with the reason); or the latest num_versions (default 1).
struct VersionSelection {
  std::vector<int64_t> chosen;             // ascending for all/latest, policy order for specific
  std::map<int64_t, std::string> missing;  // version → why it cannot load
};
VersionSelection SelectVersions(const inference::ModelVersionPolicy& policy,
                                const std::vector<int64_t>& on_disk,
                                const std::string& model_name);

}  // namespace inferd::serving
