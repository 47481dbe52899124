// DeadNodeElimination: removes nodes none of whose outputs is read (by a node, a subgraph or the
// graph outputs), then initializers nothing reads, then value_info entries of values that no
// longer exist. Runs last in each round of the pipeline, cleaning up after the other passes.
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class DeadNodeElimination final : public GraphPass {
 public:
  std::string_view Name() const override { return "DeadNodeElimination"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
