#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterReductionKernels(KernelRegistry& r) { (void)r; }

}  // namespace inferd::cpu
