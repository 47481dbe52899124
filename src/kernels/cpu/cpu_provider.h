// The CPU execution provider: every kernel under src/kernels/cpu, registered in the order of
// register.h.
#pragma once

#include <memory>

#include "runtime/execution_provider.h"

namespace inferd {

// The process-wide CPU provider (created on first use; thread safe).
std::shared_ptr<ExecutionProvider> CpuProvider();

}  // namespace inferd
