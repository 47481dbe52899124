#include "kernels/cpu/math/register.h"

#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterMathKernels(KernelRegistry& r) {
  RegisterMatMulKernels(r);
  RegisterMathOpsKernels(r);
  RegisterEinsumKernels(r);
}

}  // namespace inferd::cpu
