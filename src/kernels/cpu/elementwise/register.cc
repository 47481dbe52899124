// Element-wise kernel families; each lives in its own file in this folder.
#include "kernels/cpu/elementwise/register.h"

#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterElementwiseKernels(KernelRegistry& r) {
  RegisterBinaryKernels(r);
  RegisterVariadicKernels(r);
  RegisterUnaryKernels(r);
  RegisterActivationKernels(r);
  RegisterCastKernels(r);
}

}  // namespace inferd::cpu
