// ResidualAddFusion: Add(Conv(...), Z) → ai.inferd.Conv(X, W, B, Z) and
// Add(FusedMatMul / MatMul(A, B), Z) → ai.inferd.FusedMatMul(A, B, bias, Z): the residual
// (skip-connection) Add runs inside the producer, as oneDNN's sum post-op (Conv) or binary-add
// post-op (MatMul), before any activation that ActivationFusion attaches later.
//
// Fires only when Z has the same declared shape as the producer's output (same rank, dims equal
// as numbers or as the same symbolic name; no broadcasting), the producer's output is read by the
// Add alone and is not a graph output, the producer has no activation or residual yet, and the
// type is float32. The fused node takes the Add's place in the order (Z may be computed after the
// producer, as on ResNet's projection shortcut) and its output name.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class ResidualAddFusion final : public RewriteRule {
 public:
  std::string_view Name() const override { return "ResidualAddFusion"; }
  std::vector<std::string> TargetOpTypes() const override { return {"Add"}; }
  bool Match(const GraphEditor& ed, const Node& node) const override;
  bool Rewrite(GraphEditor& ed, Node* node) const override;
};

}  // namespace inferd
