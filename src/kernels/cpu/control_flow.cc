#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterControlFlowKernels(KernelRegistry& r) { (void)r; }

}  // namespace inferd::cpu
