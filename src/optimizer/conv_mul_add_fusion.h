// ConvMulAddFusion: Conv → Mul(constant) and Conv → Add(constant) fold into the Conv's weight and
// bias: Mul by c scales W[m] and B[m] by c[m]; Add of c adds c[m] to B[m]. Chains (Conv → Mul →
// Add, as left by exporters that decompose BatchNormalization) fold one step at a time.
//
// Fires only when the Conv output is read by that Mul/Add alone (and is not a graph output) and
// the constant is float32 and per-channel: broadcasting it against the Conv output [N, M, ...]
// leaves the shape unchanged and varies at most along the channel axis (shapes like [M, 1, 1],
// [1, M, 1, 1], [1] or a scalar).
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class ConvMulAddFusion final : public GraphPass {
 public:
  std::string_view Name() const override { return "ConvMulAddFusion"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
