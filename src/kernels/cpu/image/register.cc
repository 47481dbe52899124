#include "kernels/cpu/image/register.h"

#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterImageKernels(KernelRegistry& r) {
  RegisterDecodeResizeCropKernels(r);
  RegisterClassifyTopKKernels(r);
}

}  // namespace inferd::cpu
