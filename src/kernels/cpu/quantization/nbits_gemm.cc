#include "kernels/cpu/quantization/nbits_gemm.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <memory>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/mutex.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/panel_gemm.h"

namespace inferd::cpu {
namespace {

constexpr int64_t kSub = kNBitsSubBlock;

// The zero point of row r, group g (the symmetric default when there are none).
inline int ZeroPoint(const NBitsWeights& w, int64_t r, int64_t g) {
  if (w.zero_points == nullptr) return w.bits == 4 ? 8 : 0;
  const uint8_t z = w.zero_points[r * NBitsGroups(w.k, w.group) + g];
  return w.bits == 4 ? static_cast<int>(z) : static_cast<int>(static_cast<int8_t>(z));
}

// The code of value j (0..31) of sub-block `sb` (4 bits: 0..15; 8 bits: the signed byte).
inline int Code(const uint8_t* sb, int bits, int64_t j) {
  if (bits == 8) return static_cast<int8_t>(sb[j]);
  return j < 16 ? (sb[j] & 15) : (sb[j - 16] >> 4);
}

inline void SetCode(uint8_t* sb, int bits, int64_t j, int code) {
  if (bits == 8) {
    sb[j] = static_cast<uint8_t>(static_cast<int8_t>(code - 128));
  } else if (j < 16) {
    sb[j] = static_cast<uint8_t>((sb[j] & 0xF0) | code);
  } else {
    sb[j - 16] = static_cast<uint8_t>((sb[j - 16] & 0x0F) | (code << 4));
  }
}

// One row of A quantized per 32 values: q (padded with zeros to whole sub-blocks), the scale d of
// each sub-block, and per weight group the sum over its sub-blocks of d * sum(q) (what a zero
// point multiplies).
using QuantizedRow = NBitsQuantizedRow;

// Levels ±L: 127 against 4-bit weights; 63 against 8-bit ones, whose codes the vector kernel
// multiplies as unsigned bytes 0..255 (255 x 63 x 2 fits maddubs' int16 sums).
int ActivationLevels(int bits) { return bits == 4 ? 127 : 63; }

void QuantizeActivations(const float* a, int64_t k, int64_t group, int levels, int8_t* q, float* d,
                         float* gsum) {
  const int64_t subs = (k + kSub - 1) / kSub, per_group = group / kSub;
  for (int64_t g = 0; g < NBitsGroups(k, group); ++g) gsum[g] = 0.f;
  for (int64_t b = 0; b < subs; ++b) {
    const int64_t lo = b * kSub, len = std::min(kSub, k - lo);
    float amax = 0.f;
    bool finite = true;
    for (int64_t i = 0; i < len; ++i) {
      amax = std::max(amax, std::fabs(a[lo + i]));
      finite = finite && std::isfinite(a[lo + i]);
    }
    // A NaN or infinity makes the scale NaN, so the outputs it reaches are NaN, as in float.
    const float lv = static_cast<float>(levels);
    const float s = finite ? amax / lv : std::numeric_limits<float>::quiet_NaN();
    const float inv = finite && amax > 0.f ? lv / amax : 0.f;
    int sum = 0;
    for (int64_t i = 0; i < kSub; ++i) {
      int v = 0;
      if (i < len && finite) v = static_cast<int>(std::nearbyint(a[lo + i] * inv));
      v = std::clamp(v, -levels, levels);
      q[lo + i] = static_cast<int8_t>(v);
      sum += v;
    }
    d[b] = s;
    gsum[b / per_group] += s * static_cast<float>(sum);
  }
}

// Per row: sum over groups of scale * (sum over sub-blocks of d * integer dot) minus
// scale * zero point * gsum. The same order in the vector code.
float DotScalar(const QuantizedRow& a, const NBitsWeights& w, int64_t r) {
  const int64_t subs = (w.k + kSub - 1) / kSub, groups = NBitsGroups(w.k, w.group);
  const int64_t sub_bytes = kSub * w.bits / 8, per_group = w.group / kSub;
  const uint8_t* row = w.data + r * NBitsRowBytes(w.bits, w.k);
  float acc = 0.f, corr = 0.f;
  for (int64_t g = 0; g < groups; ++g) {
    float accg = 0.f;
    for (int64_t b = g * per_group; b < std::min(subs, (g + 1) * per_group); ++b) {
      const uint8_t* sb = row + b * sub_bytes;
      // Unsigned codes (8 bits: code + 128, the offset taken out after): GCC 12 at -O3 with
      // -march on an AVX-512 VNNI CPU (Xeon family 6 model 207) vectorizes a signed x signed
      // byte dot product into vpdpbusd, which multiplies unsigned x signed: wrong sums for
      // negative 8-bit codes. Unsigned x signed is the product it compiles correctly.
      const int offset = w.bits == 8 ? 128 : 0;
      int32_t isum = 0, qsum = 0;
      for (int64_t j = 0; j < kSub; ++j) {
        isum += (Code(sb, w.bits, j) + offset) * a.q[b * kSub + j];
        qsum += a.q[b * kSub + j];
      }
      isum -= offset * qsum;
      accg += a.d[b] * static_cast<float>(isum);
    }
    const float ws = w.scales[r * groups + g];
    acc += ws * accg;
    corr += ws * static_cast<float>(ZeroPoint(w, r, g)) * a.gsum[g];
  }
  return acc - corr;
}

#if defined(__x86_64__)
#define INFERD_NBITS_AVX2 1

// The unsigned zero point the decode kernel takes out of a symmetric group: 8 for 4-bit codes,
// 128 for 8-bit ones (stored sign-flipped, code + 128).
constexpr float SymmetricZeroPoint(int bits) { return bits == 4 ? 8.f : 128.f; }

// The int32 at p (4 activations), in all 8 lanes.
__attribute__((target("avx2,fma"))) inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Integer dot products of sub-block b of one tile's 8 rows with MR rows of A: s[i] lane r =
// sum over the 32 values of code(row r) * q(row i of A). 4 bits: vector v holds each row's bytes
// [4v, 4v + 4), whose low nibbles are values 4v.. 4v + 3 and high nibbles 16 + 4v.. 16 + 4v + 3;
// both meet 4 broadcast activations in a maddubs; the 8 maddubs of a sub-block add up in int16
// (8 x 2 x 15 x 127 = 30480 fits) before one madd. 8 bits: unsigned codes (255) x 7-bit
// activations (63): one maddubs (2 x 255 x 63 fits int16) and one madd per vector.
template <int Bits, int MR>
__attribute__((target("avx2,fma"))) inline void SubBlockDots(const uint8_t* codes,
                                                             const int8_t* const* aq,
                                                             __m256i* s) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (Bits == 4) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i s16[MR];
    for (int i = 0; i < MR; ++i) s16[i] = _mm256_setzero_si256();
    for (int v = 0; v < 4; ++v) {
      const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + v * 32));
      const __m256i lo = _mm256_and_si256(raw, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      for (int i = 0; i < MR; ++i) {
        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, Broadcast4(aq[i] + 4 * v)),
                                           _mm256_maddubs_epi16(hi, Broadcast4(aq[i] + 16 + 4 * v)));
        s16[i] = _mm256_add_epi16(s16[i], p);
      }
    }
    for (int i = 0; i < MR; ++i) s[i] = _mm256_madd_epi16(s16[i], ones);
  } else {
    for (int i = 0; i < MR; ++i) s[i] = _mm256_setzero_si256();
    for (int v = 0; v < 8; ++v) {
      const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + v * 32));
      for (int i = 0; i < MR; ++i) {
        const __m256i p = _mm256_maddubs_epi16(raw, Broadcast4(aq[i] + 4 * v));
        s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(p, ones));
      }
    }
  }
}

// Tile t of the repacked weights against MR rows of A: out[i][0, 8) = A_i · W[8t .. 8t + 8).
// Per sub-block: acc += float(integer dot) x weight scale x activation scale (per lane: per
// row); per group: corr += offset x gsum (offset: scale x zero point; symmetric: scale, times
// the constant zero point at the end). The same operations for each row of A, whatever MR.
template <int Bits, bool Zp, int MR>
__attribute__((target("avx2,fma"))) void DecodeTile(const NBitsDecodeWeights& w, int64_t t,
                                                    const QuantizedRow* a, float (*out)[8]) {
  constexpr int64_t kVecs = Bits == 4 ? 4 : 8, kSubBytes = kVecs * 32;
  const int64_t subs = w.subs(), groups = w.groups(), per_group = w.group() / kSub;
  const uint8_t* codes = w.codes(t);
  const float* scales = w.scales(t);
  const float* offsets = Zp ? w.offsets(t) : nullptr;
  __m256 acc[MR], corr[MR];
  const int8_t* aq[MR];
  for (int i = 0; i < MR; ++i) {
    acc[i] = _mm256_setzero_ps();
    corr[i] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    const __m256 ws = _mm256_load_ps(scales + g * 8);
    const __m256 zo = Zp ? _mm256_load_ps(offsets + g * 8) : ws;
    for (int i = 0; i < MR; ++i) corr[i] = _mm256_fmadd_ps(zo, _mm256_set1_ps(a[i].gsum[g]), corr[i]);
    const int64_t b_end = std::min(subs, (g + 1) * per_group);
    for (int64_t b = g * per_group; b < b_end; ++b) {
      // The stream's lines 1 KB ahead (the next tile's past a tile's end; a prefetch does not
      // fault): on 2 MB pages 15-20% less CPU time per llama-110m step than the hardware
      // prefetchers alone (inferd_nbits_bench, Zen 3; 2 KB ahead alike, no prefetch on 4 KB pages
      // alike too).
      for (int64_t line = 0; line < kSubBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(codes + b * kSubBytes + line + 1024),
                     _MM_HINT_T0);
      }
      for (int i = 0; i < MR; ++i) aq[i] = a[i].q + b * kSub;
      __m256i s[MR];
      SubBlockDots<Bits, MR>(codes + b * kSubBytes, aq, s);
      for (int i = 0; i < MR; ++i) {
        const __m256 scale = _mm256_mul_ps(ws, _mm256_set1_ps(a[i].d[b]));
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[i]), scale, acc[i]);
      }
    }
  }
  const __m256 zp = _mm256_set1_ps(SymmetricZeroPoint(Bits));
  for (int i = 0; i < MR; ++i) {
    const __m256 y = Zp ? _mm256_sub_ps(acc[i], corr[i]) : _mm256_fnmadd_ps(zp, corr[i], acc[i]);
    _mm256_storeu_ps(out[i], y);
  }
}

template <int Bits, bool Zp>
void DecodeTileAnyM(const NBitsDecodeWeights& w, int64_t t, const QuantizedRow* a, int mr,
                    float (*out)[8]) {
  switch (mr) {
    case 1: return DecodeTile<Bits, Zp, 1>(w, t, a, out);
    case 2: return DecodeTile<Bits, Zp, 2>(w, t, a, out);
    case 3: return DecodeTile<Bits, Zp, 3>(w, t, a, out);
    default: return DecodeTile<Bits, Zp, 4>(w, t, a, out);
  }
}

// Tiles [t0, t1) against all m rows of A, 4 rows of A at a time (a tile's codes stay in L1 for
// the next 4), the results written to y (row i at y + i * ldy, weight row r at column r).
template <int Bits, bool Zp>
void DecodeTiles(const NBitsDecodeWeights& w, int64_t t0, int64_t t1, const QuantizedRow* a,
                 int64_t m, float* y, int64_t ldy) {
  constexpr int kMaxMR = 4;
  alignas(32) float out[kMaxMR][8];
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t r0 = t * NBitsDecodeWeights::kTile;
    const int64_t cols = std::min<int64_t>(NBitsDecodeWeights::kTile, w.n() - r0);
    for (int64_t i0 = 0; i0 < m; i0 += kMaxMR) {
      const int mr = static_cast<int>(std::min<int64_t>(kMaxMR, m - i0));
      DecodeTileAnyM<Bits, Zp>(w, t, a + i0, mr, out);
      for (int i = 0; i < mr; ++i) {
        std::memcpy(y + (i0 + i) * ldy + r0, out[i], cols * sizeof(float));
      }
    }
  }
}

bool NbitsCpuHasAvx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

void DecodeTilesAvx2(const NBitsDecodeWeights& w, int64_t t0, int64_t t1, const QuantizedRow* a,
                     int64_t m, float* y, int64_t ldy) {
  const bool zp = w.asymmetric();
  if (w.bits() == 4) {
    return zp ? DecodeTiles<4, true>(w, t0, t1, a, m, y, ldy)
              : DecodeTiles<4, false>(w, t0, t1, a, m, y, ldy);
  }
  return zp ? DecodeTiles<8, true>(w, t0, t1, a, m, y, ldy)
            : DecodeTiles<8, false>(w, t0, t1, a, m, y, ldy);
}
#endif

#if defined(INFERD_NBITS_AVX2)
// QuantizeActivations' whole sub-blocks in AVX2, bit for bit the same (the product a x inv
// rounded to nearest even by cvtps as nearbyint does, the same clamp, scale and sums); a partial
// last sub-block goes to the scalar code.
__attribute__((target("avx2,fma"))) void QuantizeActivationsAvx2(const float* a, int64_t k,
                                                                   int64_t group, int levels,
                                                                   int8_t* q, float* d,
                                                                   float* gsum) {
  const int64_t whole = k / kSub, per_group = group / kSub;
  if (whole * kSub < k) {  // the scalar code fills every group sum and the last sub-block
    QuantizeActivations(a + whole * kSub, k - whole * kSub, kSub, levels, q + whole * kSub,
                        d + whole, gsum + NBitsGroups(k, group) - 1);
  }
  const float tail_gsum = whole * kSub < k ? gsum[NBitsGroups(k, group) - 1] : 0.f;
  for (int64_t g = 0; g < NBitsGroups(k, group); ++g) gsum[g] = 0.f;
  const __m256 sign = _mm256_set1_ps(-0.f), zero = _mm256_setzero_ps();
  const __m256i hi = _mm256_set1_epi32(levels), lo = _mm256_set1_epi32(-levels);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const float lv = static_cast<float>(levels);
  for (int64_t b = 0; b < whole; ++b) {
    __m256 x[4], amax = zero, bad = zero;
    for (int j = 0; j < 4; ++j) {
      x[j] = _mm256_loadu_ps(a + b * kSub + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, x[j]));
      // x - x is 0 for finite x, NaN for NaN and infinities.
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_sub_ps(x[j], x[j]), zero, _CMP_NEQ_UQ));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float mx = _mm_cvtss_f32(m4);
    const bool finite = _mm256_movemask_ps(bad) == 0;
    const float s = finite ? mx / lv : std::numeric_limits<float>::quiet_NaN();
    const __m256 inv = _mm256_set1_ps(finite && mx > 0.f ? lv / mx : 0.f);
    __m256i v[4], sum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {  // a non-finite sub-block: codes 0, as in the scalar code
      v[j] = _mm256_cvtps_epi32(_mm256_mul_ps(x[j], inv));
      v[j] = finite ? _mm256_max_epi32(_mm256_min_epi32(v[j], hi), lo) : _mm256_setzero_si256();
      sum = _mm256_add_epi32(sum, v[j]);
    }
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]),
                                         _mm256_packs_epi32(v[2], v[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kSub),
                        _mm256_permutevar8x32_epi32(p, order));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    d[b] = s;
    gsum[b / per_group] += s * static_cast<float>(_mm_cvtsi128_si32(s4));
  }
  if (whole * kSub < k) gsum[NBitsGroups(k, group) - 1] += tail_gsum;
}

#endif

// A's rows quantized (on the calling thread) into buffers that live until the next call.
std::vector<QuantizedRow> QuantizeRows(const float* a, int64_t m, int64_t k, int64_t group,
                                       int bits, bool vector) {
  const int64_t subs = (k + kSub - 1) / kSub, groups = NBitsGroups(k, group);
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  q.resize(m * subs * kSub);
  d.resize(m * (subs + groups));
  std::vector<QuantizedRow> rows(m);
  for (int64_t i = 0; i < m; ++i) {
    int8_t* qi = q.data() + i * subs * kSub;
    float* di = d.data() + i * (subs + groups);
#if defined(INFERD_NBITS_AVX2)
    if (vector) {
      QuantizeActivationsAvx2(a + i * k, k, group, ActivationLevels(bits), qi, di, di + subs);
      rows[i] = {qi, di, di + subs};
      continue;
    }
#endif
    (void)vector;
    QuantizeActivations(a + i * k, k, group, ActivationLevels(bits), qi, di, di + subs);
    rows[i] = {qi, di, di + subs};
  }
  return rows;
}

// The plain C++ integer path on the file layout: the threads take groups of 4 weight rows, each
// against every row of A.
void SmallMScalar(const float* a, int64_t m, const NBitsWeights& w, float* y) {
  const std::vector<QuantizedRow> rows = QuantizeRows(a, m, w.k, w.group, w.bits, false);
  constexpr int64_t kRows = 4;
  const int64_t tasks = (w.n + kRows - 1) / kRows;
  const int64_t min_tasks = std::max<int64_t>(1, (int64_t{1} << 16) / (kRows * w.k * m));
  ParallelFor(tasks, min_tasks, [&](int64_t t0, int64_t t1) {
    for (int64_t r = t0 * kRows; r < std::min(w.n, t1 * kRows); ++r) {
      for (int64_t i = 0; i < m; ++i) y[i * w.n + r] = DotScalar(rows[i], w, r);
    }
  });
}

#if defined(INFERD_NBITS_AVX2)
// The vector integer path on the repacked weights: the threads take runs of whole tiles (8
// rows), each tile against every row of A.
void SmallMAvx2(const float* a, int64_t m, const NBitsDecodeWeights& w, float* y) {
  const std::vector<QuantizedRow> rows = QuantizeRows(a, m, w.k(), w.group(), w.bits(), true);
  // At least ~64K multiply-adds per thread chunk, so small products stay on the calling thread.
  const int64_t min_tiles =
      std::max<int64_t>(1, (int64_t{1} << 16) / (NBitsDecodeWeights::kTile * w.k() * m));
  ParallelFor(w.tiles(), min_tiles, [&](int64_t t0, int64_t t1) {
    DecodeTilesAvx2(w, t0, t1, rows.data(), m, y, w.n());
  });
}
#endif

// DecodeTile's arithmetic in plain C++ on the repacked layout: the same exact integer sums and
// the same fused multiply-adds in the same order, so the same bits.
void DecodeTileScalar(const NBitsDecodeWeights& w, int64_t t, const QuantizedRow& a, float* out) {
  const int bits = w.bits();
  const int64_t vecs = bits == 4 ? 4 : 8, sub_bytes = vecs * 32;
  const int64_t subs = w.subs(), groups = w.groups(), per_group = w.group() / kSub;
  const uint8_t* codes = w.codes(t);
  const float* scales = w.scales(t);
  const float zp = bits == 4 ? 8.f : 128.f;
  for (int64_t lane = 0; lane < NBitsDecodeWeights::kTile; ++lane) {
    float acc = 0.f, corr = 0.f;
    for (int64_t g = 0; g < groups; ++g) {
      const float ws = scales[g * 8 + lane];
      const float zo = w.asymmetric() ? w.offsets(t)[g * 8 + lane] : ws;
      corr = std::fma(zo, a.gsum[g], corr);
      for (int64_t b = g * per_group; b < std::min(subs, (g + 1) * per_group); ++b) {
        const uint8_t* sb = codes + b * sub_bytes + lane * 4;
        int32_t isum = 0;
        for (int64_t j = 0; j < kSub; ++j) {
          int code;  // unsigned: 4 bits 0..15, 8 bits the sign-flipped byte 0..255
          if (bits == 8) {
            code = sb[(j / 4) * 32 + j % 4];
          } else {
            const uint8_t byte = sb[((j % 16) / 4) * 32 + j % 4];
            code = j < 16 ? (byte & 15) : (byte >> 4);
          }
          isum += code * a.q[b * kSub + j];
        }
        acc = std::fma(static_cast<float>(isum), ws * a.d[b], acc);
      }
    }
    out[lane] = w.asymmetric() ? acc - corr : std::fma(-zp, corr, acc);
  }
}

// Row r dequantized into out[0], out[stride], ... (k values).
void DequantizeStrided(const NBitsWeights& w, int64_t r, float* out, int64_t stride) {
  const int64_t groups = NBitsGroups(w.k, w.group), sub_bytes = kSub * w.bits / 8;
  const uint8_t* row = w.data + r * NBitsRowBytes(w.bits, w.k);
  for (int64_t g = 0; g < groups; ++g) {
    const float s = w.scales[r * groups + g];
    const int zp = ZeroPoint(w, r, g);
    const int64_t hi = std::min(w.k, (g + 1) * w.group);
    for (int64_t i = g * w.group; i < hi; ++i) {
      const int code = Code(row + (i / kSub) * sub_bytes, w.bits, i % kSub);
      out[i * stride] = static_cast<float>(code - zp) * s;
    }
  }
}

// The batched path: 16 weight rows at a time dequantized into a [k, 16] panel (per thread,
// reused), then PanelGemm's tiles over every row of A.
void Panels(const float* a, int64_t m, const NBitsWeights& w, float* y) {
  constexpr int64_t kPanel = PanelWeights::kPanel;
  const int64_t panels = (w.n + kPanel - 1) / kPanel;
  ParallelFor(panels, 1, [&](int64_t p0, int64_t p1) {
    thread_local std::vector<float> buffer;
    buffer.resize(w.k * kPanel);
    float* panel = buffer.data();
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t cols = std::min(kPanel, w.n - p * kPanel);
      for (int64_t j = 0; j < kPanel; ++j) {
        if (j < cols) {
          DequantizeStrided(w, p * kPanel + j, panel + j, kPanel);
        } else {
          for (int64_t i = 0; i < w.k; ++i) panel[i * kPanel + j] = 0.f;
        }
      }
      PanelGemmPanel(a, m, w.k, panel, cols, y + p * kPanel, w.n);
    }
  });
}

}  // namespace

void QuantizeNBits(const float* w, int64_t n, int64_t k, int bits, int64_t group, bool asymmetric,
                   uint8_t* data, float* scales, uint8_t* zero_points) {
  const int64_t groups = NBitsGroups(k, group), row_bytes = NBitsRowBytes(bits, k);
  const int64_t sub_bytes = kSub * bits / 8, padded = row_bytes * 8 / bits;
  const int levels = (1 << bits) - 1;
  for (int64_t r = 0; r < n; ++r) {
    const float* x = w + r * k;
    uint8_t* row = data + r * row_bytes;
    std::memset(row, 0, row_bytes);
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t lo = g * group, hi = std::min(k, lo + group);
      float s = 1.f;
      int zp = bits == 4 ? 8 : 128;  // in codes 0..levels
      if (asymmetric) {
        float mn = 0.f, mx = 0.f;  // the range holds 0, so zero is exact
        for (int64_t i = lo; i < hi; ++i) {
          mn = std::min(mn, x[i]);
          mx = std::max(mx, x[i]);
        }
        if (mx > mn) s = (mx - mn) / static_cast<float>(levels);
        zp = std::clamp(static_cast<int>(std::nearbyint(-mn / s)), 0, levels);
        zero_points[r * groups + g] =
            static_cast<uint8_t>(bits == 4 ? zp : static_cast<uint8_t>(static_cast<int8_t>(zp - 128)));
      } else if (bits == 4) {
        float big = 0.f;  // the signed value of largest magnitude maps to -8 (ggml's Q4_0)
        for (int64_t i = lo; i < hi; ++i) {
          if (std::fabs(x[i]) > std::fabs(big)) big = x[i];
        }
        if (big != 0.f) s = big / -8.f;
      } else {
        float amax = 0.f;
        for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(x[i]));
        if (amax > 0.f) s = amax / 127.f;
      }
      scales[r * groups + g] = s;
      const int lo_code = bits == 8 && !asymmetric ? 1 : 0;  // symmetric int8: -127..127
      // Padding past k (up to whole sub-blocks) gets the zero point: it dequantizes to 0.
      const int64_t end = g + 1 == groups ? padded : hi;
      for (int64_t i = lo; i < end; ++i) {
        int code = zp;
        if (i < hi) {
          code = std::clamp(static_cast<int>(std::nearbyint(x[i] / s)) + zp, lo_code, levels);
        }
        SetCode(row + (i / kSub) * sub_bytes, bits, i % kSub, code);
      }
    }
  }
}

void DequantizeNBitsRow(const NBitsWeights& w, int64_t r, float* out) {
  DequantizeStrided(w, r, out, 1);
}

void NBitsMatMulSmallMScalar(const float* a, int64_t m, const NBitsWeights& w, float* y) {
  if (m > 0 && w.n > 0) SmallMScalar(a, m, w, y);
}

void NBitsActivations::Quantize(const float* a, int64_t m, int64_t k, int64_t lda, int bits,
                                int64_t group, bool parallel) {
  m_ = m;
  subs_ = (k + kSub - 1) / kSub;
  groups_ = NBitsGroups(k, group);
  q_.resize(m * subs_ * kSub);
  d_.resize(m * (subs_ + groups_));
  auto rows = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int8_t* q = q_.data() + i * subs_ * kSub;
      float* d = d_.data() + i * (subs_ + groups_);
#if defined(INFERD_NBITS_AVX2)
      if (NbitsCpuHasAvx2Fma()) {
        QuantizeActivationsAvx2(a + i * lda, k, group, ActivationLevels(bits), q, d, d + subs_);
        continue;
      }
#endif
      QuantizeActivations(a + i * lda, k, group, ActivationLevels(bits), q, d, d + subs_);
    }
  };
  if (parallel) {
    ParallelFor(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(k, 1)), rows);
  } else {
    rows(0, m);
  }
}

void NBitsDecodeTilesScalar(const NBitsDecodeWeights& w, int64_t t0, int64_t t1,
                            const NBitsQuantizedRow* a, int64_t m, float* y, int64_t ldy) {
  float out[NBitsDecodeWeights::kTile];
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t r0 = t * NBitsDecodeWeights::kTile;
    const int64_t cols = std::min<int64_t>(NBitsDecodeWeights::kTile, w.n() - r0);
    for (int64_t i = 0; i < m; ++i) {
      DecodeTileScalar(w, t, a[i], out);
      std::memcpy(y + i * ldy + r0, out, cols * sizeof(float));
    }
  }
}

void NBitsDecodeTiles(const NBitsDecodeWeights& w, int64_t t0, int64_t t1,
                      const NBitsQuantizedRow* a, int64_t m, float* y, int64_t ldy) {
  if (m <= 0 || t1 <= t0) return;
#if defined(INFERD_NBITS_AVX2)
  if (NbitsCpuHasAvx2Fma()) return DecodeTilesAvx2(w, t0, t1, a, m, y, ldy);
#endif
  NBitsDecodeTilesScalar(w, t0, t1, a, m, y, ldy);
}

namespace {

// Zeroed buffers for the repacked weights, on 2 MB pages where the kernel gives them
// (transparent huge pages in "madvise" mode, as Debian's default): the decode kernel streams its
// weights, and the hardware prefetchers stop at every 4 KB page boundary, while a model's weights
// far exceed the 4 KB TLB's reach. On this Zen 3 the LM head's product took 20% less CPU time so
// (inferd_nbits_bench --layers 0). One product's buffers are mostly under 2 MB, so they are cut
// one after the other from shared 16 MB blocks (a block lives as long as a buffer cut from it).
class StreamArena {
 public:
  Tensor Allocate(DataType dtype, int64_t count) {
    const size_t bytes = (static_cast<size_t>(count) * SizeOf(dtype) + 63) / 64 * 64;
    if (bytes > kBlock / 2) return Cut(dtype, count, NewBlock(bytes), 0, bytes);
    MutexLock l(&mu_);
    std::shared_ptr<void> block = block_.lock();
    if (block == nullptr || used_ + bytes > kBlock) {
      block = NewBlock(kBlock);
      block_ = block;
      used_ = 0;
    }
    used_ += bytes;
    return Cut(dtype, count, std::move(block), used_ - bytes, bytes);
  }

 private:
  static constexpr size_t kHuge = size_t{1} << 21, kBlock = size_t{16} << 20;

  static std::shared_ptr<void> NewBlock(size_t bytes) {
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: refused, the pages stay 4 KB
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  static Tensor Cut(DataType dtype, int64_t count, std::shared_ptr<void> block, size_t offset,
                    size_t bytes) {
    uint8_t* p = static_cast<uint8_t*>(block.get()) + offset;
    std::memset(p, 0, bytes);
    return Tensor::Wrap(dtype, {count}, p, std::move(block));
  }

  Mutex mu_;
  std::weak_ptr<void> block_ GUARDED_BY(mu_);  // the block being filled
  size_t used_ GUARDED_BY(mu_) = 0;
};

Tensor AllocateStream(DataType dtype, int64_t count) {
  static StreamArena* arena = new StreamArena;  // never destroyed: used until exit
  return arena->Allocate(dtype, count);
}

}  // namespace

NBitsDecodeWeights::NBitsDecodeWeights(const NBitsWeights& w)
    : bits_(w.bits), n_(w.n), k_(w.k), group_(w.group) {
  const int64_t row_bytes = NBitsRowBytes(bits_, k_), sub_bytes = kSub * bits_ / 8;
  const int64_t vecs = sub_bytes / 4, g = groups();
  const uint8_t flip = bits_ == 8 ? 0x80 : 0;  // 8 bits: unsigned codes
  codes_ = AllocateStream(DataType::kUInt8, tiles() * tile_bytes());
  scales_ = AllocateStream(DataType::kFloat32, tiles() * g * kTile);
  if (w.zero_points != nullptr) {
    offsets_ = AllocateStream(DataType::kFloat32, tiles() * g * kTile);
  }
  uint8_t* dst = codes_.data<uint8_t>();  // padded rows: codes 0, scales and offsets 0
  for (int64_t r = 0; r < n_; ++r) {
    const int64_t t = r / kTile, lane = r % kTile;
    const uint8_t* src = w.data + r * row_bytes;
    for (int64_t b = 0; b < subs(); ++b) {
      for (int64_t v = 0; v < vecs; ++v) {
        uint8_t* out = dst + t * tile_bytes() + (b * vecs + v) * 32 + lane * 4;
        for (int j = 0; j < 4; ++j) out[j] = src[b * sub_bytes + v * 4 + j] ^ flip;
      }
    }
    for (int64_t j = 0; j < g; ++j) {
      const float s = w.scales[r * g + j];
      scales_.data<float>()[(t * g + j) * kTile + lane] = s;
      if (w.zero_points != nullptr) {
        const float zp = static_cast<float>(ZeroPoint(w, r, j)) + (bits_ == 8 ? 128.f : 0.f);
        offsets_.data<float>()[(t * g + j) * kTile + lane] = s * zp;
      }
    }
  }
}

void NBitsMatMul(const float* a, int64_t m, const NBitsWeights& w,
                 const NBitsDecodeWeights* decode, float* y) {
  if (m <= 0 || w.n <= 0) return;
  if (m > kNBitsSmallM) return Panels(a, m, w, y);
#if defined(INFERD_NBITS_AVX2)
  if (NbitsCpuHasAvx2Fma()) {
    if (decode != nullptr && decode->defined()) return SmallMAvx2(a, m, *decode, y);
    return SmallMAvx2(a, m, NBitsDecodeWeights(w), y);  // weights fed at run time
  }
#endif
  (void)decode;
  SmallMScalar(a, m, w, y);
}

}  // namespace inferd::cpu
