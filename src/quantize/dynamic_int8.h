// Dynamic INT8 for MatMul/Gemm (transformers): weights int8 symmetric per column, activations
// quantized at run time. Written with standard ONNX ops, as ONNX Runtime's dynamic quantizer does:
//
//   A ─ DynamicQuantizeLinear ─┬─ a_q ─┐
//                              ├─ a_zp ┤ MatMulInteger(a_q, W_int8, a_zp, 0) ─ Cast(float) ─ Mul ─
//                              Y └─ a_scale ─ Mul(w_scale[N]) ─────────────────────────────────┘
//   (Gemm: W transposed when transB; + Add(C) after.)
// One DynamicQuantizeLinear serves every MatMul reading the same A (Q, K and V projections).
// inferd runs MatMulInteger with a constant int8 B on oneDNN's int8 matmul.
#pragma once

#include "common/status.h"
#include "graph/graph.h"
#include "quantize/quantizer.h"

namespace inferd::quantize {

Status QuantizeDynamicInt8(Model& model, const QuantizeOptions& options, QuantizeReport* report);

}  // namespace inferd::quantize
