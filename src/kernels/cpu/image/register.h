// Registration of the image pre- and post-processing kernels (image/*.cc), the nodes of the
// built-in processing models (serving/processing_models.h). RegisterImageKernels is declared in
// kernels/cpu/register.h. This family is the only code that uses libjpeg and libpng.
#pragma once

#include "runtime/kernel_registry.h"

namespace inferd::cpu {

inline constexpr char kImageDomain[] = "ai.inferd";

void RegisterDecodeResizeCropKernels(KernelRegistry& r);  // decode_resize_crop.cc
void RegisterClassifyTopKKernels(KernelRegistry& r);      // classify_top_k.cc

}  // namespace inferd::cpu
