#include "kernels/cpu/nn/register.h"

#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterNnKernels(KernelRegistry& r) {
  RegisterConvKernels(r);
  RegisterPoolKernels(r);
  RegisterSoftmaxKernels(r);
  RegisterNormKernels(r);
}

}  // namespace inferd::cpu
