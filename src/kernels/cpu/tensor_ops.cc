#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterTensorKernels(KernelRegistry& r) { (void)r; }

}  // namespace inferd::cpu
