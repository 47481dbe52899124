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
  float* key_cache = nullptr;
  float* value_cache = nullptr;
  const int64_t* slot_mapping = nullptr;
  const int64_t* query_start = nullptr;
  const int64_t* context_lens = nullptr;
  const int64_t* block_tables = nullptr;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t num_tokens = 0, num_seqs = 0;
  int64_t num_blocks = 0, block_size = 0, max_blocks_per_seq = 0;
  float scale = 1.f;
};

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
