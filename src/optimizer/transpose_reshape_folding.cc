#include "optimizer/transpose_reshape_folding.h"

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

bool IsConstantShapeWithoutZeros(const GraphEditor& ed, const std::string& v) {
  const Tensor* t = ed.Constant(v);
  if (t == nullptr || t->dtype() != DataType::kInt64 || t->rank() != 1) return false;
  for (int64_t i = 0; i < t->NumElements(); ++i) {
    if (t->data<int64_t>()[i] == 0) return false;
  }
  return true;
}

// The perm of Transpose(Transpose(x, inner), outer) as one Transpose; nullopt for default perms
// (they need the rank) or invalid ones.
std::optional<std::vector<int64_t>> ComposedPerm(const Node& inner, const Node& outer) {
  const std::vector<int64_t> p1 = inner.GetInts("perm"), p2 = outer.GetInts("perm");
  if (p1.empty() || p1.size() != p2.size()) return std::nullopt;
  std::vector<int64_t> p(p2.size());
  for (size_t i = 0; i < p2.size(); ++i) {
    if (p2[i] < 0 || p2[i] >= static_cast<int64_t>(p1.size())) return std::nullopt;
    p[i] = p1[p2[i]];
  }
  return p;
}

}  // namespace

bool TransposeReshapeFolding::Match(const GraphEditor& ed, const Node& outer) const {
  return !outer.inputs.empty() &&
         (IsStandardOp(&outer, "Transpose") || IsStandardOp(&outer, "Reshape"));
}

bool TransposeReshapeFolding::Rewrite(GraphEditor& ed, Node* outer) const {
  Node* inner = ed.Producer(outer->inputs[0]);
  if (inner == nullptr || inner->op_type != outer->op_type || inner->domain != outer->domain ||
      ed.SoleConsumer(outer->inputs[0]) != outer) {
    return false;
  }
  const std::string x = inner->inputs[0];
  if (outer->op_type == "Reshape") {
    if (outer->NumInputs() != 2 || !IsConstantShapeWithoutZeros(ed, outer->inputs[1])) {
      return false;
    }
    ed.RemoveNode(inner);
    ed.EditNode(outer, [&](Node& n) { n.inputs[0] = x; });
    return true;
  }
  std::optional<std::vector<int64_t>> p = ComposedPerm(*inner, *outer);
  if (!p) return false;
  ed.RemoveNode(inner);
  ed.EditNode(outer, [&](Node& n) {
    n.inputs[0] = x;
    Attribute perm;
    perm.type = Attribute::Type::kInts;
    perm.ints = *p;
    n.attributes["perm"] = perm;
  });
  return true;
}

}  // namespace inferd
