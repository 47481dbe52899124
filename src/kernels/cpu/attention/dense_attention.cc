#include "kernels/cpu/attention/dense_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/attention/flash_attention.h"
#include "kernels/cpu/util/denormals.h"
#include "kernels/cpu/util/exp_poly.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

// The portable path: flash_attention.h's tiles over the same head.
void PortableAttention(const DenseAttentionHead& h) {
  for (int64_t j0 = 0; j0 < h.num_rows; j0 += kFlashTileRows) {
    AttentionTile t;
    t.q = h.q + j0 * h.q_row_stride;
    t.q_row_stride = h.q_row_stride;
    t.out = h.out + j0 * h.out_row_stride;
    t.out_row_stride = h.out_row_stride;
    t.num_rows = std::min(kFlashTileRows, h.num_rows - j0);
    t.head_dim = h.head_dim;
    t.value_dim = h.value_dim;
    t.scale = h.scale;
    t.key = {h.key, h.key_row_stride};
    t.value = {h.value, h.value_row_stride};
    t.num_keys = h.num_keys;
    if (h.mask != nullptr) {
      t.mask = h.mask + j0 * h.mask_row_stride;
      t.mask_row_stride = h.mask_row_stride;
      t.mask_key_stride = h.mask_key_stride;
    }
    FlashAttention(t);
  }
}

#if defined(__x86_64__)
#define INFERD_AVX2 __attribute__((target("avx2,fma")))
#define INFERD_AVX512 __attribute__((target("avx512f,avx2,fma")))

constexpr int64_t kDensePanel = 16;  // keys (for Q·Kᵀ) or value columns (for P·V) per register tile
constexpr int kDenseMaxRows = 6;  // 6 rows x 2 vectors = 12 accumulators of the 16 ymm registers
constexpr int kMaxRows512 = 12;  // 12 rows x 1 vector of the 32 zmm registers
constexpr int64_t kTileRows = kDenseTileRows;
// Keys per softmax block: a 48 x 512 score tile (96 KB) stays in L2, and a BERT row's softmax is
// one block (no online rescale).
constexpr int64_t kKeyBlock = 512;
// Keys per P·V pass: a 256 x 16 value panel (16 KB) stays in L1 while every row tile uses it.
constexpr int64_t kDepthBlock = 256;

inline int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
// Floats between score rows of a block of nk keys: whole panels plus one cache line, so the rows
// a register tile broadcasts from (2 KB apart at 512 keys) do not share L1 sets.
inline int64_t ScoreStride(int64_t nk) { return RoundUp(nk, kDensePanel) + 16; }

// c[r][0..16) = (accumulate ? c[r][..] : 0) + Σ_k a[r·lda + k] · b[k·16 + 0..16) for MR rows:
// the one register tile of both products (b a 16-wide panel read front to back).
template <int MR>
INFERD_AVX2 void Tile(const float* a, int64_t lda, int64_t depth, const float* b, float* c,
                      int64_t ldc, bool accumulate) {
  // Fully unrolled over rows (the pragmas) so the accumulators live in registers.
  __m256 lo[MR], hi[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * kDensePanel);
    const __m256 b1 = _mm256_loadu_ps(b + k * kDensePanel + 8);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + k);
      lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
      hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
    if (accumulate) {
      lo[r] = _mm256_add_ps(lo[r], _mm256_loadu_ps(cr));
      hi[r] = _mm256_add_ps(hi[r], _mm256_loadu_ps(cr + 8));
    }
    _mm256_storeu_ps(cr, lo[r]);
    _mm256_storeu_ps(cr + 8, hi[r]);
  }
}

// The AVX-512 tiles: one 16-wide accumulator per row and panel, over NP adjacent panels (b, then
// b + b_next, ...; written to c, c + 16, ...). One panel gives up to 12 rows (12 of the 32 zmm
// registers; 12 independent FMA chains cover the 4-cycle latency of two FMA ports) against the
// AVX2 tile's 6; two panels (24 accumulators) let two vector loads feed 2·MR FMAs where one fed
// MR, so the broadcasts and panel loads no longer bound the FMA ports (with one panel, 13 loads
// per 12 FMAs). Same panels, same summation order per element as Tile (one FMA per k), so every
// path agrees to the last bit.
template <int MR, int NP>
INFERD_AVX512 void TilePanels512(const float* a, int64_t lda, int64_t depth, const float* b,
                                 int64_t b_next, float* c, int64_t ldc, bool accumulate) {
  __m512 acc[NP][MR];
#pragma GCC unroll 2
  for (int p = 0; p < NP; ++p) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc[p][r] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < depth; ++k) {
    __m512 bv[NP];
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_ps(b + p * b_next + k * kDensePanel);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p) acc[p][r] = _mm512_fmadd_ps(av, bv[p], acc[p][r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      if (accumulate) acc[p][r] = _mm512_add_ps(acc[p][r], _mm512_loadu_ps(cr + p * kDensePanel));
      _mm512_storeu_ps(cr + p * kDensePanel, acc[p][r]);
    }
  }
}

// One panel (the TileFn of the AVX-512 Tiles) and two (their PairFn).
template <int MR>
INFERD_AVX512 void Tile512(const float* a, int64_t lda, int64_t depth, const float* b, float* c,
                           int64_t ldc, bool accumulate) {
  TilePanels512<MR, 1>(a, lda, depth, b, 0, c, ldc, accumulate);
}
template <int MR>
INFERD_AVX512 void Tile512x2(const float* a, int64_t lda, int64_t depth, const float* b,
                             int64_t b_next, float* c, int64_t ldc, bool accumulate) {
  TilePanels512<MR, 2>(a, lda, depth, b, b_next, c, ldc, accumulate);
}

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, float*, int64_t, bool);
using PairFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t,
                        bool);

// The register tiles of one instruction set: tile[mr] computes mr rows (1 <= mr <= max_rows).
struct Tiles {
  int max_rows;
  TileFn tile[kMaxRows512 + 1];
  bool avx512;  // the softmax's passes run 16 lanes at a time (SoftmaxRow)
  PairFn pair[kMaxRows512 + 1];  // two panels at once (null: one panel at a time)
};
constexpr Tiles kAvx2Tiles = {kDenseMaxRows,
                              {nullptr, Tile<1>, Tile<2>, Tile<3>, Tile<4>, Tile<5>, Tile<6>},
                              false,
                              {}};
constexpr Tiles kAvx512Tiles = {kMaxRows512,
                                {nullptr, Tile512<1>, Tile512<2>, Tile512<3>, Tile512<4>,
                                 Tile512<5>, Tile512<6>, Tile512<7>, Tile512<8>, Tile512<9>,
                                 Tile512<10>, Tile512<11>, Tile512<12>},
                                true,
                                {nullptr, Tile512x2<1>, Tile512x2<2>, Tile512x2<3>, Tile512x2<4>,
                                 Tile512x2<5>, Tile512x2<6>, Tile512x2<7>, Tile512x2<8>,
                                 Tile512x2<9>, Tile512x2<10>, Tile512x2<11>, Tile512x2<12>}};

// Brings the rows of the head a thread computes next (its Q, K, V and output rows) into L2 a few
// cache lines at a time while the current head computes, so that head's packing, query copies and
// stores do not wait on memory (at batch 16 the heads' inputs, 24 MB, do not stay in cache).
class Prefetcher {
 public:
  explicit Prefetcher(const DenseAttentionHead* next) {
    if (next == nullptr) return;
    const int64_t d = next->head_dim * 4, dv = next->value_dim * 4;
    Add(next->q, next->q_row_stride, next->num_rows, d);
    Add(next->key, next->key_row_stride, next->num_keys, d);
    Add(next->value, next->value_row_stride, next->num_keys, dv);
    Add(next->out, next->out_row_stride, next->num_rows, dv);
  }
  // Spreads the lines over `steps` calls of Step().
  void Pace(int64_t steps) { per_step_ = (lines_ + steps - 1) / std::max<int64_t>(steps, 1); }

  // The next lines of this step's share (none once all are issued).
  INFERD_AVX2 void Step() {
    int64_t n = per_step_;
    for (; n > 0 && seg_ < count_; --n) {
      const Segment& g = segs_[seg_];
      const char* row = g.base + row_ * g.stride;
      _mm_prefetch(row + line_ * 64, _MM_HINT_T1);
      if (++line_ * 64 >= g.bytes + 63) {
        line_ = 0;
        if (++row_ == g.rows) {
          row_ = 0;
          ++seg_;
        }
      }
    }
  }

 private:
  struct Segment {
    const char* base;
    int64_t stride, rows, bytes;  // bytes: per row
  };
  void Add(const float* base, int64_t row_stride, int64_t rows, int64_t bytes) {
    segs_[count_++] = {reinterpret_cast<const char*>(base), row_stride * 4, rows, bytes};
    lines_ += rows * ((bytes + 63) / 64 + 1);
  }
  Segment segs_[4];
  int count_ = 0, seg_ = 0;
  int64_t row_ = 0, line_ = 0, lines_ = 0, per_step_ = 0;
};

// Rows [0, m) of a times one panel, in balanced tiles of at most t.max_rows rows (so 4..6 rows
// each once m >= 4 with the AVX2 tiles, 7..12 once m >= 7 with the AVX-512 ones: enough
// independent accumulators to hide the FMA latency); a prefetch step per tile.
INFERD_AVX2 void TileRows(const Tiles& t, const float* a, int64_t lda, int64_t m, int64_t depth,
                          const float* b, float* c, int64_t ldc, bool accumulate,
                          Prefetcher* next = nullptr) {
  const int64_t count = (m + t.max_rows - 1) / t.max_rows;
  for (int64_t i = 0; i < count; ++i) {
    if (next != nullptr) next->Step();
    const int64_t r0 = m * i / count, mr = m * (i + 1) / count - r0;
    t.tile[mr](a + r0 * lda, lda, depth, b, c + r0 * ldc, ldc, accumulate);
  }
}

// Rows [0, m) of a times `panels` panels (panel p at b + p·b_next, written to c + p·16): with
// AVX-512, two panels per register tile (Tile512x2), an odd last one by TileRows.
INFERD_AVX2 void PanelRows(const Tiles& t, const float* a, int64_t lda, int64_t m, int64_t depth,
                           const float* b, int64_t b_next, int64_t panels, float* c, int64_t ldc,
                           bool accumulate, Prefetcher* next = nullptr) {
  int64_t p = 0;
  if (t.pair[1] != nullptr) {
    const int64_t count = (m + t.max_rows - 1) / t.max_rows;
    for (; p + 2 <= panels; p += 2) {
      for (int64_t i = 0; i < count; ++i) {
        if (next != nullptr) {  // the pace counts one step per panel
          next->Step();
          next->Step();
        }
        const int64_t r0 = m * i / count, mr = m * (i + 1) / count - r0;
        t.pair[mr](a + r0 * lda, lda, depth, b + p * b_next, b_next, c + p * kDensePanel + r0 * ldc,
                   ldc, accumulate);
      }
    }
  }
  for (; p < panels; ++p) {
    TileRows(t, a, lda, m, depth, b + p * b_next, c + p * kDensePanel, ldc, accumulate, next);
  }
}

// dst[i·ldd + j] = src[j·lds + i] for i, j < 8 (the unpack / shuffle / lane-permute transpose).
INFERD_AVX2 inline void Transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

// The head's keys transposed into ceil(keys / 16) panels of [d][16], zero past the last key.
INFERD_AVX2 void PackKeys(const DenseAttentionHead& h, float* kt) {
  const int64_t d = h.head_dim, nk = h.num_keys;
  for (int64_t p = 0; p * kDensePanel < nk; ++p) {
    float* dst = kt + p * d * kDensePanel;
    const float* src = h.key + p * kDensePanel * h.key_row_stride;
    const int64_t n = std::min(kDensePanel, nk - p * kDensePanel);
    if (n == kDensePanel && d % 8 == 0) {
      for (int64_t half = 0; half < kDensePanel; half += 8) {
        for (int64_t x = 0; x < d; x += 8) {
          Transpose8x8(src + half * h.key_row_stride + x, h.key_row_stride,
                       dst + x * kDensePanel + half, kDensePanel);
        }
      }
      continue;
    }
    for (int64_t x = 0; x < d; ++x) {
      for (int64_t j = 0; j < kDensePanel; ++j) {
        dst[x * kDensePanel + j] = j < n ? src[j * h.key_row_stride + x] : 0.f;
      }
    }
  }
}

// The head's values as ceil(dv / 16) column panels of [keys][16], zero past column dv.
INFERD_AVX2 void PackValues(const DenseAttentionHead& h, float* vp) {
  const int64_t nk = h.num_keys, dv = h.value_dim;
  for (int64_t c = 0; c * kDensePanel < dv; ++c) {
    float* dst = vp + c * nk * kDensePanel;
    const float* src = h.value + c * kDensePanel;
    const int64_t cols = std::min(kDensePanel, dv - c * kDensePanel);
    for (int64_t k = 0; k < nk; ++k) {
      const float* row = src + k * h.value_row_stride;
      float* out = dst + k * kDensePanel;
      if (cols == kDensePanel) {
        _mm256_storeu_ps(out, _mm256_loadu_ps(row));
        _mm256_storeu_ps(out + 8, _mm256_loadu_ps(row + 8));
      } else {
        std::memcpy(out, row, cols * sizeof(float));
        std::fill(out + cols, out + kDensePanel, 0.f);
      }
    }
  }
}

// e^x on 8 lanes, x <= 0 (flash_attention.cc's ExpV8, util/exp_poly.h's constants); below
// -87.3 it returns e^-87.3, not 0.
INFERD_AVX2 inline __m256 Exp8(__m256 x) {
  using namespace exp_poly;
  x = _mm256_max_ps(x, _mm256_set1_ps(kMinArg));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fmadd_ps(fx, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[i]));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (their unmasked forms
// pass _mm512_undefined_ps() as the merge source, which is never read): a false positive, silenced
// for these three functions only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Exp8 on 16 lanes: the same operations per lane, so the same results to the last bit.
INFERD_AVX512 inline __m512 Exp16(__m512 x) {
  using namespace exp_poly;
  x = _mm512_max_ps(x, _mm512_set1_ps(kMinArg));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fmadd_ps(fx, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[i]));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

// SoftmaxRow's first pass over s[0, n16) (n16 a multiple of 16) on 16 lanes: adds the mask row
// (if any) and returns the lanes' max folded to 8 lanes (a max is exact in any order).
INFERD_AVX512 __m256 MaxPass16(float* s, int64_t n16, const float* mask) {
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t k = 0; k < n16; k += 16) {
    __m512 x = _mm512_loadu_ps(s + k);
    if (mask != nullptr) {
      x = _mm512_add_ps(x, _mm512_loadu_ps(mask + k));
      _mm512_storeu_ps(s + k, x);
    }
    vmax = _mm512_max_ps(vmax, x);
  }
  return _mm256_max_ps(_mm512_castps512_ps256(vmax),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(vmax), 1)));
}

// SoftmaxRow's second pass over s[0, n16) on 16 lanes: s = e^(s - mx), summed into the 8-lane
// `sum` low half first, then high half — the order of the 8-lane loop, so the row's sum (and
// output) is the AVX2 path's to the last bit.
INFERD_AVX512 __m256 ExpPass16(float* s, int64_t n16, float mx, __m256 sum) {
  const __m512 m = _mm512_set1_ps(mx);
  for (int64_t k = 0; k < n16; k += 16) {
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_loadu_ps(s + k), m));
    _mm512_storeu_ps(s + k, e);
    sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
    sum = _mm256_add_ps(sum, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  }
  return sum;
}
#pragma GCC diagnostic pop

INFERD_AVX2 inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

INFERD_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes k0 + i < n: all ones.
INFERD_AVX2 inline __m256 ValidLanes(int64_t k0, int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n - k0)), lane));
}

// Per-thread working set: packed K/V of the head, the scaled query tile, the score tile, the
// output accumulators and each row's running max and sum.
struct Scratch {
  std::vector<float> kt, vp, q, s, o, m, l;
};

// One row's online-softmax step over a key block: s[0..n) (a row with RoundUp(n, 8) readable
// floats) plus the mask row (mask_step 1; other strides were added by the caller) becomes
// e^(s - m') with m' the new running max; the running sum l and the row's accumulator o
// (dvp floats) are rescaled by e^(m - m'). A row that has seen only -inf keeps m = -inf, l = 0.
// Full vectors first, then one masked tail, so the loops carry no lane bookkeeping.
// With `wide` (a CPU with AVX-512) the full 16-lane stretch of both passes runs MaxPass16 /
// ExpPass16, with the same results.
INFERD_AVX2 void SoftmaxRow(float* s, int64_t n, const float* mask, float* m, float* l, float* o,
                            int64_t dvp, bool wide) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const int64_t full = n / 8 * 8, wide_end = wide ? n / 16 * 16 : 0;
  __m256 vmax = wide_end > 0 ? MaxPass16(s, wide_end, mask) : neg_inf;
  if (mask != nullptr) {
    for (int64_t k = wide_end; k < full; k += 8) {
      const __m256 x = _mm256_add_ps(_mm256_loadu_ps(s + k), _mm256_loadu_ps(mask + k));
      _mm256_storeu_ps(s + k, x);
      vmax = _mm256_max_ps(vmax, x);
    }
  } else {
    for (int64_t k = wide_end; k < full; k += 8) {
      vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + k));
    }
  }
  const __m256 tail = ValidLanes(full, n);
  if (full < n) {
    __m256 x = _mm256_loadu_ps(s + full);
    if (mask != nullptr) {
      x = _mm256_add_ps(x, _mm256_maskload_ps(mask + full, _mm256_castps_si256(tail)));
    }
    x = _mm256_blendv_ps(neg_inf, x, tail);
    _mm256_storeu_ps(s + full, x);
    vmax = _mm256_max_ps(vmax, x);
  }
  const float new_max = std::max(*m, HorizontalMax(vmax));
  if (new_max == -std::numeric_limits<float>::infinity()) {
    std::fill(s, s + n, 0.f);
    return;
  }
  const __m256 mx = _mm256_set1_ps(new_max);
  __m256 sum = _mm256_setzero_ps();
  if (wide_end > 0) sum = ExpPass16(s, wide_end, new_max, sum);
  for (int64_t k = wide_end; k < full; k += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(s + k), mx));
    _mm256_storeu_ps(s + k, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (full < n) {
    const __m256 e = _mm256_and_ps(Exp8(_mm256_sub_ps(_mm256_loadu_ps(s + full), mx)), tail);
    _mm256_storeu_ps(s + full, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (*m != -std::numeric_limits<float>::infinity() && new_max != *m) {
    const float alpha = std::exp(*m - new_max);
    const __m256 av = _mm256_set1_ps(alpha);
    for (int64_t c = 0; c < dvp; c += 8) {
      _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_loadu_ps(o + c), av));
    }
    *l *= alpha;
  }
  *m = new_max;
  *l += HorizontalSum(sum);
}

// Keys [c0, c0 + nk) for rows [r0, r0 + rows) of the tile in w (scaled queries in w.q, running
// state in w.o/m/l): scores, softmax, then O += P·V.
INFERD_AVX2 void KeyBlock(const Tiles& t, const DenseAttentionHead& h, int64_t r0, int64_t rows,
                          int64_t c0, int64_t nk, Scratch& w, Prefetcher& next) {
  const int64_t d = h.head_dim, nkp = RoundUp(nk, kDensePanel),
                dvp = RoundUp(h.value_dim, kDensePanel);
  const int64_t lds = ScoreStride(nk);
  float* s = w.s.data();
  PanelRows(t, w.q.data(), d, rows, d, w.kt.data() + c0 / kDensePanel * d * kDensePanel,
            d * kDensePanel, nkp / kDensePanel, s, lds, false, &next);
  for (int64_t i = 0; i < rows; ++i) {
    float* si = s + i * lds;
    const float* mask = nullptr;
    if (h.mask != nullptr) {
      mask = h.mask + (r0 + i) * h.mask_row_stride + c0 * h.mask_key_stride;
      if (h.mask_key_stride != 1) {
        for (int64_t k = 0; k < nk; ++k) si[k] += mask[k * h.mask_key_stride];
        mask = nullptr;
      }
    }
    SoftmaxRow(si, nk, mask, &w.m[i], &w.l[i], w.o.data() + i * dvp, dvp, t.avx512);
  }
  for (int64_t k0 = 0; k0 < nk; k0 += kDepthBlock) {
    PanelRows(t, s + k0, lds, rows, std::min(kDepthBlock, nk - k0),
              w.vp.data() + (c0 + k0) * kDensePanel, h.num_keys * kDensePanel,
              dvp / kDensePanel, w.o.data(), dvp, c0 > 0 || k0 > 0);
  }
}

// Rows [r0, r0 + rows) of the head (rows <= kTileRows).
INFERD_AVX2 void RowTile(const Tiles& t, const DenseAttentionHead& h, int64_t r0, int64_t rows,
                         Scratch& w, Prefetcher& next) {
  const int64_t d = h.head_dim, dv = h.value_dim, dvp = RoundUp(dv, kDensePanel);
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = h.q + (r0 + i) * h.q_row_stride;
    float* dst = w.q.data() + i * d;
    for (int64_t x = 0; x < d; ++x) dst[x] = src[x] * h.scale;
  }
  std::fill(w.m.begin(), w.m.begin() + rows, -std::numeric_limits<float>::infinity());
  std::fill(w.l.begin(), w.l.begin() + rows, 0.f);
  for (int64_t c0 = 0; c0 < h.num_keys; c0 += kKeyBlock) {
    KeyBlock(t, h, r0, rows, c0, std::min(kKeyBlock, h.num_keys - c0), w, next);
  }
  for (int64_t i = 0; i < rows; ++i) {
    float* dst = h.out + (r0 + i) * h.out_row_stride;
    const float* o = w.o.data() + i * dvp;
    const float inv = w.l[i] > 0.f ? 1.f / w.l[i] : 0.f;
    for (int64_t c = 0; c < dv; ++c) dst[c] = o[c] * inv;
  }
}

INFERD_AVX2 void VectorizedAttention(const Tiles& t, const DenseAttentionHead& h,
                                     const DenseAttentionHead* next) {
  thread_local Scratch w;
  const int64_t d = h.head_dim, nk = h.num_keys, dvp = RoundUp(h.value_dim, kDensePanel);
  const int64_t block = std::min(kKeyBlock, RoundUp(nk, kDensePanel));
  auto grow = [](std::vector<float>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(n);
  };
  grow(w.kt, RoundUp(nk, kDensePanel) * d);
  grow(w.vp, nk * dvp);
  grow(w.q, kTileRows * d);
  grow(w.s, kTileRows * ScoreStride(block));
  grow(w.o, kTileRows * dvp);
  grow(w.m, kTileRows);
  grow(w.l, kTileRows);
  PackKeys(h, w.kt.data());
  PackValues(h, w.vp.data());
  // The next head's lines spread over the register tiles of Q·Kᵀ (about one per register tile).
  Prefetcher prefetcher(next);
  prefetcher.Pace(
      ((h.num_rows + kTileRows - 1) / kTileRows + (h.num_rows + t.max_rows - 1) / t.max_rows) *
      (RoundUp(nk, kDensePanel) / kDensePanel));
  // Tiles of kTileRows (whole 6- or 12-row register tiles), the last one what remains.
  for (int64_t r0 = 0; r0 < h.num_rows; r0 += kTileRows) {
    RowTile(t, h, r0, std::min(kTileRows, h.num_rows - r0), w, prefetcher);
  }
}

DenseAttentionTiles BestTiles() {
  static const DenseAttentionTiles best =
      !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
          ? DenseAttentionTiles::kPortable
          : (__builtin_cpu_supports("avx512f") ? DenseAttentionTiles::kAvx512
                                               : DenseAttentionTiles::kAvx2);
  return best;
}

void Run(const DenseAttentionHead& h, const DenseAttentionHead* next, DenseAttentionTiles tiles) {
  switch (tiles) {
    case DenseAttentionTiles::kAvx512:
      VectorizedAttention(kAvx512Tiles, h, next);
      break;
    case DenseAttentionTiles::kAvx2:
      VectorizedAttention(kAvx2Tiles, h, next);
      break;
    default:
      PortableAttention(h);
      break;
  }
}
#else
DenseAttentionTiles BestTiles() { return DenseAttentionTiles::kPortable; }
void Run(const DenseAttentionHead& h, const DenseAttentionHead*, DenseAttentionTiles) {
  PortableAttention(h);
}
#endif

}  // namespace

DenseAttentionTiles DenseAttentionBestTiles() { return BestTiles(); }

bool DenseAttentionVectorized() { return BestTiles() != DenseAttentionTiles::kPortable; }

void DenseAttention(const DenseAttentionHead& head, const DenseAttentionHead* prefetch,
                    DenseAttentionTiles tiles) {
  if (head.num_rows <= 0) return;
  const FlushDenormalsScope no_denormals;  // util/denormals.h: 1.9x on Intel cores
  // A request above what this CPU has (or kBest) runs the best it has.
  const DenseAttentionTiles best = BestTiles();
  if (tiles == DenseAttentionTiles::kBest || static_cast<int>(tiles) > static_cast<int>(best)) {
    tiles = best;
  }
  Run(head, prefetch != nullptr && prefetch->num_rows > 0 ? prefetch : nullptr, tiles);
}

void MultiHeadAttention(const MultiHeadAttentionArgs& a) {
  const int64_t heads = a.batch * a.heads, hd = a.heads * a.head_dim, hdv = a.heads * a.value_dim;
  // Split a head's rows only when the heads alone cannot keep every thread busy (a short batch
  // on many threads): each part packs the head's K/V again.
  const int64_t threads = omp_get_max_threads();
  const int64_t max_parts = (a.q_seq + kDenseTileRows - 1) / kDenseTileRows;
  const int64_t parts = heads >= 2 * threads
                            ? 1
                            : std::clamp<int64_t>((2 * threads + heads - 1) / heads, 1, max_parts);
  const int64_t* ms = a.mask_strides;
  auto item_head = [&](int64_t item) {
    const int64_t bi = item / (a.heads * parts), hi = item / parts % a.heads, part = item % parts;
    const int64_t j0 = a.q_seq * part / parts, j1 = a.q_seq * (part + 1) / parts;
    DenseAttentionHead h;
    h.q = a.q + (bi * a.q_seq + j0) * hd + hi * a.head_dim;
    h.q_row_stride = hd;
    h.key = a.k + bi * a.kv_seq * hd + hi * a.head_dim;
    h.key_row_stride = hd;
    h.value = a.v + bi * a.kv_seq * hdv + hi * a.value_dim;
    h.value_row_stride = hdv;
    h.out = a.y + (bi * a.q_seq + j0) * hdv + hi * a.value_dim;
    h.out_row_stride = hdv;
    h.num_rows = j1 - j0;
    h.num_keys = a.kv_seq;
    h.head_dim = a.head_dim;
    h.value_dim = a.value_dim;
    h.scale = a.scale;
    if (a.mask != nullptr) {
      h.mask = a.mask + bi * ms[0] + hi * ms[1] + j0 * ms[2];
      h.mask_row_stride = ms[2];
      h.mask_key_stride = ms[3];
    }
    return h;
  };
  ParallelFor(heads * parts, 1, [&](int64_t begin, int64_t end) {
    DenseAttentionHead head = item_head(begin);
    for (int64_t item = begin; item < end; ++item) {
      if (item + 1 == end) {
        DenseAttention(head, nullptr, a.tiles);
        break;
      }
      const DenseAttentionHead next = item_head(item + 1);
      DenseAttention(head, &next, a.tiles);
      head = next;
    }
  });
}

}  // namespace inferd::cpu
