// Kernels for inferd's own fused ops (domain ai.inferd), which the extended optimizer level
// writes (src/optimizer, schemas in docs/optimizer.md). RegisterFusedKernels (fused_register.cc,
// declared in register.h) calls the functions below.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

inline constexpr char kInferdDomain[] = "ai.inferd";

void RegisterFusedMatMulKernel(KernelRegistry& r);   // fused_matmul.cc: FusedMatMul
void RegisterGeluKernel(KernelRegistry& r);          // fused_gelu.cc: Gelu
void RegisterAttentionKernel(KernelRegistry& r);     // fused_attention.cc: Attention
void RegisterBlockedConvKernel(KernelRegistry& r);   // fused_conv_blocked.cc: BlockedConv

}  // namespace inferd::cpu
