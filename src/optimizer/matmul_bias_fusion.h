// MatMulBiasFusion: MatMul(A, B) → Add(bias) becomes ai.inferd.FusedMatMul(A, B, bias) when A
// has rank >= 2 (its batch dims fold into M: the transformer projection [batch, seq, K] x [K, N]),
// B is 2-D and bias is a float32 constant of N elements with no dims beyond B's last one (so the
// Add does not broadcast the result to a higher rank). The 2-D A case is MatMulAddFusion's (Gemm).
//
// Does not fire when the MatMul output has another reader or is a graph output, or A is not
// float32.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class MatMulBiasFusion final : public RewriteRule {
 public:
  std::string_view Name() const override { return "MatMulBiasFusion"; }
  std::vector<std::string> TargetOpTypes() const override { return {"MatMul"}; }
  bool Match(const GraphEditor& ed, const Node& node) const override;
  bool Rewrite(GraphEditor& ed, Node* node) const override;
};

}  // namespace inferd
