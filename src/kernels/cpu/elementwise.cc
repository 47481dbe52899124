#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterElementwiseKernels(KernelRegistry& r) { (void)r; }

}  // namespace inferd::cpu
