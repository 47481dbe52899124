// ShapePropagation: fills in the declared shapes ONNX shape inference left unknown, so the fusions
// after it can check ranks and equal shapes on dynamic-shape exports (BERT: a Slice with computed
// bounds leaves every later value without a shape in onnx 1.12).
//
// It propagates symbolic dims forward, in graph order, through the ops transformer and CNN
// exports are made of: element-wise ops (broadcasting; an unknown dim against a known dim d != 1
// is taken as d, which is what a valid model implies), shape-preserving ops, MatMul and
// FusedMatMul, Gather, Slice, Transpose, and Reshape to a constant or to a Concat of constants
// and Shape(x)[i] dims. It only adds value_info for values that have none; it never edits nodes,
// so it reports 0 rewrites (the pipeline's rounds do not repeat for it).
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class ShapePropagation final : public GraphPass {
 public:
  std::string_view Name() const override { return "ShapePropagation"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
