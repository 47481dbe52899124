// Registration functions of the quantized kernel files (quantization/*.cc).
// RegisterQuantizationKernels (quantization/register.cc, declared in kernels/cpu/register.h)
// calls all of them.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul
// (quantize.cc).
void RegisterQuantizeKernels(KernelRegistry& r);
// ConvInteger and QLinearConv (conv.cc).
void RegisterQuantConvKernels(KernelRegistry& r);
// ai.inferd.DequantizeAdd (add.cc).
void RegisterQuantAddKernels(KernelRegistry& r);
// ai.inferd.MaxPool over uint8/int8, NCHW or NHWC (pool.cc).
void RegisterQuantPoolKernels(KernelRegistry& r);
// ai.inferd.MatMulInt4 / GatherInt4 (int4.cc).
void RegisterQuantInt4Kernels(KernelRegistry& r);
// ai.inferd.MatMulNBits / GatherNBits: weight-only 4/8-bit decoders (nbits.cc).
void RegisterQuantNBitsKernels(KernelRegistry& r);

// Registers `op_type` in domain ai.inferd for every opset, its type taken from input
// `type_input` (the weight-only ops of int4.cc and nbits.cc).
void RegisterInferdOp(KernelRegistry& r, const char* op_type, KernelFactory factory,
                      int type_input);

}  // namespace inferd::cpu
