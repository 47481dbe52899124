// DepthwiseFusion (level "all", after LayoutPropagation): a 1x1 BlockedConv whose blocked output
// feeds only a 3x3 depthwise BlockedConv (pad 1, stride 1 or 2, no residual) becomes one
// BlockedConv computing both — MobileNet's expand + depthwise pair:
//
//   BlockedConv(X, W1x1, B1; act) -> T -> BlockedConv(T, Wdw[M,1,3,3], Bdw; group M, act2) -> Y
//   =>  BlockedConv(X, W1x1, B1, "", Wdw, Bdw; act, dw_stride, dw_activation=act2) -> Y
//
// The kernel uses oneDNN's fused depthwise post-op, so the expanded tensor T (the widest
// activation of the block) is never written to memory; see src/kernels/cpu/fused/conv_blocked.cc.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class DepthwiseFusion final : public RewriteRule {
 public:
  std::string_view Name() const override { return "DepthwiseFusion"; }
  // The 1x1 BlockedConv is the anchor.
  std::vector<std::string> TargetOpTypes() const override { return {"BlockedConv"}; }
  bool Match(const GraphEditor& ed, const Node& pw) const override;
  bool Rewrite(GraphEditor& ed, Node* pw) const override;
};

}  // namespace inferd
