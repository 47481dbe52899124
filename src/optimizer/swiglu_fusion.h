// Fuses a SwiGLU feed-forward's activation after the gate/up merge (sibling_matmul_merge.h):
//
//   Split(X [..., 2F], axis -1, [F, F]) -> g, u;  Sigmoid(g) -> s;  Mul(g, s) -> a;  Mul(a, u) -> h
//
// becomes ai.inferd.SwiGlu(X) -> h (attribute gate_first: 1 when g is the first half), one pass
// over X instead of a Split copying both halves, a Sigmoid and two Muls, each writing an
// intermediate of F columns per row (kernels/cpu/fused/swiglu.cc). Either operand order of each
// Mul matches; the intermediates must have no other readers and not be graph outputs. Not part of
// the general pipeline: the decoder runner applies it after SiblingMatMulMerge
// (src/generation/model_runner.cc).
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class SwiGluFusion final : public GraphPass {
 public:
  std::string_view Name() const override { return "SwiGluFusion"; }
  // Returns the number of fused activations.
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
