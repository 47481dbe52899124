// ConvMulAddFusion: Conv → Mul(constant) and Conv → Add(constant) fold into the Conv's weight and
// bias: Mul by c scales W[m] and B[m] by c[m]; Add of c adds c[m] to B[m]. Chains (Conv → Mul →
// Add, as left by exporters that decompose BatchNormalization) fold one step at a time.
//
// Fires only when the Conv output is read by that Mul/Add alone (and is not a graph output) and
// the constant is float32 and per-channel: broadcasting it against the Conv output [N, M, ...]
// leaves the shape unchanged and varies at most along the channel axis (shapes like [M, 1, 1],
// [1, M, 1, 1], [1] or a scalar).
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class ConvMulAddFusion final : public RewriteRule {
 public:
  std::string_view Name() const override { return "ConvMulAddFusion"; }
  std::vector<std::string> TargetOpTypes() const override { return {"Conv"}; }
  bool Match(const GraphEditor& ed, const Node& conv) const override;
  bool Rewrite(GraphEditor& ed, Node* conv) const override;
  // After each fold the Conv produces the Mul/Add's output: its new reader may fold next.
  bool RepeatOnAnchor() const override { return true; }
};

}  // namespace inferd
