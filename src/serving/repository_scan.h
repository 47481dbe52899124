// Repository scanning for poll mode: which model folders exist and whether one changed.
//
// A folder's fingerprint lists every file below it (relative path, size, modification time in ns),
// sorted, so any added, removed, rewritten or touched file — config.pbtxt, a version's model.onnx,
// warmup data — changes it. Writers should still replace files atomically (write elsewhere, then
// rename): a poll that sees a half-written model fails that load, the running version keeps
// serving, and the next poll (the file's size or time changed again) retries.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace inferd::serving {

// Sub-folders of `repository` not starting with '.', sorted. Empty when it cannot be read.
std::vector<std::string> ListModelFolders(const std::filesystem::path& repository);

// The fingerprint of everything below `dir` ("" when it does not exist).
std::string FolderFingerprint(const std::filesystem::path& dir);

}  // namespace inferd::serving
