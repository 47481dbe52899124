#include "kernels/cpu/quantization/nbits_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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
struct QuantizedRow {
  const int8_t* q;
  const float* d;
  const float* gsum;
  // The 4-bit vector kernel's layout, per pair of sub-blocks (2p, 2p+1): 64 values, first the
  // low halves [q(2p)[0..16), q(2p+1)[0..16)], then the high halves (the order one 32-byte load of
  // two packed sub-blocks unpacks to), and 8 scales [d(2p) x4, d(2p+1) x4]; an odd last sub-block
  // pairs with zeros. Null when not prepared.
  const int8_t* pq = nullptr;
  const float* pd = nullptr;
};

// Fills the pair layout (pq: ceil(subs / 2) * 64 bytes, pd: ceil(subs / 2) * 8 floats).
void PairActivations(const int8_t* q, const float* d, int64_t subs, int8_t* pq, float* pd) {
  for (int64_t p = 0; p < (subs + 1) / 2; ++p) {
    for (int h = 0; h < 2; ++h) {  // h: which sub-block of the pair
      const int64_t b = 2 * p + h;
      for (int j = 0; j < 16; ++j) {
        pq[p * 64 + h * 16 + j] = b < subs ? q[b * kSub + j] : 0;
        pq[p * 64 + 32 + h * 16 + j] = b < subs ? q[b * kSub + 16 + j] : 0;
      }
      for (int j = 0; j < 4; ++j) pd[p * 8 + h * 4 + j] = b < subs ? d[b] : 0.f;
    }
  }
}

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
      int32_t isum = 0;
      for (int64_t j = 0; j < kSub; ++j) isum += Code(sb, w.bits, j) * a.q[b * kSub + j];
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

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Rows r0 .. r0+R-1 of W against one quantized row of A: out[i] = A · W[r0 + i]. The R rows share
// each load of A; every sub-block is an integer dot product of 32 codes and 32 int8 activations,
// scaled by the activation scale into a per-group accumulator, which the weight scale scales once
// per group. Zp: the zero points are an input (else 8 for 4 bits, none for 8 bits).
template <int R, int Bits, bool Zp>
__attribute__((target("avx2,fma"))) void DotRowsAvx2(const QuantizedRow& a, const NBitsWeights& w,
                                                     int64_t r0, float* out) {
  const int64_t subs = (w.k + kSub - 1) / kSub, groups = NBitsGroups(w.k, w.group);
  const int64_t row_bytes = NBitsRowBytes(Bits, w.k), per_group = w.group / kSub;
  constexpr int64_t kSubBytes = kSub * Bits / 8;
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[R];
  float corr[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm256_setzero_ps();
    corr[i] = 0.f;
  }
  const uint8_t* rp[R];  // each row's next sub-block (locals: the loop keeps them in registers)
  for (int i = 0; i < R; ++i) rp[i] = w.data + (r0 + i) * row_bytes;
  const float* scales = w.scales + r0 * groups;
  const uint8_t* zps = Zp ? w.zero_points + r0 * groups : nullptr;
  const int8_t* __restrict aq = a.q;
  const float* __restrict ad = a.d;
  for (int64_t g = 0; g < groups; ++g) {
    __m256 accg[R];
    for (int i = 0; i < R; ++i) accg[i] = _mm256_setzero_ps();
    const int64_t nb = std::min(subs, (g + 1) * per_group) - g * per_group;
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq));
      const __m256 dv = _mm256_set1_ps(*ad);
      aq += kSub;
      ++ad;
      for (int i = 0; i < R; ++i) {
        __m256i prod;
        if constexpr (Bits == 4) {
          const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rp[i]));
          const __m256i codes =
              _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), low4);
          prod = _mm256_maddubs_epi16(codes, av);  // unsigned codes x signed activations
        } else {
          // q + 128 (the sign bit flipped) as unsigned bytes x 7-bit activations; the 128 comes
          // out with the zero point through gsum.
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp[i]));
          prod = _mm256_maddubs_epi16(_mm256_xor_si256(q, flip), av);
        }
        rp[i] += kSubBytes;
        const __m256 sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(prod, ones));
        accg[i] = _mm256_fmadd_ps(sum, dv, accg[i]);
      }
    }
    for (int i = 0; i < R; ++i) {
      const float ws = scales[i * groups + g];
      acc[i] = _mm256_fmadd_ps(accg[i], _mm256_set1_ps(ws), acc[i]);
      if constexpr (Zp) {  // 8 bits: the unsigned code's zero point, zp + 128
        const int zp = Bits == 4 ? static_cast<int>(zps[i * groups + g])
                                 : static_cast<int>(static_cast<int8_t>(zps[i * groups + g])) + 128;
        corr[i] += ws * static_cast<float>(zp) * a.gsum[g];
      } else {
        corr[i] += ws * (Bits == 4 ? 8.f : 128.f) * a.gsum[g];
      }
    }
  }
  for (int i = 0; i < R; ++i) out[i] = HorizontalSum(acc[i]) - corr[i];
}

// The 4-bit kernel over pairs of sub-blocks: one 32-byte load holds 64 codes of a row, whose low
// and high nibbles meet the pair layout's activations in two maddubs (int16 sums <= 2 x 3810), one
// madd and one float conversion per 64 values; each lane's scale is activation scale x weight
// scale (the two sub-blocks' groups differ at group 32).
template <int R, bool Zp>
__attribute__((target("avx2,fma"))) void DotRows4Avx2(const QuantizedRow& a, const NBitsWeights& w,
                                                      int64_t r0, float* out) {
  const int64_t subs = (w.k + kSub - 1) / kSub, groups = NBitsGroups(w.k, w.group);
  const int64_t row_bytes = NBitsRowBytes(4, w.k), pairs = subs / 2;
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256i halves = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const bool g32 = w.group == kSub;
  const int shift = w.group == 64 ? 6 : 7;  // group of a sub-block's first value when not 32
  __m256 acc[R];
  const uint8_t* rp[R];
  const float* sc[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm256_setzero_ps();
    rp[i] = w.data + (r0 + i) * row_bytes;
    sc[i] = w.scales + (r0 + i) * groups;
  }
  auto lane_scales = [&](int i, int64_t b) {  // weight scales of sub-blocks b, b + 1 (or 0)
    if (g32) {  // one 8-byte load of the two scales, except for an odd last sub-block
      const __m128 two =
          b + 1 < subs ? _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(sc[i] + b)))
                       : _mm_set_ss(sc[i][b]);
      return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), halves);
    }
    return _mm256_set1_ps(sc[i][(b * kSub) >> shift]);
  };
  for (int64_t p = 0; p < (subs + 1) / 2; ++p) {
    const __m256i alo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.pq + p * 64));
    const __m256i ahi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.pq + p * 64 + 32));
    const __m256 dv = _mm256_loadu_ps(a.pd + p * 8);
    for (int i = 0; i < R; ++i) {
      __m256i raw;
      if (p < pairs) {
        raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp[i] + p * 32));
      } else {  // the odd last sub-block: 16 bytes (its pair's activations are zeros)
        raw = _mm256_castsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rp[i] + p * 32)));
      }
      const __m256i lo = _mm256_and_si256(raw, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      const __m256i s16 =
          _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi));
      const __m256 sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
      acc[i] = _mm256_fmadd_ps(sum, _mm256_mul_ps(dv, lane_scales(i, 2 * p)), acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) {
    float corr = 0.f;
    for (int64_t g = 0; g < groups; ++g) {
      const float zp = Zp ? static_cast<float>(w.zero_points[(r0 + i) * groups + g]) : 8.f;
      corr += sc[i][g] * zp * a.gsum[g];
    }
    out[i] = HorizontalSum(acc[i]) - corr;
  }
}

template <bool Zp>
// One row at a time (R = 1): the rows lie one after the other, so a call reads the weights as one
// sequential stream. Four rows at once (R = 4, sharing each load of A) ran 1.3-1.6x slower on
// llama-110m (Zen 3, one thread, CPU time per token: INT4 11.3-12.5 -> 8.6 ms, INT8 19.7 -> 12.3-14.3
// ms), the four streams 384 bytes apart defeating the hardware prefetcher.
void DotRows4Any(int rows, const QuantizedRow& a, const NBitsWeights& w, int64_t r0, float* out) {
  for (int i = 0; i < rows; ++i) DotRows4Avx2<1, Zp>(a, w, r0 + i, out + i);
}

template <int Bits, bool Zp>
void DotRowsAvx2Any(int rows, const QuantizedRow& a, const NBitsWeights& w, int64_t r0,
                    float* out) {  // one row at a time, as DotRows4Any
  for (int i = 0; i < rows; ++i) DotRowsAvx2<1, Bits, Zp>(a, w, r0 + i, out + i);
}

bool HasAvx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

constexpr int kRowsPerTask = 4;

void DotRows(bool vector, int rows, const QuantizedRow& a, const NBitsWeights& w, int64_t r0,
             float* out) {
#if defined(INFERD_NBITS_AVX2)
  if (vector) {
    const bool zp = w.zero_points != nullptr;
    if (w.bits == 4) {
      return zp ? DotRows4Any<true>(rows, a, w, r0, out) : DotRows4Any<false>(rows, a, w, r0, out);
    }
    return zp ? DotRowsAvx2Any<8, true>(rows, a, w, r0, out)
              : DotRowsAvx2Any<8, false>(rows, a, w, r0, out);
  }
#endif
  (void)vector;
  for (int i = 0; i < rows; ++i) out[i] = DotScalar(a, w, r0 + i);
}

// The integer path: A quantized on the calling thread, then the threads take groups of 4 weight
// rows, each group against every row of A while its bytes are in L1.
void SmallM(const float* a, int64_t m, const NBitsWeights& w, float* y, bool vector) {
  const int64_t subs = (w.k + kSub - 1) / kSub;
  const int64_t groups = NBitsGroups(w.k, w.group);
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  q.resize(m * subs * kSub);
  d.resize(m * (subs + groups));
  std::vector<QuantizedRow> rows(m);
  const bool pairs = vector && w.bits == 4;
  const int64_t npairs = (subs + 1) / 2;
  thread_local std::vector<int8_t> pq;
  thread_local std::vector<float> pd;
  if (pairs) {
    pq.resize(m * npairs * 64);
    pd.resize(m * npairs * 8);
  }
  for (int64_t i = 0; i < m; ++i) {
    int8_t* qi = q.data() + i * subs * kSub;
    float* di = d.data() + i * (subs + groups);
    QuantizeActivations(a + i * w.k, w.k, w.group, ActivationLevels(w.bits), qi, di, di + subs);
    rows[i] = {qi, di, di + subs};
    if (pairs) {
      PairActivations(qi, di, subs, pq.data() + i * npairs * 64, pd.data() + i * npairs * 8);
      rows[i].pq = pq.data() + i * npairs * 64;
      rows[i].pd = pd.data() + i * npairs * 8;
    }
  }
  const int64_t tasks = (w.n + kRowsPerTask - 1) / kRowsPerTask;
  // At least ~64K multiply-adds per thread chunk, so small products stay on the calling thread.
  const int64_t min_tasks = std::max<int64_t>(1, (int64_t{1} << 16) / (kRowsPerTask * w.k * m));
  ParallelFor(tasks, min_tasks, [&](int64_t t0, int64_t t1) {
    float out[kRowsPerTask];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * kRowsPerTask;
      const int n = static_cast<int>(std::min<int64_t>(kRowsPerTask, w.n - r0));
      for (int64_t i = 0; i < m; ++i) {
        DotRows(vector, n, rows[i], w, r0, out);
        std::memcpy(y + i * w.n + r0, out, n * sizeof(float));
      }
    }
  });
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
  SmallM(a, m, w, y, /*vector=*/false);
}

void NBitsMatMul(const float* a, int64_t m, const NBitsWeights& w, float* y) {
  if (m <= 0 || w.n <= 0) return;
  if (m > kNBitsSmallM) return Panels(a, m, w, y);
#if defined(INFERD_NBITS_AVX2)
  SmallM(a, m, w, y, HasAvx2Fma());
#else
  SmallM(a, m, w, y, false);
#endif
}

}  // namespace inferd::cpu
