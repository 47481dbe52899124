// LayerNormFusion: LayerNormalization decomposed over the last axis becomes one node:
//
//   m = ReduceMean(x, [-1]);  d = x - m;  v = ReduceMean(d², [-1]);   (d² as Pow(d, 2) or d·d)
//   y = d / Sqrt(v + eps) [· gamma] [+ beta]
//
// into the standard LayerNormalization(x, gamma, beta, axis=-1, epsilon) at opset >= 17, and into
// ai.inferd.LayerNormalization (same schema) below. gamma and beta (1-D constants; gamma defaults
// to ones) are optional in the pattern. Fires only when the intermediates are read inside the
// pattern alone, both ReduceMeans keep dims and reduce exactly the last axis, and eps is a
// constant.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class LayerNormFusion final : public RewriteRule {
 public:
  // `opset`: the model's standard-domain opset (LayerNormalization exists from 17).
  explicit LayerNormFusion(int64_t opset) : opset_(opset) {}
  std::string_view Name() const override { return "LayerNormFusion"; }
  // The first ReduceMean (the mean of x) is the anchor.
  std::vector<std::string> TargetOpTypes() const override { return {"ReduceMean"}; }
  bool Match(const GraphEditor& ed, const Node& mean) const override;
  bool Rewrite(GraphEditor& ed, Node* mean) const override;

 private:
  int64_t opset_;
};

}  // namespace inferd
