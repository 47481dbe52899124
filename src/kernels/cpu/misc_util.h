// Registration hooks of the misc kernel files; RegisterMiscKernels (misc_ops.cc) calls them.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

void RegisterEinsumKernels(KernelRegistry& r);     // misc_einsum.cc
void RegisterDetectionKernels(KernelRegistry& r);  // misc_detection.cc: NonMaxSuppression, RoiAlign

}  // namespace inferd::cpu
