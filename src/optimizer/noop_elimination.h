// NoOpElimination: removes nodes whose output equals their input: Identity, inference-mode
// Dropout (mask unused), Transpose with the identity permutation, Cast to the input's type,
// Reshape/Expand to the input's own (known) shape, Tile with all repeats 1, single-input Concat.
// Readers of the output read the input; when the output is a graph output its name is kept by
// renaming the producer's output (or the node stays, when the input is a graph input/initializer).
#pragma once

#include "optimizer/rewrite_rule.h"

namespace inferd {

class NoOpElimination final : public RewriteRule {
 public:
  std::string_view Name() const override { return "NoOpElimination"; }
  std::vector<std::string> TargetOpTypes() const override {
    return {"Identity", "Dropout", "Transpose", "Cast", "Concat", "Reshape", "Expand", "Tile"};
  }
  bool Match(const GraphEditor& ed, const Node& node) const override;
  bool Rewrite(GraphEditor& ed, Node* node) const override;
};

}  // namespace inferd
