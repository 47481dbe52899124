// ExecutionProvider: a device's allocator and kernels. The CPU provider comes first; CUDA plugs in
// the same way (src/kernels/cuda, built with -DINFERD_CUDA=ON).
#pragma once

#include <memory>
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
};

// The process-wide CPU provider (kernels registered once, on first use). Defined in
// src/kernels/cpu/cpu_provider.cc.
std::shared_ptr<ExecutionProvider> CpuProvider();

}  // namespace inferd
