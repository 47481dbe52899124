#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterMiscKernels(KernelRegistry& r) { (void)r; }

}  // namespace inferd::cpu
