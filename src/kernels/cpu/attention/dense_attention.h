// Attention of one head over dense K/V rows, at matrix-multiply speed: the kernel behind the
// encoder's ai.inferd.Attention (kernels/cpu/fused/attention.cc). The decoder's paged path stays
// on flash_attention.h.
//
// For every query row, out = softmax(scale · q · Kᵀ [+ mask]) · V. The head's keys are packed
// once per call, transposed into 16-key panels ([d][16] each), and its values into 16-column
// panels ([keys][16]), so both products run one register tile (rows x 16 keys or columns) over
// contiguous panels that stay in L1/L2: scores S = Q·Kᵀ for a tile of up to 48 query rows against
// a block of up to 512 keys, then a vectorized softmax over each row of the block (two passes: max,
// then exp and sum; an online rescale between key blocks), then O += P·V. For the sequence lengths
// of an encoder (≤ 512) a row's softmax is one pass over all its keys, so the softmax costs about
// 15% of the arithmetic. Rows are copied (scaled) into a dense tile before scoring: the heads'
// rows lie H·D floats apart, a stride that maps them onto a few L1 sets.
//
// The register tiles are chosen at run time by cpuid, whatever the build's -march: on AVX-512 a
// 12 x 32 tile over two panels at once (two zmm accumulators per row; 12 x 16 for an odd last
// panel) and 16-lane softmax passes, on AVX2 + FMA the 6 x 16 one (two ymm per row); the two sum
// in the same order and give identical results. Without AVX2 and FMA the call runs
// flash_attention.h's portable FlashAttention on the same problem.
// Measured: bench/kernels/attention_bench.cc, docs/performance.md ("Attention").
#pragma once

#include <cstdint>

namespace inferd::cpu {

// One head: rows j < num_rows read q + j·q_row_stride (head_dim floats) and write
// out + j·out_row_stride (value_dim floats); key/value row k (k < num_keys) is at
// key + k·key_row_stride / value + k·value_row_stride. Optional additive mask: row j, key k adds
// mask[j·mask_row_stride + k·mask_key_stride] to the scaled score (strides 0 broadcast). A row
// whose scores are all -inf gets zeros. num_keys >= 1, head_dim >= 1, value_dim >= 1.
struct DenseAttentionHead {
  const float* q = nullptr;
  int64_t q_row_stride = 0;
  const float* key = nullptr;
  int64_t key_row_stride = 0;
  const float* value = nullptr;
  int64_t value_row_stride = 0;
  float* out = nullptr;
  int64_t out_row_stride = 0;
  int64_t num_rows = 0, num_keys = 0;
  int64_t head_dim = 0, value_dim = 0;
  float scale = 1.f;
  const float* mask = nullptr;
  int64_t mask_row_stride = 0, mask_key_stride = 0;
};

// Query rows per tile; callers splitting a head's rows over threads do best with multiples of it.
inline constexpr int64_t kDenseTileRows = 48;

// The register tiles DenseAttention runs, in increasing order of width. kBest: the widest this CPU
// has (DenseAttentionBestTiles()); tests and benchmarks name a narrower one to compare the paths on
// one machine, and a request above the CPU's best runs the best.
enum class DenseAttentionTiles { kBest = -1, kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
DenseAttentionTiles DenseAttentionBestTiles();

// Computes the head on the calling thread (callers parallelize over heads and row ranges). Uses
// per-thread scratch that grows to the largest problem seen (about (keys·(d + dv) + 48·(d + dv +
// 512)) floats) and is reused. `prefetch`, if given, is the head the caller computes next: its
// rows are brought into L2 while this one computes (a hint; nothing of it is read otherwise).
void DenseAttention(const DenseAttentionHead& head, const DenseAttentionHead* prefetch = nullptr,
                    DenseAttentionTiles tiles = DenseAttentionTiles::kBest);

// Multi-head attention over the projections before the head split (ai.inferd.Attention's layout):
// q [batch, q_seq, heads·head_dim], k [batch, kv_seq, heads·head_dim],
// v [batch, kv_seq, heads·value_dim] → y [batch, q_seq, heads·value_dim], each head's columns read
// and written in place. The optional mask has strides (0: broadcast) over [batch, heads, q_seq,
// kv_seq]. Runs DenseAttention per (batch, head, row range) on the OpenMP threads; a head's rows
// are split only when there are too few heads to share. All sizes >= 1.
struct MultiHeadAttentionArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* y = nullptr;
  int64_t batch = 0, q_seq = 0, kv_seq = 0, heads = 0, head_dim = 0, value_dim = 0;
  float scale = 1.f;
  const float* mask = nullptr;
  int64_t mask_strides[4] = {0, 0, 0, 0};
  DenseAttentionTiles tiles = DenseAttentionTiles::kBest;
};
void MultiHeadAttention(const MultiHeadAttentionArgs& args);

// Whether DenseAttention runs register tiles (AVX2/FMA or AVX-512) on this CPU (else the portable
// kernel).
bool DenseAttentionVectorized();

}  // namespace inferd::cpu
