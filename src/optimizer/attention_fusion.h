// AttentionFusion: multi-head scaled dot-product attention, as BERT-style exporters write it,
// becomes one ai.inferd.Attention(q, k, v, mask) node (kernel: src/kernels/cpu/fused/attention.cc).
//
//   Qh = Transpose(Reshape(q, [B, S, H, D]), [0, 2, 1, 3])        (likewise Vh from v)
//   Kt = Transpose(Reshape(k, [B, S, H, D]), [0, 2, 3, 1])        (or Kh then [0, 1, 3, 2])
//   P  = Softmax(MatMul(Qh, Kt) / c [+ mask], axis=-1)            (or · c, or unscaled)
//   y  = Reshape(Transpose(MatMul(P, Vh), [0, 2, 1, 3]), [B, S, H·D])
//
// q, k, v are [B, S, H·D] (the projection outputs); the fused node produces y's name. H and D
// come from the head Reshapes' target shapes (a constant, or a Concat whose last two parts are
// constants: the dynamic-shape export). The shape arithmetic feeding the removed Reshapes goes
// with them. Fires only when every intermediate is read inside the pattern alone, the heads agree
// and q is float32.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class AttentionFusion final : public RewriteRule {
 public:
  std::string_view Name() const override { return "AttentionFusion"; }
  // The Softmax is the anchor; the match walks back to Q and K and forward to the head merge.
  std::vector<std::string> TargetOpTypes() const override { return {"Softmax"}; }
  bool Match(const GraphEditor& ed, const Node& sm) const override;
  bool Rewrite(GraphEditor& ed, Node* sm) const override;
};

}  // namespace inferd
