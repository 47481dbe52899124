#include "kernels/cpu/text/register.h"

#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterTextKernels(KernelRegistry& r) { RegisterStringNormalizerKernels(r); }

}  // namespace inferd::cpu
