#include "optimizer/sibling_matmul_merge.h"

#include <fmt/format.h>

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

// ai.inferd.MatMulNBits (kernels/cpu/quantization/nbits.cc) with constant packed weights: rows
// are output columns, so a merge stacks the rows of the packed weights, scales and zero points.
bool IsNBits(const Graph& g, const Node& n) {
  if (n.domain != "ai.inferd" || n.op_type != "MatMulNBits" || n.outputs.size() != 1 ||
      n.inputs.size() < 3 || n.inputs.size() > 4) {
    return false;
  }
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (!g.initializers.count(n.inputs[i]) || g.IsGraphInput(n.inputs[i])) return false;
  }
  // Rank 2 with N rows each (else the kernel refuses the node when it loads; it is left alone).
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    const Tensor& t = g.initializers.at(n.inputs[i]);
    if (t.rank() != 2 || t.dim(0) != n.GetInt("N", 0)) return false;
  }
  return true;
}

// Everything but N must agree: A, K, bits, block size, zero points or none, row sizes.
std::string NBitsKey(const Graph& g, const Node& n) {
  std::string key = n.inputs[0] + "|" + std::to_string(n.GetInt("K", 0)) + "|" +
                    std::to_string(n.GetInt("bits", 0)) + "|" +
                    std::to_string(n.GetInt("block_size", 0));
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    const Tensor& t = g.initializers.at(n.inputs[i]);
    key += fmt::format("|{}:{}", static_cast<int>(t.dtype()), t.dim(1));
  }
  return key;
}

// The tensors' rows one after the other (same dtype, same row size).
Tensor StackRows(const std::vector<const Tensor*>& ts) {
  int64_t rows = 0;
  for (const Tensor* t : ts) rows += t->dim(0);
  Tensor out = Tensor::Allocate(ts[0]->dtype(), {rows, ts[0]->dim(1)});
  char* dst = static_cast<char*>(out.raw_data());
  for (const Tensor* t : ts) {
    std::memcpy(dst, t->raw_data(), t->ByteSize());
    dst += t->ByteSize();
  }
  return out;
}

void MergeNBitsGroup(Graph& g, const std::vector<Node*>& group) {
  GraphEditor names(g);
  std::vector<int64_t> split;
  std::vector<std::string> outputs;
  std::set<std::string> old;
  for (Node* n : group) {
    split.push_back(n->GetInt("N", 0));
    outputs.push_back(n->outputs[0]);
    old.insert(n->inputs.begin() + 1, n->inputs.end());
  }
  Node* first = group[0];
  const std::string base = first->name.empty() ? outputs[0] : first->name;
  std::vector<std::string> inputs = {first->inputs[0]};
  for (size_t i = 1; i < first->inputs.size(); ++i) {
    std::vector<const Tensor*> parts;
    for (Node* n : group) parts.push_back(&g.initializers.at(n->inputs[i]));
    inputs.push_back(names.UniqueValueName(base + "/merged_weights_" + std::to_string(i)));
    g.initializers.emplace(inputs.back(), StackRows(parts));
  }
  const std::string sizes = names.UniqueValueName(base + "/merged_split");
  g.initializers.emplace(sizes,
                         Tensor::FromVector<int64_t>(split, {static_cast<int64_t>(split.size())}));
  const std::string y = names.UniqueValueName(base + "/merged");
  std::map<std::string, Attribute> attrs = first->attributes;
  int64_t total = 0;
  for (int64_t n : split) total += n;
  attrs["N"] = IntAttr(total);
  std::set<const Node*> removed(group.begin(), group.end());
  std::erase_if(g.nodes, [&](const std::unique_ptr<Node>& n) { return removed.count(n.get()); });
  Node* mm = g.AddNode("MatMulNBits", inputs, {y}, base + "/merged_matmul");
  mm->domain = "ai.inferd";
  mm->attributes = std::move(attrs);
  Node* s = g.AddNode("Split", {y, sizes}, outputs, base + "/merged_split");
  s->attributes["axis"] = IntAttr(-1);
  for (const std::string& w : old) {
    bool used = g.IsGraphOutput(w);
    for (const auto& n : g.nodes) used = used || std::count(n->inputs.begin(), n->inputs.end(), w);
    if (!used) g.initializers.erase(w);
  }
}

}  // namespace

StatusOr<int> SiblingMatMulMerge::Run(Graph& graph) const {
  int merged_nbits = 0;
  {
    std::map<std::string, std::vector<Node*>> groups;
    std::vector<std::string> order;
    for (const auto& n : graph.nodes) {
      if (!IsNBits(graph, *n)) continue;
      const std::string key = NBitsKey(graph, *n);
      if (groups[key].empty()) order.push_back(key);
      groups[key].push_back(n.get());
    }
    for (const auto& key : order) {
      if (groups[key].size() < 2) continue;
      MergeNBitsGroup(graph, groups[key]);
      ++merged_nbits;
    }
  }
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
  if (merged + merged_nbits > 0) RETURN_IF_ERROR(graph.TopologicalSort());
  return merged + merged_nbits;
}

}  // namespace inferd
