// ModelRunner: runs a decoder-only model one scheduler step at a time over a paged KV cache.
//
// CreateDecoderRunner loads <dir>/model.onnx (Hugging Face ONNX-export layout: input_ids,
// attention_mask, position_ids, past_key_values.N.key|value → logits, present.N.key|value) and
// <dir>/config.json, rewrites each layer's attention into ai.inferd.PagedAttention
// (optimizer/paged_attention_rewrite.h), optionally quantizes the MatMul weights to dynamic INT8,
// and builds a Session on the result. The runner owns the KV pool: per layer one K and one V
// tensor [num_blocks, kv_heads, block_size, head_dim], float32 or (kv_cache_dtype int8) int8 codes
// with one float scale per (block, kv head, token) beside them, num_blocks = kv_cache_bytes /
// KvBlockBytes (one block across all layers, K and V, scales included): the same budget holds
// ~3.5x the blocks in INT8 (head_dim 32: 36 bytes a row instead of 128). Which blocks are free is
// the caller's business (the block manager); the runner only reads and writes the blocks a step's
// block tables name.
//
//   RunnerOptions opts;
//   opts.kv_cache_bytes = 64 << 20;
//   ASSIGN_OR_RETURN(auto runner, CreateDecoderRunner("build/models/gen/tiny-llama", opts));
//   std::vector<int32_t> prompt = {1, 57, 903}, table = {0};   // block 0 holds positions 0..15
//   SequenceChunk c{.seq_id = 7, .tokens = prompt, .start_position = 0, .block_table = table,
//                   .need_logits = true};
//   Tensor logits;                                               // [1, vocab] afterwards
//   RETURN_IF_ERROR(runner->Step({&c, 1}, &logits));
//
// One Step flattens the new tokens of all chunks into one row of T tokens (input_ids and
// position_ids [1, T]), so the whole graph but attention runs once over the batch; attention
// writes each token's K/V into its slot and reads every sequence's context from the pool. Only
// the rows whose logits are asked for go through the LM head (inferd.logits_rows).
//
// Thread-safety: one Step at a time (the engine's step thread); config() and the sizes are
// immutable after creation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd {
class Session;
}

namespace inferd::gen {

// The model's shape, from config.json (Hugging Face field names).
struct DecoderConfig {
  std::string model_type;  // "llama" | "gpt2" | "mixtral"
  int vocab_size = 0, hidden_size = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0,
      head_dim = 0, max_context = 0;  // max_context: max_position_embeddings
  int bos_token_id = -1, eos_token_id = -1;
  // Mixture of experts (HF Mixtral's num_local_experts / num_experts_per_tok): 0 for a dense
  // model. The graph's ai.inferd.MoE nodes carry their own; these describe the model.
  int num_experts = 0, experts_per_token = 0;
};

// Parses config.json: vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
// max_position_embeddings (or n_positions) are required; num_key_value_heads defaults to the heads,
// head_dim to hidden_size / heads; bos/eos_token_id (an int, or the first of a list) to -1;
// num_local_experts to 0 (dense) and num_experts_per_tok to 2 (must lie in 1..num_local_experts).
// INVALID_ARGUMENT naming the file and field on anything missing, mistyped or inconsistent.
StatusOr<DecoderConfig> LoadDecoderConfig(const std::filesystem::path& config_json);

// How the KV pool stores K and V. kInt8: symmetric INT8 per (token, kv head) row with a float32
// scale (kernels/cpu/attention/paged_attention.h), written as the step's K/V arrive, dequantized
// by attention as it reads; attention still computes in float32.
enum class KvCacheDtype { kFloat32, kInt8 };

// "float32" | "int8" (a model's `kv_cache_dtype`): INVALID_ARGUMENT naming the value and the
// known ones otherwise.
StatusOr<KvCacheDtype> ParseKvCacheDtype(std::string_view name);
const char* KvCacheDtypeName(KvCacheDtype dtype);

// Bytes of one KV block across all layers, K and V: 2 · layers · kv_heads · block_size rows of
// 4 · head_dim bytes (float32) or head_dim + 4 (int8 codes and their float scale).
size_t KvBlockBytes(const DecoderConfig& config, int block_size, KvCacheDtype dtype);

struct RunnerOptions {
  size_t kv_cache_bytes = 256 << 20;  // K+V of all layers; num_blocks derived from it (>= 1)
  int block_size = 16;                // tokens per block, 1..1024
  int num_threads = 0;                // intra-op threads; 0 = all cores (>= 0)
  bool int8_weights = false;          // dynamic-int8 MatMul weights (quantize/dynamic_int8.h)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kFloat32;  // the KV pool's storage
  // Q/K/V and gate/up projections of one input as one MatMul each (optimizer/
  // sibling_matmul_merge.h): same results, fewer kernel calls per step. Off only to measure it.
  bool merge_projections = true;
};

struct SequenceChunk {  // one sequence's share of a step
  int64_t seq_id;
  std::span<const int32_t> tokens;  // new tokens computed this step (prefill chunk or 1 decode)
  int64_t start_position;           // position of tokens[0] = tokens already in the cache
  std::span<const int32_t> block_table;  // covers positions [0, start_position + tokens.size())
  bool need_logits;                      // return logits of the chunk's last token
  // Return logits of every token of the chunk (tokens.size() rows, in order; need_logits is then
  // implied): a speculative verification, whose k draft tokens and the token before them each
  // need the target's next-token distribution.
  bool all_logits = false;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const DecoderConfig& config() const = 0;
  virtual int block_size() const = 0;
  virtual int num_blocks() const = 0;
  // Bytes of one block of the KV pool (KvBlockBytes); 0 when the runner does not say (fakes).
  virtual size_t kv_block_bytes() const { return 0; }
  // Runs one step over all chunks; logits: float32 [rows, vocab], in chunk order, where a chunk
  // contributes tokens.size() rows with all_logits, else one row with need_logits, else none. INVALID_ARGUMENT (nothing run) for no chunks, an empty chunk, a token outside
  // the vocabulary, a position past max_context, a block table too short or naming a block
  // outside 0..num_blocks-1. Errors leave the cache contents of the step's slots undefined only.
  virtual Status Step(std::span<const SequenceChunk> chunks, Tensor* logits) = 0;
  // The session behind the runner, for profiling (Session::executor()); null when there is none.
  virtual const Session* session() const { return nullptr; }
  // Mixture-of-experts router load: tokens routed to each expert since creation, per MoE layer
  // ([layer][expert], the layers in graph order; a token counts once per expert it goes to, so
  // a layer's sum is tokens x top_k). Empty for dense models. Thread-safe: may be called while
  // a Step runs (each count is read atomically; a step's counts land one layer at a time).
  virtual std::vector<std::vector<int64_t>> ExpertTokens() const { return {}; }
};

// Loads <dir>/model.onnx + config.json, rewrites attention, allocates the KV pool. Each
// ai.inferd.MoE node's expert_counts output becomes a graph output the runner adds up after
// every step (ExpertTokens). Fails (the
// message names the file and the reason) on a missing or corrupt file, a graph the attention
// rewrite cannot handle, or a budget below one block.
StatusOr<std::unique_ptr<ModelRunner>> CreateDecoderRunner(const std::filesystem::path& dir,
                                                           const RunnerOptions& options);

}  // namespace inferd::gen
