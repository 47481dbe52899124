#include "kernels/cpu/cpu_provider.h"

#include <omp.h>

#include <algorithm>

#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/register.h"

namespace inferd {
namespace {

class CpuExecutionProvider final : public ExecutionProvider {
 public:
  CpuExecutionProvider() {
    cpu::RegisterElementwiseKernels(registry_);
    cpu::RegisterReductionKernels(registry_);
    cpu::RegisterTensorKernels(registry_);
    cpu::RegisterNnKernels(registry_);
    cpu::RegisterMathKernels(registry_);
    cpu::RegisterQuantizationKernels(registry_);
    cpu::RegisterObjectDetectionKernels(registry_);
    cpu::RegisterControlFlowKernels(registry_);
    cpu::RegisterFusedKernels(registry_);
    cpu::RegisterAttentionKernels(registry_);
    cpu::RegisterTextKernels(registry_);
    cpu::RegisterImageKernels(registry_);
    cpu::RegisterMoeKernels(registry_);
  }
  std::string_view Name() const override { return "cpu"; }
  const KernelRegistry& Registry() const override { return registry_; }
  // oneDNN primitives run on the thread count they were created with: the kernels' plan caches
  // key their primitives by it (onednn/dnnl_util.h, PrimitiveThreads).
  void SetIntraOpThreads(int threads) const override { omp_set_num_threads(std::max(1, threads)); }

 private:
  KernelRegistry registry_;
};

}  // namespace

std::shared_ptr<ExecutionProvider> CpuProvider() {
  static const std::shared_ptr<ExecutionProvider> provider =
      std::make_shared<CpuExecutionProvider>();
  return provider;
}

bool CpuInt8NeedsSevenBitWeights() {
  // A 7-bit weight is exact everywhere; a full-range one only where oneDNN has VNNI.
  static const bool needs = !cpu::DnnlInt8IsExact(
      DataType::kUInt8, Tensor::FromVector<int8_t>({int8_t{127}}, {1}));
  return needs;
}

}  // namespace inferd
