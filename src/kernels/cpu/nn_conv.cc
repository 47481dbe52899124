#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterNnKernels(KernelRegistry& r) { (void)r; }

}  // namespace inferd::cpu
