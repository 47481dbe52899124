// ai.inferd.PagedAttention: decoder attention over a paged KV cache (vLLM's layout), for a step
// that mixes prefill chunks and decodes of several sequences. Schema: docs/optimizer.md (the
// generation runner's rewrite writes the op and owns the caches).
//
// Inputs: query [1, H, T, D], key/value [1, Hkv, T, D] (the step's new tokens, flattened over
// sequences), key_cache/value_cache [num_blocks, Hkv, block_size, D] (mutated in place),
// slot_mapping [T], query_start [S+1], context_lens [S], block_tables [S, max_blocks] (int64).
// The kernel first writes token t's K/V at slot_mapping[t] (= block · block_size + offset), then
// token j of sequence s (position p = context_lens[s] - n_s + j) attends causally to positions
// 0..p of s through its block table. Query head h uses KV head h / (H / Hkv).
//
// INT8 caches (the runner's kv_cache_dtype "int8"): key_cache/value_cache are int8 codes of the
// same shape and two more inputs, key_scales/value_scales float32 [num_blocks, Hkv, block_size],
// hold one scale per cached token and KV head: row value = code · scale, scale = max|row| / 127
// (symmetric, round to nearest). A block fills over several steps, so a scale per token keeps an
// append from touching the rows already written. head_dim + 4 bytes per row instead of
// 4·head_dim. The step's new K/V are quantized as they are written; reads dequantize each
// 32-key chunk (flash_attention.h's KvRows::qdata). Attention itself stays float32.
//
// The functions below are the kernel without the graph plumbing, for the op and for benchmarks.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace inferd::cpu {

// Raw views of one call's tensors. Sizes as in the header comment.
struct PagedAttentionArgs {
  const float* query = nullptr;
  const float* key = nullptr;
  const float* value = nullptr;
  float* key_cache = nullptr;  // float32 caches; null with INT8 caches
  float* value_cache = nullptr;
  // INT8 caches (set instead of key_cache/value_cache): codes [num_blocks, Hkv, block_size, D],
  // scales [num_blocks, Hkv, block_size].
  int8_t* key_cache_i8 = nullptr;
  int8_t* value_cache_i8 = nullptr;
  float* key_scales = nullptr;
  float* value_scales = nullptr;
  const int64_t* slot_mapping = nullptr;
  const int64_t* query_start = nullptr;
  const int64_t* context_lens = nullptr;
  const int64_t* block_tables = nullptr;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t num_tokens = 0, num_seqs = 0;
  int64_t num_blocks = 0, block_size = 0, max_blocks_per_seq = 0;
  float scale = 1.f;

  bool int8_cache() const { return key_cache_i8 != nullptr; }
};

// Symmetric INT8 of one row: *scale = max|x| / 127, q[i] = round(x[i] / *scale) in [-127, 127]
// (all zeros with scale 0 for a zero row; a non-finite element becomes code 0, which float32
// caches would have kept: INT8 cannot represent it). How the op writes INT8 caches.
void QuantizeKvRow(const float* x, int64_t n, int8_t* q, float* scale);

// Checks the index inputs against the sizes: slots in range, query_start from 0 to T and
// non-decreasing, n_s <= context_lens[s], every block a sequence uses inside block_tables and a
// valid block id. INVALID_ARGUMENT naming the first bad entry; nothing is written.
Status CheckPagedAttentionArgs(const PagedAttentionArgs& args);

// Runs the op on checked args: cache writes, then attention into out [H, T, D]. Parallel over
// (sequence, KV head, query tile) on the calling OpenMP team's threads (omp_get_max_threads).
void PagedAttention(const PagedAttentionArgs& args, float* out);

// The same semantics, attention single-threaded with materialized scores (flash_attention.h's
// ReferenceAttention): the plain version tests and benchmarks compare against.
void PagedAttentionReference(const PagedAttentionArgs& args, float* out);

}  // namespace inferd::cpu
