// Weight-only 4-bit and 8-bit matrix products: what ai.inferd.MatMulNBits and GatherNBits run
// (kernels/cpu/quantization/nbits.cc) and what `inferd quantize` writes (quantize/nbits_weights.h).
//
// Layout of one weight matrix W [N, K] (a MatMul's B transposed: one row per output column; an
// embedding table's rows as they are), row by row, each row cut into sub-blocks of 32 values
// (the last one padded):
//   bits 4: 16 bytes per sub-block; byte j holds value j in its low nibble and value 16 + j in its
//           high nibble (ggml's Q4_0 order: one 16-byte load unpacks to the 32 values in order).
//           value = (code - zp) * scale, code 0..15, zp 8 when symmetric.
//   bits 8: 32 int8 per sub-block; value = (q - zp) * scale, zp 0 when symmetric.
// scales float32 [N, ceil(K / group)] and zero points [N, ceil(K / group)] (uint8 for 4 bits,
// int8 for 8 bits; absent when symmetric), group 32, 64 or 128 values along K.
//
// The product for few rows (decode: M <= kNBitsSmallM) never expands the weights. It runs on a
// copy repacked for it (NBitsDecodeWeights, made once when a model loads; the files keep the
// layout above): tiles of 8 rows whose sub-blocks lie side by side, so one pass streams 8 rows
// with each load of A shared by all of them. Each row of A is quantized to int8 per 32 values
// (scale max|a| / 127 against 4-bit weights, as ggml's Q8_0; max|a| / 63 against 8-bit ones, so
// that maddubs can take their codes as unsigned bytes), and each sub-block's dot product is an
// integer one (AVX2: maddubs/madd on the raw codes, one int32 lane per weight row; the zero point
// taken out through the sum of the quantized activations), scaled by weight scale × activation
// scale into a float32 accumulator. Rows of A are independent: a row's result does not depend on
// M or the thread split. More rows (prefill) dequantize 16 weight rows at a time into a [K, 16]
// float32 panel and run util/panel_gemm.h's tile kernel over all of A: float activations, the
// weights read once per call.
#pragma once

#include <cstdint>
#include <vector>

#include "common/tensor.h"

namespace inferd::cpu {

constexpr int64_t kNBitsSubBlock = 32;
constexpr int64_t kNBitsSmallM = 16;  // rows of A up to which the integer path runs

// Bytes of one packed row of K values.
inline int64_t NBitsRowBytes(int bits, int64_t k) {
  return (k + kNBitsSubBlock - 1) / kNBitsSubBlock * kNBitsSubBlock * bits / 8;
}
inline int64_t NBitsGroups(int64_t k, int64_t group) { return (k + group - 1) / group; }

// Read-only view of a packed matrix (see the layout above).
struct NBitsWeights {
  int bits = 4;            // 4 or 8
  int64_t n = 0, k = 0;    // rows, values per row
  int64_t group = 32;      // 32, 64 or 128
  const uint8_t* data = nullptr;         // [n, NBitsRowBytes(bits, k)]
  const float* scales = nullptr;         // [n, NBitsGroups(k, group)]
  const uint8_t* zero_points = nullptr;  // same shape; null: symmetric (8-bit: read as int8)
};

// Packs float32 rows w [n, k] (row-major): symmetric (4 bits: ggml's Q4_0 rule, scale =
// the signed value of largest magnitude / -8, so all 16 codes are used; 8 bits: max|w| / 127) or
// asymmetric (range [min, max] widened to hold 0, scale = range / (2^bits - 1), zp rounded).
// data, scales and zero_points (asymmetric only; else may be null) sized as NBitsWeights says.
// Weights must be finite (the caller checks).
void QuantizeNBits(const float* w, int64_t n, int64_t k, int bits, int64_t group, bool asymmetric,
                   uint8_t* data, float* scales, uint8_t* zero_points);

// Row r of W dequantized into out[0, k).
void DequantizeNBitsRow(const NBitsWeights& w, int64_t r, float* out);

// W repacked for the decode kernel. Tiles of kTile = 8 rows (the last one padded with rows of
// zero scale); per tile, sub-block after sub-block, the 8 rows' codes in 4-byte columns: 32-byte
// vector v of a sub-block holds bytes [4v, 4v + 4) of each row's sub-block (lane r: row r; 4 such
// vectors for 4 bits, 8 for 8 bits), so the int32 lanes of a product are the 8 rows' dot products
// and need no horizontal sum. 8-bit codes are stored with their sign bit flipped (code + 128, an
// unsigned byte). Scales [tiles, groups, 8]; when asymmetric, offsets [tiles, groups, 8] =
// scale × the unsigned zero point (4 bits: zp; 8 bits: zp + 128). The buffers are cut from
// shared blocks on 2 MB pages where the OS gives them (madvise), for the kernel's long streams.
// This is a copy: a model's MatMulNBits weights are held twice (the graph's, which the prefill
// path reads, and this).
class NBitsDecodeWeights {
 public:
  static constexpr int64_t kTile = 8;

  NBitsDecodeWeights() = default;
  // Repacks w (any n, k >= 1; bits, group as NBitsWeights says).
  explicit NBitsDecodeWeights(const NBitsWeights& w);

  bool defined() const { return n_ > 0; }
  int bits() const { return bits_; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t group() const { return group_; }
  bool asymmetric() const { return offsets_.defined(); }
  int64_t tiles() const { return (n_ + kTile - 1) / kTile; }
  int64_t subs() const { return (k_ + kNBitsSubBlock - 1) / kNBitsSubBlock; }
  int64_t groups() const { return NBitsGroups(k_, group_); }
  // Bytes of one tile's codes (8 packed rows).
  int64_t tile_bytes() const { return kTile * NBitsRowBytes(bits_, k_); }
  const uint8_t* codes(int64_t t) const { return codes_.data<uint8_t>() + t * tile_bytes(); }
  const float* scales(int64_t t) const { return scales_.data<float>() + t * groups() * kTile; }
  const float* offsets(int64_t t) const { return offsets_.data<float>() + t * groups() * kTile; }

 private:
  int bits_ = 4;
  int64_t n_ = 0, k_ = 0, group_ = 32;
  Tensor codes_, scales_, offsets_;  // 64-byte aligned; offsets_ undefined when symmetric
};

// y [m, n] = a [m, k] · Wᵀ (row-major, dense), on the OpenMP threads over output columns.
// `decode` (optional): w repacked; without it the decode path (m <= kNBitsSmallM) repacks w on
// every call (weights fed at run time). Same results with and without it.
void NBitsMatMul(const float* a, int64_t m, const NBitsWeights& w,
                 const NBitsDecodeWeights* decode, float* y);
inline void NBitsMatMul(const float* a, int64_t m, const NBitsWeights& w, float* y) {
  NBitsMatMul(a, m, w, nullptr, y);
}

// The decode kernel's pieces, for callers that group rows and split the work themselves (the
// MoE kernel, kernels/cpu/moe/moe_nbits.h, runs each expert's rows against its own weights):
//
//   NBitsActivations xq;
//   xq.Quantize(x, m, k, k, w.bits(), w.group(), /*parallel=*/false);
//   std::vector<NBitsQuantizedRow> rows = {xq.row(0), ...};   // any rows, in any order
//   NBitsDecodeTiles(w, 0, w.tiles(), rows.data(), rows.size(), y, ldy);
//
// A row of A quantized as the decode path does (see the top of this file): codes, per sub-block
// scales, and per weight group the sum over its sub-blocks of scale × Σ codes.
struct NBitsQuantizedRow {
  const int8_t* q = nullptr;    // [subs * 32], zeros past k
  const float* d = nullptr;     // [subs]
  const float* gsum = nullptr;  // [NBitsGroups(k, group)]
};

// Owns the quantized rows of one matrix A; a row's quantization does not depend on the others.
class NBitsActivations {
 public:
  // Quantizes a [m, k] (row i at a + i * lda) for weights of `bits` and `group` (the levels of
  // the activations differ by bits). parallel: rows split over the OpenMP threads.
  void Quantize(const float* a, int64_t m, int64_t k, int64_t lda, int bits, int64_t group,
                bool parallel);
  int64_t rows() const { return m_; }
  NBitsQuantizedRow row(int64_t i) const {
    return {q_.data() + i * subs_ * kNBitsSubBlock, d_.data() + i * (subs_ + groups_),
            d_.data() + i * (subs_ + groups_) + subs_};
  }

 private:
  int64_t m_ = 0, subs_ = 0, groups_ = 0;
  std::vector<int8_t> q_;
  std::vector<float> d_;  // per row: subs_ scales, then groups_ group sums
};

// y[i * ldy + r] = A_i · W_r for the m rows of `a` (quantized for w's bits and group) and the
// weight rows r of tiles [t0, t1) of w, on the calling thread: the kernel NBitsMatMul's decode
// path runs (AVX2 where the CPU has it, else the same arithmetic in plain C++, bit for bit). A
// row's results do not depend on m or on which tiles a call covers.
void NBitsDecodeTiles(const NBitsDecodeWeights& w, int64_t t0, int64_t t1,
                      const NBitsQuantizedRow* a, int64_t m, float* y, int64_t ldy);
// The plain C++ version NBitsDecodeTiles runs without AVX2/FMA (exposed for its test).
void NBitsDecodeTilesScalar(const NBitsDecodeWeights& w, int64_t t0, int64_t t1,
                            const NBitsQuantizedRow* a, int64_t m, float* y, int64_t ldy);

// The integer path in plain C++ (the reference the vector code is tested against; also what runs
// on CPUs without AVX2/FMA): same quantization of A and the same per-sub-block integer sums.
void NBitsMatMulSmallMScalar(const float* a, int64_t m, const NBitsWeights& w, float* y);

}  // namespace inferd::cpu
