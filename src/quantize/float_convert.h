// FP16 / BF16 weight storage (`inferd quantize --precision fp16|bf16`).
//
// FP16 and BF16 store the float32 weights of Conv, ConvTranspose, MatMul, Gemm and Gather tables
// in 16 bits (half the size) with a Cast back to float32 in front of each reader, so the model
// keeps FP32 inputs, outputs and compute and runs correctly anywhere; inferd folds the Casts at
// load time. BF16 needs opset >= 13 (Cast to/from bfloat16). Nodes named in
// QuantizeOptions::exclude keep float32 weights.
//
// BF16 also folds BatchNormalization into the convolutions first (basic optimizer level) and sets
// the model metadata "inferd.compute_precision" = "bf16": inferd then computes the convolutions
// with bf16 weights in bf16 (optimizer/bf16_compute.h; FP32 accumulation, FP32 at the chain's
// ends and in every other op). Other runtimes ignore the metadata and compute in FP32.
#pragma once

#include "common/status.h"
#include "graph/graph.h"
#include "quantize/quantizer.h"

namespace inferd::quantize {

// options.precision must be kFp16 or kBf16.
Status ConvertFloatPrecision(Model& model, const QuantizeOptions& options, QuantizeReport* report);

}  // namespace inferd::quantize
