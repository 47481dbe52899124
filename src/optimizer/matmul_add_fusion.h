// MatMulAddFusion: MatMul(A, B) → Add(constant C) becomes Gemm(A, B, C) (oneDNN adds the bias in
// the same pass over the output).
//
// Fires only when A and B are known to be 2-D (Gemm has no batch dims), the MatMul output is read
// by that Add alone (and is not a graph output), and C is a float32 constant of rank <= 2 that
// broadcasts to the [M, N] output without growing it ([N], [1, N], [M, N], [M, 1], [1], scalar).
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class MatMulAddFusion final : public RewriteRule {
 public:
  std::string_view Name() const override { return "MatMulAddFusion"; }
  std::vector<std::string> TargetOpTypes() const override { return {"MatMul"}; }
  bool Match(const GraphEditor& ed, const Node& node) const override;
  bool Rewrite(GraphEditor& ed, Node* node) const override;
};

}  // namespace inferd
