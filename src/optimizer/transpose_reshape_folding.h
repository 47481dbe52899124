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

#include "optimizer/graph_pass.h"

namespace inferd {

class TransposeReshapeFolding final : public GraphPass {
 public:
  std::string_view Name() const override { return "TransposeReshapeFolding"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
