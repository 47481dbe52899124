// Registration functions of the element-wise kernel files (elementwise/*.cc).
// RegisterElementwiseKernels (elementwise/register.cc, declared in kernels/cpu/register.h) calls
// all of them.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

void RegisterBinaryKernels(KernelRegistry& r);      // binary.cc
void RegisterVariadicKernels(KernelRegistry& r);    // variadic.cc (+ Where, PRelu)
void RegisterUnaryKernels(KernelRegistry& r);       // unary.cc
void RegisterActivationKernels(KernelRegistry& r);  // activation.cc
void RegisterCastKernels(KernelRegistry& r);        // cast.cc

}  // namespace inferd::cpu
