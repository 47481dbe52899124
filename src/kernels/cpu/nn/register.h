// Registration functions of the neural-network kernel files (nn/*.cc). RegisterNnKernels
// (nn/register.cc, declared in kernels/cpu/register.h) calls all of them.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

void RegisterConvKernels(KernelRegistry& r);     // conv.cc: Conv, ConvTranspose
void RegisterPoolKernels(KernelRegistry& r);     // pool.cc: Max/Average/Lp pools, global pools
void RegisterNormKernels(KernelRegistry& r);     // norm.cc: BatchNorm, LRN, Instance/LayerNorm, MVN
void RegisterSoftmaxKernels(KernelRegistry& r);  // softmax.cc: Softmax, LogSoftmax, Hardmax

}  // namespace inferd::cpu
