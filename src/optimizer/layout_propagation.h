// LayoutPropagation (level "all"): activations between convolutions stay in oneDNN's blocked
// layout (nChw16c) instead of being reordered to NCHW after every Conv and back before the next.
//
// Every 2-D float32 Conv with constant weights (standard, or ai.inferd.Conv from the extended
// fusions) is a candidate. A candidate's output is kept blocked when it is not a graph output and
// every reader is a candidate reading it as its input X or residual Z. Candidates touching a
// blocked value become ai.inferd.BlockedConv with x_blocked / z_blocked / y_blocked attributes;
// the reorders at the chain's ends (the first Conv's input, the last one's output before a pool)
// happen inside those kernels, so no reorder nodes are needed. Declared shapes of blocked values
// are dropped (their tensors are [N, round16(C), H, W]).
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class LayoutPropagation final : public GraphPass {
 public:
  std::string_view Name() const override { return "LayoutPropagation"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
