// Tiled attention with an online softmax (the flash-attention scheme) for one group of query
// heads that share their keys and values: the kernel behind ai.inferd.PagedAttention (paged K/V,
// decoder) and of ai.inferd.Attention (dense K/V, encoder).
//
// For every query row, out = softmax(scale · q · Kᵀ [+ mask]) · V over the keys the row may see,
// computed 32 keys at a time: each chunk of K is scored against all rows of a sub-tile at once
// (a register-blocked product over the chunk transposed 8x8 in registers; for at most 4 rows,
// i.e. decode, dot products straight from the K rows), the running row max and sum are updated
// and the accumulated output rescaled (vectorized exp), then the chunk's probabilities times V
// are added (V rows read in place). The full score matrix never exists; memory is
// O(rows · head_dim) per thread. Each K/V row is read once per sub-tile of up to 48 rows, for all
// heads of the tile: grouped-query attention reads a KV block once for its whole group.
//
// Vectorized with GCC/clang vector extensions (8 floats), so it compiles for any x86-64 target
// and uses AVX2/AVX-512 registers when the build enables them (-march=native by default).
// Measured: bench/kernels/attention_bench.cc.
#pragma once

#include <cstdint>

namespace inferd::cpu {

// Where the K (or V) row of each key position is: dense rows, or rows in fixed-size blocks that
// a block table maps to physical blocks (vLLM's paged layout).
struct KvRows {
  const float* data = nullptr;           // dense: row 0; paged: row 0 of physical block 0
  int64_t row_stride = 0;                // elements between consecutive rows of a block
  const int64_t* block_table = nullptr;  // nullptr: dense; else physical block of logical block b
  int64_t block_size = 0;                // rows per block (paged)
  int64_t block_stride = 0;              // elements between consecutive physical blocks (paged)
  // INT8 rows (the paged INT8 KV cache, kv_cache_dtype "int8"): when qdata is set, data is unused
  // and element x of row pos is qdata[Offset(pos) + x] · scales[ScaleIndex(pos)]: codes laid out
  // as data would be, one float scale per row, consecutive within a block, scale_block_stride
  // apart between physical blocks. FlashAttention dequantizes a chunk's rows into its scratch.
  const int8_t* qdata = nullptr;
  const float* scales = nullptr;
  int64_t scale_block_stride = 0;

  int64_t Offset(int64_t pos) const {
    if (block_table == nullptr) return pos * row_stride;
    return block_table[pos / block_size] * block_stride + (pos % block_size) * row_stride;
  }
  int64_t ScaleIndex(int64_t pos) const {
    if (block_table == nullptr) return pos;
    return block_table[pos / block_size] * scale_block_stride + pos % block_size;
  }
  const float* Row(int64_t pos) const { return data + Offset(pos); }  // float rows only
  // Element x of row pos, float or INT8 (the reference's accessor).
  float At(int64_t pos, int64_t x) const {
    if (qdata == nullptr) return Row(pos)[x];
    return static_cast<float>(qdata[Offset(pos) + x]) * scales[ScaleIndex(pos)];
  }
};

// One attention problem: `num_heads` query heads × `num_rows` query rows against the same keys.
// Row (h, j) reads q + h·q_head_stride + j·q_row_stride (head_dim floats) and writes
// out + h·out_head_stride + j·out_row_stride (value_dim floats). Every key position the rows can
// see must be readable through `key` and `value` (block-table entries valid); the caller checks.
struct AttentionTile {
  const float* q = nullptr;
  int64_t q_head_stride = 0, q_row_stride = 0;
  float* out = nullptr;
  int64_t out_head_stride = 0, out_row_stride = 0;
  int64_t num_heads = 1, num_rows = 0;
  int64_t head_dim = 0, value_dim = 0;
  float scale = 1.f;
  KvRows key, value;
  int64_t num_keys = 0;        // keys 0..num_keys-1 exist
  int64_t causal_offset = -1;  // >= 0: row j sees keys 0..causal_offset + j only (decoder)
  // Optional additive mask: row (h, j), key k adds mask[h·mask_head_stride + j·mask_row_stride +
  // k·mask_key_stride] to the scaled score (strides 0 broadcast).
  const float* mask = nullptr;
  int64_t mask_head_stride = 0, mask_row_stride = 0, mask_key_stride = 0;
};

// Rows (heads × query rows) FlashAttention works on at a time; callers splitting a problem into
// parallel tiles do best with multiples of it.
inline constexpr int64_t kFlashTileRows = 48;

// Computes one tile (single-threaded; callers parallelize over tiles). Rows that see no key get
// zeros. Uses a per-thread scratch buffer that grows to the largest tile and is reused.
void FlashAttention(const AttentionTile& tile);

// The same result by the textbook method (materialized scores, softmax in double), for tests and
// benchmarks.
void ReferenceAttention(const AttentionTile& tile);

}  // namespace inferd::cpu
