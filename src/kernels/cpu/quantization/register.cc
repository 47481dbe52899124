#include "kernels/cpu/quantization/register.h"

#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterQuantizationKernels(KernelRegistry& r) {
  RegisterQuantizeKernels(r);
  RegisterQuantConvKernels(r);
  RegisterQuantAddKernels(r);
  RegisterQuantPoolKernels(r);
  RegisterQuantInt4Kernels(r);
  RegisterQuantNBitsKernels(r);
}

}  // namespace inferd::cpu
