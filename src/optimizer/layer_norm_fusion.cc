#include "optimizer/layer_norm_fusion.h"

#include <algorithm>

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

// Whether `n` is ReduceMean over exactly the last axis of its input, keeping dims.
bool IsLastAxisMean(const GraphEditor& ed, const Node* n) {
  if (!IsStandardOp(n, "ReduceMean") || n->NumInputs() != 1 || n->GetInt("keepdims", 1) != 1) {
    return false;
  }
  const std::vector<int64_t> axes = n->GetInts("axes");
  std::optional<size_t> rank = ed.Rank(n->inputs[0]);
  if (axes.size() != 1) return false;
  return axes[0] == -1 || (rank && axes[0] == static_cast<int64_t>(*rank) - 1);
}

// A 1-D float32 constant `other` input of a binary `op` reading `v`, or empty.
std::string VectorOperand(const GraphEditor& ed, const Node* n, const char* op,
                          const std::string& v) {
  if (!IsStandardOp(n, op)) return "";
  const std::string o = OtherInput(*n, v);
  const Tensor* t = o.empty() ? nullptr : ed.Constant(o);
  if (t == nullptr || t->dtype() != DataType::kFloat32 || t->rank() != 1) return "";
  return o;
}

// The mean-variance part: d = x - mean, v = ReduceMean(d²), y = d / Sqrt(v + eps). Appends the
// nodes (mean, sub, square, var, add eps, sqrt, div) and returns the eps; nullopt without a match.
std::optional<float> MatchNormalization(const GraphEditor& ed, Node* mean,
                                        std::vector<Node*>* nodes) {
  const std::string x = mean->inputs[0];
  Node* sub = ed.SoleConsumer(mean->outputs[0]);
  if (!IsStandardOp(sub, "Sub") || sub->NumInputs() != 2 || sub->inputs[0] != x ||
      sub->inputs[1] != mean->outputs[0]) {
    return std::nullopt;
  }
  const std::string d = sub->outputs[0];
  std::vector<Node*> readers = ed.Consumers(d);
  if (readers.size() != 2 || ed.IsGraphOutput(d)) return std::nullopt;
  Node* sq = nullptr;
  Node* div = nullptr;
  for (Node* r : readers) {
    if (IsStandardOp(r, "Div") && r->inputs[0] == d) {
      div = r;
    } else if ((IsStandardOp(r, "Pow") && r->inputs[0] == d &&
                IsScalarNear(ed, r->inputs[1], 2.f, 0.f)) ||
               (IsStandardOp(r, "Mul") && r->inputs.size() == 2 && r->inputs[0] == d &&
                r->inputs[1] == d)) {
      sq = r;
    }
  }
  if (sq == nullptr || div == nullptr || div->NumInputs() != 2) return std::nullopt;
  Node* var = ed.SoleConsumer(sq->outputs[0]);
  if (!IsLastAxisMean(ed, var)) return std::nullopt;
  Node* add_eps = ed.SoleConsumer(var->outputs[0]);
  if (!IsStandardOp(add_eps, "Add")) return std::nullopt;
  std::optional<float> eps = ScalarConstant(ed, OtherInput(*add_eps, var->outputs[0]));
  if (!eps) return std::nullopt;
  Node* sqrt = ed.SoleConsumer(add_eps->outputs[0]);
  if (!IsStandardOp(sqrt, "Sqrt") || ed.SoleConsumer(sqrt->outputs[0]) != div ||
      div->inputs[1] != sqrt->outputs[0]) {
    return std::nullopt;
  }
  nodes->insert(nodes->end(), {mean, sub, sq, var, add_eps, sqrt, div});
  return eps;
}

}  // namespace

bool LayerNormFusion::Match(const GraphEditor& ed, const Node& mean) const {
  return IsLastAxisMean(ed, &mean);
}

bool LayerNormFusion::Rewrite(GraphEditor& ed, Node* mean) const {
  const std::string x = mean->inputs[0];
  if (ed.graph().ValueType(x) != DataType::kFloat32) return false;
  std::vector<Node*> nodes;
  std::optional<float> eps = MatchNormalization(ed, mean, &nodes);
  if (!eps) return false;
  Node* div = nodes.back();
  Node* out = div;
  std::string gamma, beta;
  Node* mul = ed.SoleConsumer(div->outputs[0]);
  gamma = VectorOperand(ed, mul, "Mul", div->outputs[0]);
  if (!gamma.empty()) {
    nodes.push_back(mul);
    out = mul;
    Node* add = ed.SoleConsumer(mul->outputs[0]);
    beta = VectorOperand(ed, add, "Add", mul->outputs[0]);
    if (!beta.empty()) {
      nodes.push_back(add);
      out = add;
    }
  }
  if (gamma.empty()) {
    // No scale in the pattern: LayerNormalization needs one of the normalized size.
    std::optional<Shape> xs = ed.StaticShape(x);
    if (!xs || xs->empty()) return false;
    Tensor ones = Tensor::Allocate(DataType::kFloat32, {xs->back()});
    std::fill(ones.data<float>(), ones.data<float>() + xs->back(), 1.f);
    gamma = ed.AddInitializer(div->name + "/ones", std::move(ones));
  }
  for (Node* n : nodes) {
    if (n != out) ed.RemoveNode(n);
  }
  ed.EditNode(out, [&](Node& n) {
    n.op_type = "LayerNormalization";
    n.domain = opset_ >= 17 ? "" : kInferdDomain;
    n.inputs = {x, gamma};
    if (!beta.empty()) n.inputs.push_back(beta);
    n.attributes.clear();
    Attribute axis, epsilon;
    axis.type = Attribute::Type::kInt;
    axis.i = -1;
    epsilon.type = Attribute::Type::kFloat;
    epsilon.f = *eps;
    n.attributes["axis"] = axis;
    n.attributes["epsilon"] = epsilon;
  });
  return true;
}

}  // namespace inferd
