#include "optimizer/layout_propagation.h"

#include <unordered_set>

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

bool IsCandidate(const GraphEditor& ed, const Node* n) {
  if (!IsStandardOp(n, "Conv") && !IsInferdOp(n, "Conv")) return false;
  if (n->outputs.size() != 1 || n->NumInputs() < 2) return false;
  const Tensor* w = ed.Constant(n->inputs[1]);
  if (w == nullptr || w->dtype() != DataType::kFloat32 || w->rank() != 4) return false;
  if (n->HasInput(2) && ed.Constant(n->inputs[2]) == nullptr) return false;
  return ed.graph().ValueType(n->inputs[0]) == DataType::kFloat32;
}

}  // namespace

StatusOr<int> LayoutPropagation::Run(Graph& graph) const {
  GraphEditor ed(graph);
  std::unordered_set<const Node*> candidates;
  for (Node* n : ed.Nodes()) {
    if (IsCandidate(ed, n)) candidates.insert(n);
  }
  // Values kept blocked: candidate outputs read only as X (input 0) or Z (input 3) of candidates.
  std::unordered_set<std::string> blocked;
  for (const Node* n : candidates) {
    const std::string& y = n->outputs[0];
    if (ed.IsGraphOutput(y)) continue;
    std::vector<Node*> readers = ed.Consumers(y);
    bool ok = !readers.empty();
    for (Node* r : readers) {
      if (!candidates.count(r)) {
        ok = false;
        break;
      }
      for (size_t i = 0; i < r->inputs.size(); ++i) {
        if (r->inputs[i] == y && i != 0 && i != 3) ok = false;
      }
    }
    if (ok) blocked.insert(y);
  }
  int fired = 0;
  for (Node* n : ed.Nodes()) {
    if (!candidates.count(n)) continue;
    const bool x = blocked.count(n->inputs[0]) > 0;
    const bool z = n->HasInput(3) && blocked.count(n->inputs[3]) > 0;
    const bool y = blocked.count(n->outputs[0]) > 0;
    if (!x && !z && !y) continue;
    ed.EditNode(n, [&](Node& node) {
      node.op_type = "BlockedConv";
      node.domain = kInferdDomain;
      node.attributes["x_blocked"] = IntAttr(x);
      node.attributes["z_blocked"] = IntAttr(z);
      node.attributes["y_blocked"] = IntAttr(y);
    });
    if (y) graph.value_info.erase(n->outputs[0]);
    ++fired;
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

}  // namespace inferd
