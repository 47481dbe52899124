#include "optimizer/swiglu_fusion.h"

#include <vector>

#include "optimizer/fusion_util.h"
#include "optimizer/graph_edit.h"

namespace inferd {
namespace {

// A standard Mul reading exactly {x, y} in either order.
bool IsMulOf(const Node* n, const std::string& x, const std::string& y) {
  if (!IsStandardOp(n, "Mul") || n->inputs.size() != 2 || n->outputs.size() != 1) return false;
  return (n->inputs[0] == x && n->inputs[1] == y) || (n->inputs[0] == y && n->inputs[1] == x);
}

// The split into two equal halves along the last axis.
bool IsHalvingSplit(const GraphEditor& ed, const Node& n) {
  if (!IsStandardOp(&n, "Split") || n.inputs.size() != 2 || n.outputs.size() != 2) return false;
  const Tensor* sizes = ed.Constant(n.inputs[1]);
  if (!sizes || sizes->dtype() != DataType::kInt64 || sizes->NumElements() != 2) return false;
  const int64_t* s = sizes->data<int64_t>();
  if (s[0] != s[1] || s[0] <= 0) return false;
  int64_t axis = n.GetInt("axis", 0);
  if (axis < 0) return axis == -1;
  const std::optional<size_t> rank = ed.Rank(n.inputs[0]);
  return rank && axis == static_cast<int64_t>(*rank) - 1;
}

struct Match {
  Node *split, *sigmoid, *silu, *product;
  bool gate_first;
};

// The SiLU(g) x u chain hanging off `split` with g its output `gi`, or nullopt.
std::optional<Match> MatchChain(const GraphEditor& ed, Node* split, int gi) {
  const std::string& g = split->outputs[gi];
  const std::string& u = split->outputs[1 - gi];
  if (ed.IsGraphOutput(g)) return std::nullopt;
  const std::vector<Node*> readers = ed.Consumers(g);
  if (readers.size() != 2) return std::nullopt;
  Node* sigmoid = IsStandardOp(readers[0], "Sigmoid") ? readers[0] : readers[1];
  if (!IsStandardOp(sigmoid, "Sigmoid") || sigmoid->inputs.size() != 1) return std::nullopt;
  Node* silu = ed.SoleConsumer(sigmoid->outputs[0]);
  if (!IsMulOf(silu, g, sigmoid->outputs[0]) || (silu != readers[0] && silu != readers[1])) {
    return std::nullopt;
  }
  Node* product = ed.SoleConsumer(silu->outputs[0]);
  if (!IsMulOf(product, silu->outputs[0], u) || ed.SoleConsumer(u) != product) return std::nullopt;
  return Match{split, sigmoid, silu, product, gi == 0};
}

}  // namespace

StatusOr<int> SwiGluFusion::Run(Graph& graph) const {
  GraphEditor ed(graph);
  int fused = 0;
  std::vector<std::string> sizes;  // the removed Splits' size initializers
  for (Node* n : ed.Nodes()) {
    if (ed.IsRemoved(n) || !IsHalvingSplit(ed, *n)) continue;
    std::optional<Match> m = MatchChain(ed, n, 0);
    if (!m) m = MatchChain(ed, n, 1);
    if (!m) continue;
    const std::string x = n->inputs[0];
    const bool gate_first = m->gate_first;
    ed.EditNode(m->product, [&](Node& p) {
      p.op_type = "SwiGlu";
      p.domain = kInferdDomain;
      p.inputs = {x};
      p.attributes.clear();
      p.attributes["gate_first"] = IntAttr(gate_first ? 1 : 0);
    });
    ed.RemoveNode(m->silu);
    ed.RemoveNode(m->sigmoid);
    ed.RemoveNode(m->split);
    sizes.push_back(n->inputs[1]);
    ++fused;
  }
  RETURN_IF_ERROR(ed.Commit());
  for (const std::string& s : sizes) {
    bool used = graph.IsGraphOutput(s);
    for (const auto& node : graph.nodes) {
      for (const std::string& in : node->inputs) used = used || in == s;
    }
    if (!used) graph.initializers.erase(s);
  }
  return fused;
}

}  // namespace inferd
