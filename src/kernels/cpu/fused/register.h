// Kernels for inferd's own fused ops (domain ai.inferd), which the extended optimizer level
// writes (src/optimizer, schemas in docs/optimizer.md). RegisterFusedKernels (fused/register.cc,
// declared in kernels/cpu/register.h) calls the functions below.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

inline constexpr char kInferdDomain[] = "ai.inferd";

void RegisterFusedMatMulKernel(KernelRegistry& r);   // matmul.cc: FusedMatMul
void RegisterGeluKernel(KernelRegistry& r);          // gelu.cc: Gelu
void RegisterAttentionKernel(KernelRegistry& r);     // attention.cc: Attention
void RegisterBlockedConvKernel(KernelRegistry& r);   // conv_blocked.cc: BlockedConv
void RegisterSwiGluKernel(KernelRegistry& r);        // swiglu.cc: SwiGlu

}  // namespace inferd::cpu
