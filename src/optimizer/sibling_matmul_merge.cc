#include "optimizer/sibling_matmul_merge.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "optimizer/fusion_util.h"
#include "optimizer/graph_edit.h"

namespace inferd {
namespace {

// The float32 [K, N] initializer a MatMul multiplies by, or null.
const Tensor* ConstantWeights(const Graph& g, const Node& n) {
  if (!IsStandardOp(&n, "MatMul") || n.inputs.size() != 2 || n.outputs.size() != 1) return nullptr;
  auto it = g.initializers.find(n.inputs[1]);
  if (it == g.initializers.end() || g.IsGraphInput(n.inputs[1])) return nullptr;
  const Tensor& w = it->second;
  if (w.dtype() != DataType::kFloat32 || w.rank() != 2 || w.NumElements() == 0) return nullptr;
  return &w;
}

// [K, sum N] from the group's weights, side by side.
Tensor Concatenate(const std::vector<const Tensor*>& ws) {
  const int64_t k = ws[0]->dim(0);
  int64_t total = 0;
  for (const Tensor* w : ws) total += w->dim(1);
  Tensor out = Tensor::Allocate(DataType::kFloat32, {k, total});
  float* dst = out.data<float>();
  for (int64_t r = 0; r < k; ++r) {
    for (const Tensor* w : ws) {
      const int64_t n = w->dim(1);
      std::memcpy(dst, w->data<float>() + r * n, n * sizeof(float));
      dst += n;
    }
  }
  return out;
}

// Replaces the group (same A, same K, two or more) with MatMul + Split.
void MergeGroup(Graph& g, const std::vector<Node*>& group) {
  GraphEditor names(g);
  std::vector<const Tensor*> ws;
  std::vector<int64_t> split;
  std::vector<std::string> outputs;
  for (Node* n : group) {
    ws.push_back(&g.initializers.at(n->inputs[1]));
    split.push_back(ws.back()->dim(1));
    outputs.push_back(n->outputs[0]);
  }
  const std::string a = group[0]->inputs[0];
  const std::string base = group[0]->name.empty() ? outputs[0] : group[0]->name;
  const std::string w = names.UniqueValueName(base + "/merged_weights");
  g.initializers.emplace(w, Concatenate(ws));
  const std::string sizes = names.UniqueValueName(base + "/merged_split");
  g.initializers.emplace(sizes,
                         Tensor::FromVector<int64_t>(split, {static_cast<int64_t>(split.size())}));
  const std::string y = names.UniqueValueName(base + "/merged");
  std::set<const Node*> removed(group.begin(), group.end());
  std::set<std::string> old_weights;
  for (Node* n : group) old_weights.insert(n->inputs[1]);
  std::erase_if(g.nodes, [&](const std::unique_ptr<Node>& n) { return removed.count(n.get()); });
  g.AddNode("MatMul", {a, w}, {y}, base + "/merged_matmul");
  Node* s = g.AddNode("Split", {y, sizes}, outputs, base + "/merged_split");
  s->attributes["axis"] = IntAttr(-1);
  for (const std::string& old : old_weights) {
    bool used = g.IsGraphOutput(old);
    for (const auto& n : g.nodes) {
      used = used || std::count(n->inputs.begin(), n->inputs.end(), old) > 0;
    }
    if (!used) g.initializers.erase(old);
  }
}

}  // namespace

StatusOr<int> SiblingMatMulMerge::Run(Graph& graph) const {
  // Groups by (A, K), in node order so the merged layout is deterministic.
  std::map<std::pair<std::string, int64_t>, std::vector<Node*>> groups;
  std::vector<std::pair<std::string, int64_t>> order;
  for (const auto& n : graph.nodes) {
    const Tensor* w = ConstantWeights(graph, *n);
    if (w == nullptr) continue;
    auto key = std::make_pair(n->inputs[0], w->dim(0));
    if (groups[key].empty()) order.push_back(key);
    groups[key].push_back(n.get());
  }
  int merged = 0;
  for (const auto& key : order) {
    const std::vector<Node*>& group = groups[key];
    if (group.size() < 2) continue;
    MergeGroup(graph, group);
    ++merged;
  }
  if (merged > 0) RETURN_IF_ERROR(graph.TopologicalSort());
  return merged;
}

}  // namespace inferd
