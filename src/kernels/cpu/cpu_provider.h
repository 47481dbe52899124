// The CPU execution provider: every kernel of src/kernels/cpu in one registry, behind the
// runtime's ExecutionProvider interface. The runtime knows no concrete provider; whoever builds
// executors (src/session, constant folding through the optimizer's caller, inferd inspect) asks
// for this one and hands it down.
#pragma once

#include <memory>

#include "runtime/execution_provider.h"

namespace inferd {

// The process-wide CPU provider (kernels registered once, on first use; thread-safe).
std::shared_ptr<ExecutionProvider> CpuProvider();

}  // namespace inferd
