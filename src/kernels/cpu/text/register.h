// Registration of the string-processing kernels (text/*.cc). RegisterTextKernels is declared in
// kernels/cpu/register.h. (String support of the data-movement ops, Cast and Equal lives with
// those ops: util/string_index.h, elementwise/cast.cc, elementwise/binary.cc.)
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

void RegisterStringNormalizerKernels(KernelRegistry& r);  // string_normalizer.cc

}  // namespace inferd::cpu
