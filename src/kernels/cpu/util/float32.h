// float32 staging for kernels that compute in float32 only (oneDNN primitives, reference loops):
// float16, bfloat16 and float64 tensors are widened on the way in and narrowed on the way out.
#pragma once

#include <cstddef>

#include "common/data_type.h"
#include "common/tensor.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {

// Returns `t` if it is float32, else a float32 copy (float16, bfloat16, float64 inputs).
Tensor ToFloat32(const Tensor& t);
// Sets output i of `ctx` to the float32 result `f32`, converted to `dtype` when that is not float32.
void SetOutputFromFloat32(KernelContext& ctx, size_t i, DataType dtype, const Tensor& f32);

}  // namespace inferd::cpu
