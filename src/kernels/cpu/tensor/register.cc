#include "kernels/cpu/tensor/register.h"

#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterTensorKernels(KernelRegistry& r) {
  RegisterShapeKernels(r);
  RegisterTransposeKernels(r);
  RegisterSliceKernels(r);
  RegisterGatherKernels(r);
  RegisterResizeKernels(r);
  RegisterTensorMiscKernels(r);
}

}  // namespace inferd::cpu
