#include "optimizer/dead_node_elimination.h"

#include <unordered_set>

#include "graph/prune.h"
#include "optimizer/graph_edit.h"

namespace inferd {

StatusOr<int> DeadNodeElimination::Run(Graph& graph) const {
  GraphEditor ed(graph);
  int fired = 0;
  // Reverse order: removing a node releases its inputs, so a whole dead chain goes in one sweep.
  std::vector<Node*> nodes = ed.Nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    bool used = false;
    for (const auto& o : n->outputs) used = used || (!o.empty() && ed.IsUsed(o));
    if (used) continue;
    ed.RemoveNode(n);
    ++fired;
  }
  RETURN_IF_ERROR(ed.Commit());

  fired += static_cast<int>(PruneUnusedInitializers(graph));

  // Stale shape information is harmless to run but confuses readers of the saved model.
  std::unordered_set<std::string> produced;
  for (const auto& n : graph.nodes) produced.insert(n->outputs.begin(), n->outputs.end());
  for (auto it = graph.value_info.begin(); it != graph.value_info.end();) {
    if (!produced.count(it->first) || graph.IsInitializer(it->first)) {
      it = graph.value_info.erase(it);
    } else {
      ++it;
    }
  }
  return fired;
}

}  // namespace inferd
