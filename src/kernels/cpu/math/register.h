// Registration functions of the math kernel files (math/*.cc). RegisterMathKernels
// (math/register.cc, declared in kernels/cpu/register.h) calls all of them.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

void RegisterMatMulKernels(KernelRegistry& r);   // matmul.cc: MatMul, Gemm (oneDNN)
void RegisterMathOpsKernels(KernelRegistry& r);  // math_ops.cc: TopK, Det
void RegisterEinsumKernels(KernelRegistry& r);   // einsum.cc: Einsum

}  // namespace inferd::cpu
