#include "kernels/cpu/attention/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/util/denormals.h"
#include "kernels/cpu/util/exp_poly.h"
#include "kernels/cpu/util/vec8.h"

// Without AVX (a build for baseline x86-64), GCC warns that 32-byte vector arguments change the
// ABI; every function passing them has internal linkage, so no ABI is shared with anyone.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace inferd::cpu {
namespace {

// Keys per chunk: the unit of the online softmax (one max/rescale per row per chunk) and the
// width of the score micro-kernel (4 vectors of 8).
constexpr int64_t kChunk = 32;
// Rows per sub-tile: kFlashTileRows (flash_attention.h); the scaled queries, scores and
// accumulators of a sub-tile (~48 · (head_dim + value_dim + 32) floats) stay in L1/L2 while K/V
// stream through.
// Up to this many rows, keys are scored in place (DotTile) rather than transposed (ScoreTile).
constexpr int64_t kDirectRows = 4;

// V8, Load, Store, Splat: util/vec8.h.
typedef int8_t V8b __attribute__((vector_size(8), aligned(1), may_alias));

inline int64_t RoundUp8(int64_t n) { return (n + 7) / 8 * 8; }

// s[r][0..32) = q[r] · kt[:, 0..32) for MR rows: q rows of length d (stride d), kt the chunk's
// keys transposed ([d][32]). Vectorized over keys, so no horizontal sums.
template <int MR>
inline void ScoreRows(const float* q, int64_t d, const float* kt, float* s) {
  V8 acc[MR][4] = {};
  for (int64_t x = 0; x < d; ++x) {
    const float* kr = kt + x * kChunk;
    const V8 k0 = Load(kr), k1 = Load(kr + 8), k2 = Load(kr + 16), k3 = Load(kr + 24);
    for (int r = 0; r < MR; ++r) {
      const V8 qb = Splat(q[r * d + x]);
      acc[r][0] += qb * k0;
      acc[r][1] += qb * k1;
      acc[r][2] += qb * k2;
      acc[r][3] += qb * k3;
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < 4; ++v) Store(s + r * kChunk + v * 8, acc[r][v]);
  }
}

void ScoreTile(const float* q, int64_t rows, int64_t d, const float* kt, float* s) {
  int64_t r = 0;
  for (; r + 3 <= rows; r += 3) ScoreRows<3>(q + r * d, d, kt, s + r * kChunk);
  if (rows - r == 2) ScoreRows<2>(q + r * d, d, kt, s + r * kChunk);
  if (rows - r == 1) ScoreRows<1>(q + r * d, d, kt, s + r * kChunk);
}

// o[r][c0..c0+8·NV) += Σ_k p[r][k] · v[k][c0..]: MR rows, NV vectors of columns, nk keys
// whose value rows are v[k] (padded to a multiple of 8 columns).
template <int MR, int NV>
inline void AccumulateRows(const float* p, int64_t nk, const float* const* v, int64_t c0, float* o,
                           int64_t ldo) {
  V8 acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NV; ++c) acc[r][c] = Load(o + r * ldo + c0 + c * 8);
  }
  for (int64_t k = 0; k < nk; ++k) {
    V8 vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = Load(v[k] + c0 + c * 8);
    for (int r = 0; r < MR; ++r) {
      const V8 pb = Splat(p[r * kChunk + k]);
      for (int c = 0; c < NV; ++c) acc[r][c] += pb * vv[c];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NV; ++c) Store(o + r * ldo + c0 + c * 8, acc[r][c]);
  }
}

template <int MR>
void AccumulateColumns(const float* p, int64_t nk, const float* const* v, int64_t dv8, float* o) {
  int64_t c = 0;
  for (; c + 32 <= dv8; c += 32) AccumulateRows<MR, 4>(p, nk, v, c, o, dv8);
  for (; c < dv8; c += 8) AccumulateRows<MR, 1>(p, nk, v, c, o, dv8);
}

// o[rows][dv8] += p[rows][nk] · V[nk][dv8].
void AccumulateTile(const float* p, int64_t rows, int64_t nk, const float* const* v, int64_t dv8,
                    float* o) {
  int64_t r = 0;
  for (; r + 3 <= rows; r += 3) AccumulateColumns<3>(p + r * kChunk, nk, v, dv8, o + r * dv8);
  if (rows - r == 2) AccumulateColumns<2>(p + r * kChunk, nk, v, dv8, o + r * dv8);
  if (rows - r == 1) AccumulateColumns<1>(p + r * kChunk, nk, v, dv8, o + r * dv8);
}

inline float Hsum(V8 v) {
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
  v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
  return v[0];
}

// s[r][k0..k0+NK) = q[r] · key[k] for MR rows read straight from the key rows (no copy): the
// few-rows case (decode), where transposing the chunk would cost as much as scoring it. NK keys
// at a time keep NK·MR independent FMA chains in flight. d is a multiple of 8.
template <int MR, int NK>
inline void DotRows(const float* q, int64_t d, const float* const* key, float* s) {
  V8 acc[MR][NK] = {};
  for (int64_t x = 0; x < d; x += 8) {
    V8 kv[NK];
    for (int k = 0; k < NK; ++k) kv[k] = Load(key[k] + x);
    for (int r = 0; r < MR; ++r) {
      const V8 qv = Load(q + r * d + x);
      for (int k = 0; k < NK; ++k) acc[r][k] += qv * kv[k];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int k = 0; k < NK; ++k) s[r * kChunk + k] = Hsum(acc[r][k]);
  }
}

template <int MR>
void DotKeys(const float* q, int64_t d, const float* const* key, int64_t nk, float* s) {
  constexpr int kKeys = MR <= 2 ? 4 : 2;
  int64_t k = 0;
  for (; k + kKeys <= nk; k += kKeys) DotRows<MR, kKeys>(q, d, key + k, s + k);
  for (; k < nk; ++k) DotRows<MR, 1>(q, d, key + k, s + k);
}

// Scores of up to kDirectRows rows against nk keys read in place.
void DotTile(const float* q, int64_t rows, int64_t d, const float* const* key, int64_t nk,
             float* s) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) DotKeys<4>(q + r * d, d, key, nk, s + r * kChunk);
  if (rows - r == 3) DotKeys<3>(q + r * d, d, key, nk, s + r * kChunk);
  if (rows - r == 2) DotKeys<2>(q + r * d, d, key, nk, s + r * kChunk);
  if (rows - r == 1) DotKeys<1>(q + r * d, d, key, nk, s + r * kChunk);
}

// Per-thread working set of one sub-tile.
struct FlashScratch {
  std::vector<float> buf;
  float *q, *kt, *vc, *s, *o, *m, *l;
  const float* key_rows[kChunk];
  const float* value_rows[kChunk];
  std::vector<float> kd;  // an INT8 key chunk dequantized, [32][d] (KvRows::qdata)

  void Reserve(int64_t rows, int64_t d, int64_t dv8) {
    const int64_t n = rows * d + d * kChunk + kChunk * dv8 + rows * kChunk + rows * dv8 + 2 * rows;
    if (buf.size() < static_cast<size_t>(n)) buf.resize(n);
    q = buf.data();
    kt = q + rows * d;
    vc = kt + d * kChunk;
    s = vc + kChunk * dv8;
    o = s + rows * kChunk;
    m = o + rows * dv8;
    l = m + rows;
  }
};

// out[j·32 + i] = rows[i][x + j] for i, j < 8: the unpack / shuffle / lane-permute 8x8 transpose.
inline void Transpose8x8(const float* const* rows, int64_t x, float* out) {
  V8 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = Load(rows[i] + x);
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shufflevector(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 1] = __builtin_shufflevector(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[i + 2] = __builtin_shufflevector(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 3] = __builtin_shufflevector(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int j = 0; j < 4; ++j) {
    Store(out + j * kChunk, __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11));
    Store(out + (j + 4) * kChunk,
          __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15));
  }
}

// rows[k] = r.Row(c0 + k) for k < n, walking the blocks instead of dividing per key.
void RowPointers(const KvRows& r, int64_t c0, int64_t n, const float** rows) {
  if (r.block_table == nullptr) {
    for (int64_t k = 0; k < n; ++k) rows[k] = r.data + (c0 + k) * r.row_stride;
    return;
  }
  int64_t block = c0 / r.block_size, offset = c0 % r.block_size;
  for (int64_t k = 0; k < n;) {
    const float* base = r.data + r.block_table[block] * r.block_stride;
    for (; offset < r.block_size && k < n; ++offset, ++k) rows[k] = base + offset * r.row_stride;
    ++block;
    offset = 0;
  }
}

// INT8 rows [c0, c0+n) of r dequantized into dst (row k at dst + k·ld, columns dim..ld zero),
// rows[k] pointing at them: the paged INT8 cache's read. 8 codes at a time when dim allows.
void DequantizeRows(const KvRows& r, int64_t c0, int64_t n, int64_t dim, int64_t ld, float* dst,
                    const float** rows) {
  const int64_t dim8 = dim / 8 * 8;
  for (int64_t k = 0; k < n; ++k) {
    const int8_t* src = r.qdata + r.Offset(c0 + k);
    const float scale = r.scales[r.ScaleIndex(c0 + k)];
    float* out = dst + k * ld;
    for (int64_t x = 0; x < dim8; x += 8) {
      Store(out + x, __builtin_convertvector(*reinterpret_cast<const V8b*>(src + x), V8) * scale);
    }
    for (int64_t x = dim8; x < dim; ++x) out[x] = static_cast<float>(src[x]) * scale;
    std::fill(out + dim, out + ld, 0.f);
    rows[k] = out;
  }
}

// Finds the K/V rows of keys [c0, c0+nk). Unless `direct`, copies the keys transposed into kt
// ([d][32], zero past nk). Value rows are used in place when value_dim is a multiple of 8, else
// copied into vc with zero-padded columns.
void GatherChunk(const AttentionTile& t, int64_t c0, int64_t nk, int64_t dv8, bool direct,
                 FlashScratch& w) {
  const int64_t d = t.head_dim, dv = t.value_dim;
  if (t.key.qdata != nullptr) {
    if (w.kd.size() < static_cast<size_t>(kChunk * d)) w.kd.resize(kChunk * d);
    DequantizeRows(t.key, c0, nk, d, d, w.kd.data(), w.key_rows);
  } else {
    RowPointers(t.key, c0, nk, w.key_rows);
  }
  if (t.value.qdata != nullptr) {
    DequantizeRows(t.value, c0, nk, dv, dv8, w.vc, w.value_rows);  // padded: no copy below
  } else {
    RowPointers(t.value, c0, nk, w.value_rows);
  }
  if (!direct) {
    if (nk < kChunk) {
      for (int64_t x = 0; x < d; ++x) {
        std::fill(w.kt + x * kChunk + nk, w.kt + (x + 1) * kChunk, 0.f);
      }
    }
    const int64_t k8 = d % 8 == 0 ? nk / 8 * 8 : 0;
    for (int64_t k = 0; k < k8; k += 8) {
      for (int64_t x = 0; x < d; x += 8) Transpose8x8(w.key_rows + k, x, w.kt + x * kChunk + k);
    }
    for (int64_t k = k8; k < nk; ++k) {
      for (int64_t x = 0; x < d; ++x) w.kt[x * kChunk + k] = w.key_rows[k][x];
    }
  }
  if (dv != dv8 && t.value.qdata == nullptr) {
    for (int64_t k = 0; k < nk; ++k) {
      float* vd = w.vc + k * dv8;
      std::memcpy(vd, w.value_rows[k], dv * sizeof(float));
      std::fill(vd + dv, vd + dv8, 0.f);
      w.value_rows[k] = vd;
    }
  }
}

// e^x for x <= 0 on 8 lanes: ExpNonPositive with round-to-nearest range reduction (the same
// r ∈ [-ln2/2, ln2/2] for the polynomial).
inline V8 ExpV8(V8 x) {
  using namespace exp_poly;
  x = x < Splat(kMinArg) ? Splat(kMinArg) : x;
  const V8 fx = (x * kLog2e + 12582912.f) - 12582912.f;  // rint, |x·log2e| < 2^22
  const V8 r = x - fx * kLn2Hi + fx * kLn2Lo;
  V8 p = Splat(kP[0]);
  for (int i = 1; i < 6; ++i) p = p * r + kP[i];
  p = p * r * r + r + 1.f;
  const V8i bits = (__builtin_convertvector(fx, V8i) + 127) << 23;
  V8 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

inline V8 Max(V8 a, V8 b) { return a > b ? a : b; }

inline float Hmax(V8 v) {
  v = Max(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));
  v = Max(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5));
  return std::max(v[0], v[1]);
}

// Online-softmax update of one row for a chunk whose first n keys it sees: turns its 32 scores
// into probabilities (zero past n), updates the running max m and sum l, rescales the
// accumulator o. All on 4 vectors.
void SoftmaxRow(float* s, int64_t n, const float* mask, int64_t mask_step, float* m, float* l,
                float* o, int64_t dv8) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (mask != nullptr) {
    if (mask_step == 1) {
#pragma omp simd
      for (int64_t k = 0; k < n; ++k) s[k] += mask[k];
    } else {
      for (int64_t k = 0; k < n; ++k) s[k] += mask[k * mask_step];
    }
  }
  const V8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
  V8 v[4];
  V8i valid[4];
  V8 vmax = Splat(*m);
  for (int c = 0; c < 4; ++c) {
    valid[c] = lane + 8 * c < static_cast<int32_t>(n);
    v[c] = valid[c] ? Load(s + 8 * c) : Splat(kNegInf);
    vmax = Max(vmax, v[c]);
  }
  const float mx = Hmax(vmax);
  if (mx == kNegInf) {  // nothing seen yet (or all masked out): no weight
    for (int c = 0; c < 4; ++c) Store(s + 8 * c, V8{});
    return;
  }
  V8 sum = {};
  for (int c = 0; c < 4; ++c) {
    const V8 e = valid[c] ? ExpV8(v[c] - mx) : V8{};
    Store(s + 8 * c, e);
    sum += e;
  }
  if (mx != *m) {
    const float alpha = *m == kNegInf ? 0.f : std::exp(*m - mx);
    for (int64_t c = 0; c < dv8; c += 8) Store(o + c, Load(o + c) * alpha);
    *l *= alpha;
    *m = mx;
  }
  *l += Hsum(sum);
}

// Rows [j0, j1) of every head of the tile.
void SubTile(const AttentionTile& t, int64_t j0, int64_t j1, FlashScratch& w) {
  const int64_t d = t.head_dim, dv8 = RoundUp8(t.value_dim), nr = j1 - j0;
  const int64_t rows = t.num_heads * nr;
  w.Reserve(rows, d, dv8);
  auto limit = [&](int64_t j) {
    return t.causal_offset < 0 ? t.num_keys : std::min(t.num_keys, t.causal_offset + j + 1);
  };
  for (int64_t h = 0; h < t.num_heads; ++h) {
    for (int64_t j = j0; j < j1; ++j) {
      const float* src = t.q + h * t.q_head_stride + j * t.q_row_stride;
      float* dst = w.q + (h * nr + j - j0) * d;
      for (int64_t x = 0; x < d; ++x) dst[x] = src[x] * t.scale;
    }
  }
  std::fill(w.o, w.o + rows * dv8, 0.f);
  std::fill(w.m, w.m + rows, -std::numeric_limits<float>::infinity());
  std::fill(w.l, w.l + rows, 0.f);
  const int64_t key_end = limit(j1 - 1);
  const bool direct = rows <= kDirectRows && d % 8 == 0;
  for (int64_t c0 = 0; c0 < key_end; c0 += kChunk) {
    const int64_t nk = std::min(kChunk, key_end - c0);
    GatherChunk(t, c0, nk, dv8, direct, w);
    if (direct) {
      DotTile(w.q, rows, d, w.key_rows, nk, w.s);
    } else {
      ScoreTile(w.q, rows, d, w.kt, w.s);
    }
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t h = i / nr, j = j0 + i % nr;
      const int64_t n = std::clamp<int64_t>(limit(j) - c0, 0, nk);
      const float* mask = t.mask == nullptr ? nullptr
                                            : t.mask + h * t.mask_head_stride +
                                                  j * t.mask_row_stride + c0 * t.mask_key_stride;
      SoftmaxRow(w.s + i * kChunk, n, mask, t.mask_key_stride, w.m + i, w.l + i, w.o + i * dv8,
                 dv8);
    }
    AccumulateTile(w.s, rows, nk, w.value_rows, dv8, w.o);
  }
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t h = i / nr, j = j0 + i % nr;
    float* dst = t.out + h * t.out_head_stride + j * t.out_row_stride;
    const float inv = w.l[i] > 0.f ? 1.f / w.l[i] : 0.f;
    for (int64_t c = 0; c < t.value_dim; ++c) dst[c] = w.o[i * dv8 + c] * inv;
  }
}

}  // namespace

void FlashAttention(const AttentionTile& tile) {
  if (tile.num_rows <= 0 || tile.num_heads <= 0) return;
  const FlushDenormalsScope no_denormals;  // util/denormals.h: Intel's denormal assists
  thread_local FlashScratch scratch;
  const int64_t step = std::max<int64_t>(1, kFlashTileRows / tile.num_heads);
  for (int64_t j0 = 0; j0 < tile.num_rows; j0 += step) {
    SubTile(tile, j0, std::min(tile.num_rows, j0 + step), scratch);
  }
}

void ReferenceAttention(const AttentionTile& t) {
  std::vector<double> s;
  for (int64_t h = 0; h < t.num_heads; ++h) {
    for (int64_t j = 0; j < t.num_rows; ++j) {
      const int64_t n =
          t.causal_offset < 0 ? t.num_keys : std::min(t.num_keys, t.causal_offset + j + 1);
      const float* q = t.q + h * t.q_head_stride + j * t.q_row_stride;
      float* out = t.out + h * t.out_head_stride + j * t.out_row_stride;
      s.assign(n, 0.0);
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) {
        double dot = 0;
        for (int64_t x = 0; x < t.head_dim; ++x) dot += double{q[x]} * t.key.At(k, x);
        s[k] = dot * t.scale;
        if (t.mask != nullptr) {
          s[k] += t.mask[h * t.mask_head_stride + j * t.mask_row_stride + k * t.mask_key_stride];
        }
        mx = std::max(mx, s[k]);
      }
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += s[k] = std::isinf(mx) ? 0.0 : std::exp(s[k] - mx);
      for (int64_t c = 0; c < t.value_dim; ++c) {
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) acc += s[k] * t.value.At(k, c);
        out[c] = static_cast<float>(sum > 0 ? acc / sum : 0.0);
      }
    }
  }
}

}  // namespace inferd::cpu
