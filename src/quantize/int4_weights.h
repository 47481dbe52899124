// INT4 weight-only quantization (`inferd quantize --precision int4`).
//
// MatMul (and Gemm with transA = 0, alpha = 1) with a constant float32 2-D weight becomes
// ai.inferd.MatMulInt4 (+ Add for a Gemm bias, beta = 1); Gather of a constant float32 2-D table
// along axis 0 (embeddings) becomes ai.inferd.GatherInt4. Weights are symmetric int4 in blocks of
// QuantizeOptions::int4_block_size (32, 64 or 128) consecutive values along the reduction
// dimension (K) or the embedding dimension: scale = max|w| / 7, nibble = round(w / scale) + 8,
// two per byte, low nibble first. Activations stay float32; the kernels
// (kernels/cpu/quantization/int4.cc) dequantize on the fly. The result is not loadable by
// runtimes without these ai.inferd ops.
#pragma once

#include "common/status.h"
#include "graph/graph.h"
#include "quantize/quantizer.h"

namespace inferd::quantize {

Status QuantizeInt4Weights(Model& model, const QuantizeOptions& options, QuantizeReport* report);

// Packs `w` (float32 [rows, cols]) as int4 blocks along cols: packed uint8 [rows, ceil(cols/2)]
// and scales float32 [rows, ceil(cols/block)]. Exposed for tests.
void PackInt4(const Tensor& w, int64_t block, Tensor* packed, Tensor* scales);

}  // namespace inferd::quantize
