// Registration functions of the CPU kernel families, one per folder. CpuProvider() calls them in
// one explicit list (cpu_provider.cc). Within a family, <folder>/register.h declares one function
// per kernel file and <folder>/register.cc calls them (single-file families register in place).
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

void RegisterElementwiseKernels(KernelRegistry& r);      // elementwise/: unary, binary, variadic
void RegisterReductionKernels(KernelRegistry& r);        // reduction/reduce.cc
void RegisterTensorKernels(KernelRegistry& r);           // tensor/: shape and data movement
void RegisterNnKernels(KernelRegistry& r);               // nn/: oneDNN conv, pool, norms, softmax
void RegisterMathKernels(KernelRegistry& r);             // math/: MatMul, Gemm, TopK, Det, Einsum
void RegisterQuantizationKernels(KernelRegistry& r);     // quantization/: QDQ, integer ops
void RegisterObjectDetectionKernels(KernelRegistry& r);  // object_detection/: NMS, RoiAlign
void RegisterControlFlowKernels(KernelRegistry& r);      // controlflow/: If, Loop, Scan
void RegisterFusedKernels(KernelRegistry& r);            // fused/: ai.inferd ops (optimizer)
void RegisterAttentionKernels(KernelRegistry& r);        // attention/: ai.inferd.PagedAttention
void RegisterTextKernels(KernelRegistry& r);             // text/: StringNormalizer
void RegisterImageKernels(KernelRegistry& r);            // image/: decode/resize/crop, top-k
void RegisterMoeKernels(KernelRegistry& r);              // moe/: ai.inferd.MoE, MoENBits

}  // namespace inferd::cpu
