// Element-wise kernel families; each lives in its own elementwise_*.cc file.
#include "kernels/cpu/elementwise_util.h"
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
