#include "kernels/cpu/quantization/quant_util.h"

#include <cstring>

#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {

StatusOr<std::vector<int32_t>> ReadZeroPoints(const Tensor* zp, int64_t n, const char* what) {
  if (zp == nullptr) return std::vector<int32_t>(n, 0);
  if (!IsQuantType(zp->dtype()) && zp->dtype() != DataType::kInt32) {
    return InvalidArgument("{} must be uint8, int8 or int32, got {}", what, DataTypeName(zp->dtype()));
  }
  int64_t count = zp->NumElements();
  if (count != 1 && count != n) {
    return InvalidArgument("{} has {} elements, expected 1 or {}", what, count, n);
  }
  std::vector<int32_t> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(zp->GetAsInt64(count == 1 ? 0 : i));
  return out;
}

StatusOr<std::vector<float>> ReadScales(const Tensor* scale, int64_t n, const char* what) {
  if (scale == nullptr) return InvalidArgument("{} is required", what);
  if (!IsFloatingPoint(scale->dtype())) {
    return InvalidArgument("{} must be a floating-point tensor, got {}", what,
                           DataTypeName(scale->dtype()));
  }
  int64_t count = scale->NumElements();
  if (count != 1 && count != n) {
    return InvalidArgument("{} has {} elements, expected 1 or {}", what, count, n);
  }
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(scale->GetAsDouble(count == 1 ? 0 : i));
  return out;
}

std::vector<int32_t> WidenToInt32(const Tensor& t) {
  std::vector<int32_t> out(t.NumElements());
  switch (t.dtype()) {
    case DataType::kUInt8:
      std::copy(t.data<uint8_t>(), t.data<uint8_t>() + out.size(), out.begin());
      break;
    case DataType::kInt8:
      std::copy(t.data<int8_t>(), t.data<int8_t>() + out.size(), out.begin());
      break;
    case DataType::kInt32:
      if (!out.empty()) std::memcpy(out.data(), t.raw_data(), out.size() * sizeof(int32_t));
      break;
    default:
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(t.GetAsInt64(i));
  }
  return out;
}

void QGemmInt32(const int32_t* a, const int32_t* b, int64_t m, int64_t n, int64_t k, int32_t* c) {
  ParallelFor(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * k)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      int32_t* crow = c + i * n;
      std::fill(crow, crow + n, 0);
      for (int64_t p = 0; p < k; ++p) {
        int32_t av = a[i * k + p];
        if (av == 0) continue;
        const int32_t* brow = b + p * n;
        for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
      }
    }
  });
}

}  // namespace inferd::cpu
