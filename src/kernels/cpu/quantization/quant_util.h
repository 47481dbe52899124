// Helpers shared by the quantized kernels (quantization/*.cc): zero-point/scale reading,
// requantization with round-half-to-even and saturation, and the int32 reference GEMM.
//
// The integer kernels first widen their uint8/int8 operands to int32 with the zero point already
// subtracted, then run plain int32 loops. That keeps one code path for every type combination and
// per-tensor/per-channel zero point; an oneDNN int8 path can replace QGemmInt32 / the conv loop
// for the types and zero-point layouts oneDNN supports without touching the kernels' parsing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd::cpu {

// Values of an optional zero-point/scale input as int32/float, broadcast to `n` entries when it
// is a scalar (or one element); otherwise it must hold exactly `n` values. `what` names the input
// in errors. A null zero point means all zeros; a null scale is an error.
StatusOr<std::vector<int32_t>> ReadZeroPoints(const Tensor* zp, int64_t n, const char* what);
StatusOr<std::vector<float>> ReadScales(const Tensor* scale, int64_t n, const char* what);

// True for uint8/int8.
inline bool IsQuantType(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// Widens a uint8/int8/int32 tensor's elements to int32 (no zero point applied).
std::vector<int32_t> WidenToInt32(const Tensor& t);

// round-half-to-even(v) + zp, saturated to T's range. NaN maps to zp.
template <typename T>
inline T Saturate(float v, int32_t zp) {
  constexpr float lo = static_cast<float>(std::numeric_limits<T>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<T>::max());
  if (std::isnan(v)) v = 0.f;
  float r = std::nearbyint(v) + static_cast<float>(zp);
  return static_cast<T>(std::clamp(r, lo, hi));
}

// Writes `v` (float) quantized to `out` element i (uint8 or int8 tensor).
inline void StoreQuantized(Tensor& out, int64_t i, float v, int32_t zp) {
  if (out.dtype() == DataType::kUInt8) {
    out.data<uint8_t>()[i] = Saturate<uint8_t>(v, zp);
  } else {
    out.data<int8_t>()[i] = Saturate<int8_t>(v, zp);
  }
}

// C[M,N] = A[M,K] * B[K,N], all int32, row-major, C overwritten. Parallel over rows.
void QGemmInt32(const int32_t* a, const int32_t* b, int64_t m, int64_t n, int64_t k, int32_t* c);

}  // namespace inferd::cpu

