// ExecutionProvider: a device's allocator and kernels. The runtime only sees this interface; the
// concrete providers live with their kernels (CpuProvider() in src/kernels/cpu/cpu_provider.h;
// CUDA plugs in the same way) and are chosen by src/session.
#pragma once

#include <string_view>

#include "runtime/kernel_registry.h"

namespace inferd {

class ExecutionProvider {
 public:
  virtual ~ExecutionProvider() = default;
  virtual std::string_view Name() const = 0;
  virtual const KernelRegistry& Registry() const = 0;
  // Whether the provider has a kernel for this node at this opset (types unchecked).
  bool SupportsNode(const Node& node, int64_t opset) const;
  // Intra-op threads for the kernels the calling thread runs from now on (GraphExecutor narrows
  // them per step: ExecutorOptions::min_parallel_flops). The CPU provider sets the calling
  // thread's OpenMP thread count; the default ignores it.
  virtual void SetIntraOpThreads(int threads) const { (void)threads; }
};

}  // namespace inferd
