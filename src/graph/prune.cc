#include "graph/prune.h"

#include <unordered_set>

namespace inferd {
namespace {

// Every value of `graph` something reads: node inputs, values captured by subgraphs, outputs.
std::unordered_set<std::string> ReadValues(const Graph& graph) {
  std::unordered_set<std::string> read;
  for (const auto& n : graph.nodes) {
    read.insert(n->inputs.begin(), n->inputs.end());
    for (const auto& [key, attr] : n->attributes) {
      std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
      if (attr.g) subs.push_back(attr.g);
      for (const auto& sub : subs) {
        for (auto& v : sub->OuterScopeValues()) read.insert(std::move(v));
      }
    }
  }
  for (const auto& vi : graph.outputs) read.insert(vi.name);
  return read;
}

bool Prunable(const Graph& graph, const std::unordered_set<std::string>& read,
              const std::string& name) {
  return !read.count(name) && !graph.IsGraphInput(name);
}

}  // namespace

size_t PruneUnusedInitializers(Graph& graph) {
  const std::unordered_set<std::string> read = ReadValues(graph);
  return std::erase_if(graph.initializers,
                       [&](const auto& entry) { return Prunable(graph, read, entry.first); });
}

size_t PruneUnusedInitializers(Graph& graph, const std::vector<std::string>& candidates) {
  const std::unordered_set<std::string> read = ReadValues(graph);
  size_t removed = 0;
  for (const std::string& name : candidates) {
    if (Prunable(graph, read, name)) removed += graph.initializers.erase(name);
  }
  return removed;
}

}  // namespace inferd
