// Registration functions of the CPU kernel families, one per file group. CpuProvider() calls them
// in one explicit list (cpu_provider.cc).
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

void RegisterElementwiseKernels(KernelRegistry& r);   // elementwise.cc: unary, binary, variadic
void RegisterReductionKernels(KernelRegistry& r);     // reduce.cc
void RegisterTensorKernels(KernelRegistry& r);        // tensor_ops.cc: shape and data movement
void RegisterNnKernels(KernelRegistry& r);            // nn_*.cc: oneDNN conv, matmul, pool, norms
void RegisterQuantizationKernels(KernelRegistry& r);  // quantize.cc
void RegisterMiscKernels(KernelRegistry& r);          // misc_ops.cc: TopK, Resize, Einsum, ...
void RegisterControlFlowKernels(KernelRegistry& r);   // control_flow.cc: If, Loop, Scan
void RegisterFusedKernels(KernelRegistry& r);         // fused_*.cc: ai.inferd ops (optimizer)

}  // namespace inferd::cpu
