// ActivationFusion: Conv / Gemm / MatMul / FusedMatMul followed by an activation becomes one
// ai.inferd node whose "activation" (and "activation_params") attribute the kernel runs as a
// oneDNN eltwise post-op.
//
// Activations: Relu, LeakyRelu, Sigmoid, Tanh, Clip (constant bounds), HardSigmoid, HardSwish and
// ai.inferd.Gelu (from GeluFusion). Fires only when the producer's output is read by the
// activation alone (and is not a graph output), the producer has no activation yet, and the
// element type is float32. A residual input fused before (ResidualAddFusion) is added first, so
// Conv → Add → Relu keeps its order.
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class ActivationFusion final : public RewriteRule {
 public:
  // `opset`: the model's standard-domain opset (Clip's bounds are attributes before 11).
  explicit ActivationFusion(int64_t opset) : opset_(opset) {}
  std::string_view Name() const override { return "ActivationFusion"; }
  // The activation is the anchor; the rewrite edits its producer.
  std::vector<std::string> TargetOpTypes() const override;
  bool Match(const GraphEditor& ed, const Node& act) const override;
  bool Rewrite(GraphEditor& ed, Node* act) const override;

 private:
  int64_t opset_;
};

}  // namespace inferd
