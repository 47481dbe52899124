// MatMulBiasFusion: MatMul(A, B) → Add(bias) becomes ai.inferd.FusedMatMul(A, B, bias) when A
// has rank >= 2 (its batch dims fold into M: the transformer projection [batch, seq, K] x [K, N]),
// B is 2-D and bias is a float32 constant of N elements with no dims beyond B's last one (so the
// Add does not broadcast the result to a higher rank). The 2-D A case is MatMulAddFusion's (Gemm).
//
// Does not fire when the MatMul output has another reader or is a graph output, or A is not
// float32.
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class MatMulBiasFusion final : public GraphPass {
 public:
  std::string_view Name() const override { return "MatMulBiasFusion"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
