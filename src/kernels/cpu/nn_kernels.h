// Registration functions of the neural-network kernel files (nn_*.cc). RegisterNnKernels (in
// nn_conv.cc, declared in register.h) calls all of them.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

void RegisterConvKernels(KernelRegistry& r);     // nn_conv.cc: Conv, ConvTranspose
void RegisterMatMulKernels(KernelRegistry& r);   // nn_matmul.cc: MatMul, Gemm
void RegisterPoolKernels(KernelRegistry& r);     // nn_pool.cc: Max/Average/Lp pools, global pools
void RegisterNormKernels(KernelRegistry& r);     // nn_norm.cc: BatchNorm, LRN, Instance/LayerNorm, MVN
void RegisterSoftmaxKernels(KernelRegistry& r);  // nn_softmax.cc: Softmax, LogSoftmax, Hardmax

}  // namespace inferd::cpu
