// QdqFusion: the int8 QDQ patterns `inferd quantize` writes become integer operators.
//
//   DQ(x) → Conv(W = DQ(int8), B = DQ(int32)?) [→ Relu] → Q   ⇒  QLinearConv
//   DQ(x) → MatMul(B = DQ(int8) constant 2-D)   [→ Relu] → Q   ⇒  QLinearMatMul
//   DQ(x) → Add(·, float b of the same shape)   [→ Relu]       ⇒  ai.inferd.DequantizeAdd
//                                                                  (residual joins, one pass)
//   QLinearConv → DequantizeAdd(·, its y_scale, y_zp, b)    ⇒  ai.inferd.QLinearConv with Z = b
//                                                                  (the join as conv post-ops)
//   DQ(x) → MaxPool → Q(same scale, zero point)              ⇒  ai.inferd.MaxPool on x (int8)
//
// Consecutive quantized layers then pass uint8/int8 tensors to each other directly (the DQ → Q
// pairs between them lose their readers and are removed by dead-node elimination), and QLinearConv
// runs on oneDNN's int8 convolution. A Relu between the op and the Q is absorbed when the Q's zero
// point is the type's minimum (0 for uint8, -128 for int8): saturation then clips at zero exactly
// as the Relu would. The bias is re-quantized to int32 with scale x_scale * w_scale (it is exact
// when it was written that way). Fires only when every scale and zero point is a constant, the
// weight zero points are 0, activations are per tensor, and each intermediate value has the next
// node as its sole reader.
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class QdqFusion final : public GraphPass {
 public:
  std::string_view Name() const override { return "QdqFusion"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
