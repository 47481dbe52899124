#include "kernels/cpu/util/float32.h"

#include <type_traits>

#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {

Tensor ToFloat32(const Tensor& t) {
  if (t.dtype() == DataType::kFloat32) return t;
  Tensor f = Tensor::Allocate(DataType::kFloat32, t.shape());
  float* dst = f.data<float>();
  const int64_t n = t.NumElements();
  DispatchAll(
      t.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        const T* src = t.data<T>();
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
      },
      [] {});
  return f;
}

void SetOutputFromFloat32(KernelContext& ctx, size_t i, DataType dtype, const Tensor& f32) {
  if (dtype == DataType::kFloat32) {
    ctx.SetOutput(i, f32);
    return;
  }
  Tensor* out = ctx.AllocateOutput(i, dtype, f32.shape());
  const float* src = f32.data<float>();
  const int64_t n = f32.NumElements();
  DispatchAll(
      dtype,
      [&](auto tag) {
        using T = decltype(tag);
        T* dst = out->data<T>();
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          for (int64_t j = 0; j < n; ++j) dst[j] = T(src[j]);
        } else {
          for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(src[j]);
        }
      },
      [] {});
}

}  // namespace inferd::cpu
