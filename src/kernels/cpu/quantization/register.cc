#include "kernels/cpu/quantization/register.h"

#include <utility>

#include "kernels/cpu/register.h"

namespace inferd::cpu {

void RegisterQuantizationKernels(KernelRegistry& r) {
  RegisterQuantizeKernels(r);
  RegisterQuantConvKernels(r);
  RegisterQuantAddKernels(r);
  RegisterQuantPoolKernels(r);
  RegisterQuantInt4Kernels(r);
  RegisterQuantNBitsKernels(r);
}

void RegisterInferdOp(KernelRegistry& r, const char* op_type, KernelFactory factory,
                      int type_input) {
  KernelDef def;
  def.domain = "ai.inferd";
  def.op_type = op_type;
  def.factory = std::move(factory);
  def.type_input = type_input;
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
