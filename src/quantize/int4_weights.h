// INT4 weight-only quantization (`inferd quantize --precision int4` of a model file).
//
// MatMul (and Gemm with transA = 0, alpha = 1) with a constant float32 2-D weight becomes
// ai.inferd.MatMulNBits with bits = 4 (+ Add for a Gemm bias, beta = 1); Gather of a constant
// float32 2-D table along axis 0 (embeddings) becomes ai.inferd.GatherNBits. Weights are symmetric
// int4 in groups of QuantizeOptions::int4_block_size (32, 64 or 128) consecutive values along the
// reduction dimension (K) or the embedding dimension, in the layout and with the kernels of
// kernels/cpu/quantization/nbits_gemm.h (the decode product never expands the weights; the
// batched one dequantizes 16 rows at a time into PanelGemm). Activations stay float32. The
// result is not loadable by runtimes without these ai.inferd ops. (Decoder folders:
// quantize/nbits_weights.h, which also writes INT8 and asymmetric weights.)
//
// Files written before MatMulNBits hold ai.inferd.MatMulInt4/GatherInt4 (nibble pairs, low
// first, scale max|w| / 7); the kernels still run them, and PackInt4 writes that format.
#pragma once

#include "common/status.h"
#include "graph/graph.h"
#include "quantize/quantizer.h"

namespace inferd::quantize {

Status QuantizeInt4Weights(Model& model, const QuantizeOptions& options, QuantizeReport* report);

// The MatMulInt4/GatherInt4 format: packs `w` (float32 [rows, cols]) as int4 blocks along cols: packed uint8 [rows, ceil(cols/2)]
// and scales float32 [rows, ceil(cols/block)]. Exposed for tests.
void PackInt4(const Tensor& w, int64_t block, Tensor* packed, Tensor* scales);

}  // namespace inferd::quantize
