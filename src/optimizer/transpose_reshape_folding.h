// TransposeReshapeFolding: chains of data-movement ops collapse into one.
//
//   Transpose(Transpose(x, p1), p2) → Transpose(x, p) with p[i] = p1[p2[i]] (NoOpElimination then
//   drops it when p is the identity);
//   Reshape(Reshape(x, s1), s2)     → Reshape(x, s2) when s2 is a constant without 0 entries (a 0
//   would copy a dim of the intermediate shape, which differs).
//
// Fires only when the inner node's output is read by the outer one alone and is not a graph
// output.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class TransposeReshapeFolding final : public RewriteRule {
 public:
  std::string_view Name() const override { return "TransposeReshapeFolding"; }
  // The outer node of the chain is the anchor.
  std::vector<std::string> TargetOpTypes() const override { return {"Transpose", "Reshape"}; }
  bool Match(const GraphEditor& ed, const Node& outer) const override;
  bool Rewrite(GraphEditor& ed, Node* outer) const override;
};

}  // namespace inferd
