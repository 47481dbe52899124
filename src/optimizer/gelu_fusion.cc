#include "optimizer/gelu_fusion.h"

#include <algorithm>
#include <cmath>

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

// x for `n` = Div(x, √2) or Mul(x, 1/√2) (either order for Mul); empty otherwise.
std::string ErfArgument(const GraphEditor& ed, const Node* n) {
  if (IsStandardOp(n, "Div") && n->NumInputs() == 2 &&
      IsScalarNear(ed, n->inputs[1], std::sqrt(2.f))) {
    return n->inputs[0];
  }
  if (IsStandardOp(n, "Mul") && n->NumInputs() == 2) {
    for (size_t i = 0; i < 2; ++i) {
      if (IsScalarNear(ed, n->inputs[1 - i], 1.f / std::sqrt(2.f))) return n->inputs[i];
    }
  }
  return "";
}

// The input of a Mul whose other input is the constant `c`, if `n` is one.
std::string MulByConstant(const GraphEditor& ed, const Node* n, float c) {
  if (!IsStandardOp(n, "Mul") || n->NumInputs() != 2) return "";
  for (size_t i = 0; i < 2; ++i) {
    if (IsScalarNear(ed, n->inputs[1 - i], c)) return n->inputs[i];
  }
  return "";
}

// Whether `v` is x³: Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x). Appends the nodes.
bool IsCube(const GraphEditor& ed, const std::string& v, const std::string& x,
            std::vector<Node*>* nodes) {
  Node* p = ed.Producer(v);
  if (IsStandardOp(p, "Pow") && p->NumInputs() == 2 && p->inputs[0] == x &&
      IsScalarNear(ed, p->inputs[1], 3.f)) {
    nodes->push_back(p);
    return true;
  }
  if (!IsStandardOp(p, "Mul") || p->NumInputs() != 2) return false;
  const std::string sq = OtherInput(*p, x);
  Node* s = sq.empty() ? nullptr : ed.Producer(sq);
  if (!IsStandardOp(s, "Mul") || s->NumInputs() != 2 || s->inputs[0] != x || s->inputs[1] != x) {
    return false;
  }
  nodes->push_back(p);
  nodes->push_back(s);
  return true;
}

// x for the tanh argument √(2/π) · (x + 0.044715 · x³); appends the nodes.
std::string TanhArgument(const GraphEditor& ed, const Node* n, std::vector<Node*>* nodes) {
  const std::string inner = MulByConstant(ed, n, std::sqrt(2.f / static_cast<float>(M_PI)));
  Node* add = inner.empty() ? nullptr : ed.Producer(inner);
  if (!IsStandardOp(add, "Add") || add->NumInputs() != 2) return "";
  for (size_t i = 0; i < 2; ++i) {
    const std::string x = add->inputs[i];
    Node* scaled = ed.Producer(add->inputs[1 - i]);
    const std::string cube = MulByConstant(ed, scaled, 0.044715f);
    std::vector<Node*> found = {const_cast<Node*>(n), add, scaled};
    if (!cube.empty() && IsCube(ed, cube, x, &found)) {
      nodes->insert(nodes->end(), found.begin(), found.end());
      return x;
    }
  }
  return "";
}

// From e = Erf(...) or Tanh(...) of x: matches 1 + e and the products with x and 0.5. Returns the
// node producing the GELU output, appending the matched nodes; null when it does not match.
Node* MatchTail(const GraphEditor& ed, Node* e, const std::string& x, std::vector<Node*>* nodes) {
  Node* one = ed.SoleConsumer(e->outputs[0]);
  if (!IsStandardOp(one, "Add") || !IsScalarNear(ed, OtherInput(*one, e->outputs[0]), 1.f)) {
    return nullptr;
  }
  Node* m1 = ed.SoleConsumer(one->outputs[0]);
  if (!IsStandardOp(m1, "Mul")) return nullptr;
  const std::string o = OtherInput(*m1, one->outputs[0]);
  if (o.empty()) return nullptr;
  nodes->insert(nodes->end(), {e, one, m1});
  if (IsScalarNear(ed, o, 0.5f)) {  // x · ((1 + e) · 0.5)
    Node* m2 = ed.SoleConsumer(m1->outputs[0]);
    if (!IsStandardOp(m2, "Mul") || OtherInput(*m2, m1->outputs[0]) != x) return nullptr;
    nodes->push_back(m2);
    return m2;
  }
  if (o == x) {  // (x · (1 + e)) · 0.5
    Node* m2 = ed.SoleConsumer(m1->outputs[0]);
    if (!IsStandardOp(m2, "Mul") || !IsScalarNear(ed, OtherInput(*m2, m1->outputs[0]), 0.5f)) {
      return nullptr;
    }
    nodes->push_back(m2);
    return m2;
  }
  Node* half = SoleProducer(ed, o, "Mul");  // (x · 0.5) · (1 + e)
  if (half == nullptr || MulByConstant(ed, half, 0.5f) != x) return nullptr;
  nodes->push_back(half);
  return m1;
}

// Whether every intermediate (each node's output but `out`'s) is read only inside the pattern.
bool Contained(const GraphEditor& ed, const std::vector<Node*>& nodes, const Node* out) {
  for (Node* n : nodes) {
    if (n == out) continue;
    for (Node* c : ed.Consumers(n->outputs[0])) {
      if (std::find(nodes.begin(), nodes.end(), c) == nodes.end()) return false;
    }
    if (ed.IsGraphOutput(n->outputs[0])) return false;
  }
  return true;
}

}  // namespace

bool GeluFusion::Match(const GraphEditor& ed, const Node& e) const {
  return (IsStandardOp(&e, "Erf") || IsStandardOp(&e, "Tanh")) && e.inputs.size() == 1;
}

bool GeluFusion::Rewrite(GraphEditor& ed, Node* e) const {
  const bool erf = e->op_type == "Erf";
  Node* arg = ed.Producer(e->inputs[0]);
  if (arg == nullptr || ed.SoleConsumer(e->inputs[0]) != e) return false;
  std::vector<Node*> nodes;
  std::string x;
  if (erf) {
    x = ErfArgument(ed, arg);
    nodes.push_back(arg);
  } else {
    x = TanhArgument(ed, arg, &nodes);
  }
  if (x.empty()) return false;
  Node* out = MatchTail(ed, e, x, &nodes);
  if (out == nullptr || !Contained(ed, nodes, out)) return false;
  if (ed.graph().ValueType(x) == DataType::kFloat64) return false;
  for (Node* n : nodes) {
    if (n != out) ed.RemoveNode(n);
  }
  ed.EditNode(out, [&](Node& n) {
    n.op_type = "Gelu";
    n.domain = kInferdDomain;
    n.inputs = {x};
    n.attributes.clear();
    if (!erf) {
      Attribute a;
      a.type = Attribute::Type::kString;
      a.s = "tanh";
      n.attributes["approximate"] = a;
    }
  });
  return true;
}

}  // namespace inferd
