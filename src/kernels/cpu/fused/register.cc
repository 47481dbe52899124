// RegisterFusedKernels: inferd's fused ops (domain ai.inferd).
//
// ai.inferd.Conv / Gemm / MatMul are the standard ops plus the "activation" attribute (and, for
// Conv, an optional residual input Z added before the activation); ai.inferd.LayerNormalization is
// the opset-17 op for models of older opsets. Their kernels are the standard ones (nn/ and math/,
// which read those extras), so their factories are taken from a scratch registry rather than
// duplicated.
#include "kernels/cpu/fused/register.h"

#include "kernels/cpu/math/register.h"
#include "kernels/cpu/nn/register.h"
#include "kernels/cpu/register.h"

namespace inferd::cpu {
namespace {

// Registers the standard kernel of `op_type` (as found at `opset`) under ai.inferd, all opsets.
void Alias(KernelRegistry& r, const KernelRegistry& standard, const std::string& op_type,
           int64_t opset) {
  Node probe;
  probe.op_type = op_type;
  StatusOr<const KernelDef*> def = standard.Find(probe, opset, {});
  if (!def.ok()) return;  // the standard kernel is missing: the fused op is unsupported too
  KernelDef alias = **def;
  alias.domain = kInferdDomain;
  alias.since_version = 1;
  alias.until_version = kOpsetMax;
  r.Register(std::move(alias));
}

}  // namespace

void RegisterFusedKernels(KernelRegistry& r) {
  KernelRegistry standard;
  RegisterConvKernels(standard);
  RegisterMatMulKernels(standard);
  RegisterNormKernels(standard);
  Alias(r, standard, "Conv", 17);
  Alias(r, standard, "Gemm", 17);
  Alias(r, standard, "MatMul", 17);
  Alias(r, standard, "LayerNormalization", 17);
  RegisterFusedMatMulKernel(r);
  RegisterGeluKernel(r);
  RegisterAttentionKernel(r);
  RegisterBlockedConvKernel(r);
  RegisterSwiGluKernel(r);
}

}  // namespace inferd::cpu
