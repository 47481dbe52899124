// CommonSubexpressionElimination: when two nodes compute the same op (type, domain, attributes) on
// the same inputs, readers of the second read the first's outputs and the second goes. Skips
// nodes with subgraphs, random or stateful ops, and duplicates whose outputs are graph outputs
// (their names must stay). Nodes are visited in order, so repeated chains collapse in one sweep.
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class CommonSubexpressionElimination final : public GraphPass {
 public:
  std::string_view Name() const override { return "CommonSubexpressionElimination"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
