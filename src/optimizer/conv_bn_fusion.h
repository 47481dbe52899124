// ConvBnFusion: Conv → BatchNormalization (inference) becomes one Conv with rescaled weights and
// bias:  s = scale / sqrt(var + eps);  W' = W · s[oc];  B' = (B - mean) · s + bn_bias.
//
// Fires only when the Conv output is read by that BatchNormalization alone (and is not a graph
// output), the Conv weight/bias and all four BN parameters are float32 constants of matching
// size, and the BN is in inference mode with its optional outputs unused. The folded weights are
// new initializers ("<conv>/W_bn_folded"); the Conv takes over the BN's output name.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class ConvBnFusion final : public RewriteRule {
 public:
  std::string_view Name() const override { return "ConvBnFusion"; }
  std::vector<std::string> TargetOpTypes() const override { return {"Conv"}; }
  bool Match(const GraphEditor& ed, const Node& conv) const override;
  bool Rewrite(GraphEditor& ed, Node* conv) const override;
};

}  // namespace inferd
