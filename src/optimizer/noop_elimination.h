// NoOpElimination: removes nodes whose output equals their input: Identity, inference-mode
// Dropout (mask unused), Transpose with the identity permutation, Cast to the input's type,
// Reshape/Expand to the input's own (known) shape, Tile with all repeats 1, single-input Concat.
// Readers of the output read the input; when the output is a graph output its name is kept by
// renaming the producer's output (or the node stays, when the input is a graph input/initializer).
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class NoOpElimination final : public GraphPass {
 public:
  std::string_view Name() const override { return "NoOpElimination"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
