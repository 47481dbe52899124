#include "optimizer/noop_elimination.h"

#include "optimizer/graph_edit.h"

namespace inferd {
namespace {

bool AllOnes(const Tensor& t) {
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (t.GetAsInt64(i) != 1) return false;
  }
  return true;
}

bool IsIntegerTensor(const Tensor* t) { return t != nullptr && IsInteger(t->dtype()); }

// Whether Reshape(x, target) keeps x's shape `in` (0 copies a dim unless allowzero, -1 infers).
bool ReshapeKeepsShape(const Shape& in, const Tensor& target, bool allowzero) {
  if (target.NumElements() != static_cast<int64_t>(in.size())) return false;
  int64_t known = 1;
  int infer = -1;
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t d = target.GetAsInt64(static_cast<int64_t>(i));
    if (d == 0 && !allowzero) d = in[i];
    if (d == -1) {
      if (infer >= 0) return false;
      infer = static_cast<int>(i);
      continue;
    }
    if (d < 0) return false;
    out[i] = d;
    known *= d;
  }
  if (infer >= 0) {
    if (known == 0) return false;
    out[infer] = NumElements(in) / known;
  }
  return out == in;
}

// Whether broadcasting `in` with `shape` (Expand) yields `in`.
bool ExpandKeepsShape(const Shape& in, const Tensor& shape) {
  int64_t n = shape.NumElements();
  if (n > static_cast<int64_t>(in.size())) return false;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = shape.GetAsInt64(n - 1 - i);
    int64_t have = in[in.size() - 1 - i];
    if (d != 1 && d != have) return false;
  }
  return true;
}

bool IsNoOp(const GraphEditor& ed, const Node& n) {
  const std::string& op = n.op_type;
  const std::string& x = n.inputs.empty() ? std::string() : n.inputs[0];
  if (x.empty() || n.outputs.empty() || n.outputs[0].empty()) return false;
  if (op == "Identity") return true;
  if (op == "Dropout") {
    if (n.outputs.size() > 1 && !n.outputs[1].empty() && ed.IsUsed(n.outputs[1])) return false;
    if (!n.HasInput(2)) return true;  // training_mode defaults to false
    const Tensor* training = ed.Constant(n.inputs[2]);
    return training != nullptr && training->NumElements() == 1 && training->GetAsInt64(0) == 0;
  }
  if (op == "Transpose") {
    if (const Attribute* perm = n.FindAttribute("perm")) {
      for (size_t i = 0; i < perm->ints.size(); ++i) {
        if (perm->ints[i] != static_cast<int64_t>(i)) return false;
      }
      return true;
    }
    std::optional<size_t> rank = ed.Rank(x);
    return rank && *rank <= 1;  // the default perm reverses the dims
  }
  if (op == "Cast") {
    DataType from = ed.graph().ValueType(x);
    return from != DataType::kUndefined && n.HasAttribute("to") &&
           static_cast<int64_t>(from) == n.GetInt("to", 0);
  }
  if (op == "Concat") return n.NumInputs() == 1;
  if (op != "Reshape" && op != "Expand" && op != "Tile") return false;
  std::optional<Shape> in_shape = ed.StaticShape(x);
  if (!in_shape) return false;
  const Tensor* arg = n.inputs.size() > 1 ? ed.Constant(n.inputs[1]) : nullptr;
  if (!IsIntegerTensor(arg)) return false;
  if (op == "Reshape") return ReshapeKeepsShape(*in_shape, *arg, n.GetInt("allowzero", 0) != 0);
  if (op == "Expand") return ExpandKeepsShape(*in_shape, *arg);
  return arg->NumElements() == static_cast<int64_t>(in_shape->size()) && AllOnes(*arg);
}

}  // namespace

bool NoOpElimination::Match(const GraphEditor& ed, const Node& node) const {
  return node.domain.empty() || node.domain == "ai.onnx";
}

bool NoOpElimination::Rewrite(GraphEditor& ed, Node* node) const {
  return IsNoOp(ed, *node) && ed.BypassNode(node, node->inputs[0], node->outputs[0]);
}

}  // namespace inferd
