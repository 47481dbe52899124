#include "optimizer/int8_layout.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "optimizer/fusion_util.h"
#include "optimizer/graph_edit.h"

namespace inferd {
namespace {

// How a node relates to the layout of its inputs.
struct Role {
  bool conv = false;            // input 0 may be either layout (2-D QLinearConv, int8 MaxPool)
  std::vector<size_t> follow;   // data inputs whose layout the output follows (all must agree)
};

bool ScalarConstant(const GraphEditor& ed, const Node& n, size_t i) {
  if (!n.HasInput(i)) return i == 2;  // zero point may be omitted
  const Tensor* t = ed.Constant(n.inputs[i]);
  return t != nullptr && t->NumElements() == 1;
}

Role RoleOf(const GraphEditor& ed, const Node& n) {
  Role r;
  if (n.outputs.size() != 1) return r;
  const bool std_domain = n.domain.empty() || n.domain == "ai.onnx";
  if (n.op_type == "QLinearConv" && (std_domain || n.domain == kInferdDomain)) {
    const Tensor* w = n.HasInput(3) ? ed.Constant(n.inputs[3]) : nullptr;
    if (w == nullptr || w->rank() != 4) return r;
    r.conv = true;
    if (n.HasInput(9)) r.follow = {9};
    return r;
  }
  if (n.domain == kInferdDomain && n.op_type == "MaxPool") {
    r.conv = true;
    return r;
  }
  if (std_domain && (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear") &&
      ScalarConstant(ed, n, 1) && ScalarConstant(ed, n, 2)) {
    r.follow = {0};
  } else if (n.domain == kInferdDomain && n.op_type == "DequantizeAdd" && n.NumInputs() == 4) {
    r.follow = {0, 3};
  }
  return r;
}

bool Follows(const Role& r, size_t i) {
  for (size_t f : r.follow) {
    if (f == i) return true;
  }
  return false;
}

}  // namespace

StatusOr<int> Int8LayoutPropagation::Run(Graph& graph) const {
  for (const auto& n : graph.nodes) {
    if (n->GetInt("y_channels_last", 0) != 0) return 0;  // already laid out
  }
  GraphEditor ed(graph);
  const std::vector<Node*> nodes = ed.Nodes();
  std::unordered_map<const Node*, Role> roles;
  for (Node* n : nodes) {
    Role r = RoleOf(ed, *n);
    if (r.conv || !r.follow.empty()) roles.emplace(n, std::move(r));
  }
  if (roles.empty()) return 0;
  // Forward: what could be NHWC (nodes are in topological order).
  std::set<std::string> nhwc;
  for (Node* n : nodes) {
    auto it = roles.find(n);
    if (it == roles.end()) continue;
    bool all = true;
    for (size_t i : it->second.follow) all = all && nhwc.count(n->inputs[i]) > 0;
    if (all) nhwc.insert(n->outputs[0]);
  }
  // Backward: keep a value NHWC only while some reader takes it so (and no subgraph captures it).
  auto reads_nhwc = [&](const Node* c, const std::string& v) {
    auto it = roles.find(c);
    if (it == roles.end()) return false;
    bool any = false;
    for (size_t i = 0; i < c->inputs.size(); ++i) {
      if (c->inputs[i] != v) continue;
      if (i == 0 && it->second.conv) {
        any = true;
      } else if (Follows(it->second, i) && nhwc.count(c->outputs[0])) {
        any = true;
      } else {
        return false;  // read in another role as well: treat the reader as NCHW
      }
    }
    return any;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = nhwc.begin(); it != nhwc.end();) {
      bool keep = !ed.IsGraphOutput(*it), captured = false;
      if (keep) {
        keep = false;
        for (const Node* c : ed.Consumers(*it)) {
          keep = keep || reads_nhwc(c, *it);
          // A subgraph capturing the value would need the Transpose inside it: stay NCHW.
          captured = captured || std::find(c->inputs.begin(), c->inputs.end(), *it) ==
                                     c->inputs.end();
        }
      }
      keep = keep && !captured;
      if (keep) {
        ++it;
      } else {
        it = nhwc.erase(it);
        changed = true;
      }
    }
  }
  if (nhwc.empty()) return 0;
  // NCHW readers of NHWC values get a Transpose (added after the edits below).
  std::vector<std::pair<std::string, std::vector<Node*>>> transposes;
  for (const std::string& v : nhwc) {
    std::vector<Node*> readers;
    for (Node* c : ed.Consumers(v)) {
      if (!reads_nhwc(c, v)) readers.push_back(c);
    }
    if (!readers.empty()) transposes.emplace_back(v, std::move(readers));
  }
  int fired = 0;
  for (Node* n : nodes) {
    auto it = roles.find(n);
    if (it == roles.end() || !it->second.conv) continue;
    const bool x = nhwc.count(n->inputs[0]) > 0;
    const bool y = nhwc.count(n->outputs[0]) > 0;
    if (!x && !y) continue;
    ed.EditNode(n, [&](Node& node) {
      node.domain = kInferdDomain;  // QLinearConv becomes ai.inferd.QLinearConv
      node.attributes["x_channels_last"] = IntAttr(x);
      node.attributes["y_channels_last"] = IntAttr(y);
    });
    ++fired;
  }
  for (const std::string& v : nhwc) graph.value_info.erase(v);
  RETURN_IF_ERROR(ed.Commit());
  for (auto& [v, readers] : transposes) {
    const std::string out = ed.UniqueValueName(v + "_nchw");
    Node* t = graph.AddNode("Transpose", {v}, {out}, v + "/to_nchw");
    t->attributes["perm"].type = Attribute::Type::kInts;
    t->attributes["perm"].ints = {0, 3, 1, 2};
    for (Node* r : readers) {
      for (std::string& in : r->inputs) {
        if (in == v) in = out;
      }
    }
    ++fired;
  }
  if (!transposes.empty()) RETURN_IF_ERROR(graph.TopologicalSort());
  return fired;
}

}  // namespace inferd
