// GraphPass: one rewrite of a Graph, e.g. folding BatchNormalization into the Conv before it.
//
// A pass is stateless (configured at construction) and rewrites the graph in place, keeping it
// valid: nodes in topological order, every value defined before use, graph input and output names
// unchanged, each intermediate value's model name kept where it survives. Cheap checks come first
// in each match so a pass over a graph with nothing to do costs one sweep.
//
// Passes are listed in one explicit order in pipeline.cc; there is no self-registration. Local
// rewrites (fusions, folds) are RewriteRules (rewrite_rule.h), applied by a RuleSweep pass.
#pragma once

#include <string_view>
#include <vector>

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
  // The names the optimization report counts this pass's rewrites under, in order: the pass's
  // own name, or (a RuleSweep) one per rule.
  virtual std::vector<std::string_view> CountedNames() const { return {Name()}; }
  // Run, with the rewrites counted per CountedNames() entry.
  virtual StatusOr<std::vector<int>> RunCounted(Graph& graph) const {
    ASSIGN_OR_RETURN(int fired, Run(graph));
    return std::vector<int>{fired};
  }
  // Whether the pass changed the graph.
  StatusOr<bool> Apply(Graph& graph) const {
    ASSIGN_OR_RETURN(int fired, Run(graph));
    return fired > 0;
  }
};

}  // namespace inferd
