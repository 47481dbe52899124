// Compiled-model cache: the optimized graph of a model version, written back as ONNX
// (SaveOnnxModel), so that a restart or a reload of an unchanged model skips the optimizer.
//
//   ModelCache cache({.dir = "/var/cache/inferd", .build_id = "0.1.0"});
//   SessionOptions so;
//   bool hit = false;
//   ASSIGN_OR_RETURN(auto session, cache.CreateSession("/models/m/1/model.onnx", so, &hit));
//
// Key: a hash of the model file's bytes, the optimization level, `build_id` plus a hash of the
// running executable (a rebuilt inferd never reads an older build's graphs), and the CPU's feature
// flags. An entry is `<key>.onnx` and `<key>.meta` (size and checksum of the .onnx); both are
// written to temporary names and renamed, so a crash leaves no half entry. An entry whose size or
// checksum does not match (a truncated or corrupted file) is logged, removed and rebuilt. Cache
// failures (unwritable folder, full disk) never fail a load: the session is built without it.
//
// Models with external data files (weights beside model.onnx) are not cached: the key would have
// to cover those files too. Thread-safety: CreateSession may be called concurrently; concurrent
// misses of one key both build and the last rename wins (the entries are identical).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "session/session.h"

namespace inferd::serving {

struct ModelCacheOptions {
  // Cache folder, created when missing. Empty disables the cache (CreateSession builds directly).
  std::filesystem::path dir;
  // The inferd version; part of every key.
  std::string build_id;
};

// A 64-bit non-cryptographic hash of `bytes` (8 bytes per step), as 16 hex digits.
std::string ContentHash(std::string_view bytes, uint64_t seed = 0);

class ModelCache {
 public:
  explicit ModelCache(ModelCacheOptions options);

  bool enabled() const { return !options_.dir.empty(); }

  // Builds the session for `model_path` with `options`: from the cache when a valid entry exists
  // (*hit = true), else by loading and optimizing the model and storing the optimized graph.
  StatusOr<std::unique_ptr<Session>> CreateSession(const std::filesystem::path& model_path,
                                                   const SessionOptions& options, bool* hit) const;

  // The key of a model's bytes under `options` (exposed for tests).
  std::string Key(std::string_view model_bytes, const SessionOptions& options) const;

 private:
  ModelCacheOptions options_;
  std::string environment_;  // build id, executable hash and CPU flags, hashed
};

}  // namespace inferd::serving
