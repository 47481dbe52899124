// Int8LayoutPropagation (level "all"): int8 activations between quantized convolutions stay in
// NHWC ("channels last", the layout oneDNN's int8 convolutions compute in) instead of being
// reordered from NCHW before every QLinearConv and back after it.
//
// Convolutions: QLinearConv (standard, or ai.inferd.QLinearConv from QdqFusion) with a constant
// rank-4 weight, and QdqFusion's int8 ai.inferd.MaxPool. They read either layout
// (x_channels_last) and write NHWC. Layout-neutral ops pass
// NHWC through when all their data inputs are NHWC: QuantizeLinear / DequantizeLinear with
// per-tensor parameters, ai.inferd.DequantizeAdd, and the residual Z → output of a fused
// ai.inferd.QLinearConv. A value stays NHWC only if some reader takes it as NHWC (a convolution's
// x, or a neutral op whose output is NHWC) and it is not a graph output; any other reader (a
// pool, a Gemm) gets a Transpose to NCHW, shared by all such readers of that value.
//
// Touched convolutions become ai.inferd.QLinearConv with x_channels_last / y_channels_last (the
// MaxPool gets the same attributes); NHWC values hold [N, H, W, C] tensors and their declared
// shapes are dropped. Runs once: a graph that already has a y_channels_last node is left alone.
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class Int8LayoutPropagation final : public GraphPass {
 public:
  std::string_view Name() const override { return "Int8LayoutPropagation"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
