// ModelRunner: runs one step of a decoder over a batch of sequence chunks, with the K/V of every
// token kept in a paged pool of blocks (GEN.md section 3). The runner owns block contents; which
// block ids are free or used is the BlockManager's business (block_manager.h). Block ids are
// 0..num_blocks()-1.
//
// (Declarations as in GEN.md section 3; genrunner implements CreateDecoderRunner.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd::gen {

struct DecoderConfig {            // from config.json
  std::string model_type; int vocab_size, hidden_size, num_layers, num_heads, num_kv_heads,
  head_dim, max_context; int bos_token_id, eos_token_id;
};
struct RunnerOptions {
  size_t kv_cache_bytes = 256 << 20;  // K+V of all layers; num_blocks derived from it
  int block_size = 16;
  int num_threads = 0;                // 0 = all cores
  bool int8_weights = false;          // dynamic-int8 MatMul weights (quantize/dynamic_int8.h)
};
struct SequenceChunk {            // one sequence's share of a step
  int64_t seq_id;
  std::span<const int32_t> tokens;   // new tokens computed this step (prefill chunk or 1 decode)
  int64_t start_position;            // position of tokens[0] = tokens already in the cache
  std::span<const int32_t> block_table;  // covers positions [0, start_position + tokens.size())
  bool need_logits;                  // return logits of the chunk's last token
};
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const DecoderConfig& config() const = 0;
  virtual int block_size() const = 0;
  virtual int num_blocks() const = 0;
  // Runs one step over all chunks; logits: float32 [number of chunks with need_logits, vocab],
  // in chunk order. Errors leave the cache contents of the step's slots undefined only.
  virtual Status Step(std::span<const SequenceChunk> chunks, Tensor* logits) = 0;
};
// Loads <dir>/model.onnx + config.json, rewrites attention, allocates the KV pool.
StatusOr<std::unique_ptr<ModelRunner>> CreateDecoderRunner(const std::filesystem::path& dir,
                                                           const RunnerOptions& options);

}  // namespace inferd::gen
