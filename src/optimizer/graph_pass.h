// GraphPass: one rewrite of a Graph, e.g. folding BatchNormalization into the Conv before it.
//
// A pass is stateless (configured at construction) and rewrites the graph in place, keeping it
// valid: nodes in topological order, every value defined before use, graph input and output names
// unchanged, each intermediate value's model name kept where it survives. Cheap checks come first
// in each match so a pass over a graph with nothing to do costs one sweep.
//
// Passes are listed in one explicit order in pipeline.cc; there is no self-registration.
#pragma once

#include <string_view>

#include "common/status.h"
#include "graph/graph.h"

namespace inferd {

class GraphPass {
 public:
  virtual ~GraphPass() = default;
  virtual std::string_view Name() const = 0;
  // Rewrites `graph`; returns how many times the pass fired (0: the graph is unchanged). An error
  // means the graph is unusable (a pass validates before it edits, so this is an internal error).
  virtual StatusOr<int> Run(Graph& graph) const = 0;
  // Whether the pass changed the graph.
  StatusOr<bool> Apply(Graph& graph) const {
    ASSIGN_OR_RETURN(int fired, Run(graph));
    return fired > 0;
  }
};

}  // namespace inferd
