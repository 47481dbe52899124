// Generative model folders in the repository: how config.pbtxt marks them and the engine
// settings their `parameters` carry. Pure (reads config.pbtxt only); src/genserve builds the
// engine from the result and `inferd serve` serves it on the generation API (server/openai_http.h)
// while the ModelManager skips the folder (ModelManagerOptions::external_models).
//
//   DIR/tiny-llama/config.pbtxt
//     backend: "inferd_generate"
//     parameters { key: "kv_cache_bytes" value: { string_value: "64MiB" } }
//     parameters { key: "max_num_seqs"   value: { string_value: "16" } }
//     parameters { key: "kv_cache_dtype" value: { string_value: "int8" } }   # or "float32"
//   DIR/tiny-llama/1/   model.onnx, config.json, tokenizer.model, [chat_template.json]
//
// The model files sit in the highest version folder, or in the model folder itself when it has
// none. Generative models load once at start: they are not polled, reloaded or unloaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "model_config.pb.h"

namespace inferd::serving {

inline constexpr const char* kGenerativeBackend = "inferd_generate";

struct GenerativeConfig {
  std::filesystem::path model_dir;            // where model.onnx, config.json, tokenizer.model are
  size_t kv_cache_bytes = size_t{256} << 20;  // "kv_cache_bytes": K+V of all layers ("64MiB")
  int block_size = 16;                        // "block_size": tokens per KV block
  int max_num_batched_tokens = 512;           // "max_num_batched_tokens": token budget per step
  int max_num_seqs = 64;                      // "max_num_seqs": sequences per step
  int max_context = 0;                        // "max_context": 0 = config.json's context
  bool int8_weights = false;                  // "int8_weights": dynamic-int8 MatMul weights
  // "kv_cache_dtype": the KV pool's storage, "float32" or "int8" (INT8 codes with a scale per
  // token and head: ~3.5x the blocks in the same kv_cache_bytes; generation/model_runner.h).
  std::string kv_cache_dtype = "float32";
  bool enable_prefix_caching = true;          // "enable_prefix_caching"
  bool chunked_prefill = true;                // "chunked_prefill"
  int num_threads = 0;                        // "num_threads": 0 = the server's --threads
};

// True when the parsed config's backend is kGenerativeBackend.
bool IsGenerativeConfig(const inference::ModelConfig& config);

// Reads `config.parameters` (unknown keys and bad values: INVALID_ARGUMENT naming the key) and
// finds the model files in `model_folder`'s latest version folder (or the folder itself when it has
// none), each confined to it by repository.h's ResolveModelFile: NOT_FOUND naming a missing file,
// INVALID_ARGUMENT for one that is a symlink leading out or not a regular file.
StatusOr<GenerativeConfig> ReadGenerativeConfig(const inference::ModelConfig& config,
                                                const std::filesystem::path& model_folder);

// The repository's generative model folders (config.pbtxt readable and marked generative),
// sorted. Folders whose config.pbtxt does not parse are left to the ModelManager, which reports
// them.
std::vector<std::string> ListGenerativeModels(const std::filesystem::path& repository);

}  // namespace inferd::serving
