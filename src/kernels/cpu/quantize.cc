#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterQuantizationKernels(KernelRegistry& r) { (void)r; }

}  // namespace inferd::cpu
