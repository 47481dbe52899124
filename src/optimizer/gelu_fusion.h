// GeluFusion: the decomposed GELU exporters write becomes one ai.inferd.Gelu(x) node
// (attribute approximate = "none" | "tanh", as ONNX opset-20 Gelu).
//
//   erf form:   x · 0.5 · (1 + Erf(x / √2))            (x / √2 may be x · (1/√2))
//   tanh form:  x · 0.5 · (1 + Tanh(√(2/π) · (x + 0.044715 · x³)))   (x³ as Pow(x, 3) or x·x·x)
//
// The final products are matched in the orders exporters use: (x · 0.5) · (1 + e),
// x · ((1 + e) · 0.5), (x · (1 + e)) · 0.5, with the operands of each Mul/Add either way round.
// Fires only when every intermediate is read by the pattern alone (not a graph output) and the
// constants match to 1e-3 relative.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class GeluFusion final : public RewriteRule {
 public:
  std::string_view Name() const override { return "GeluFusion"; }
  // The Erf (or Tanh) in the middle of the pattern is the anchor.
  std::vector<std::string> TargetOpTypes() const override { return {"Erf", "Tanh"}; }
  bool Match(const GraphEditor& ed, const Node& e) const override;
  bool Rewrite(GraphEditor& ed, Node* e) const override;
};

}  // namespace inferd
