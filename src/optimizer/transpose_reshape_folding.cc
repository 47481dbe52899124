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

}  // namespace

StatusOr<int> TransposeReshapeFolding::Run(Graph& graph) const {
  GraphEditor ed(graph);
  int fired = 0;
  for (Node* outer : ed.Nodes()) {
    if (ed.IsRemoved(outer) || outer->inputs.empty()) continue;
    const bool transpose = IsStandardOp(outer, "Transpose");
    if (!transpose && !IsStandardOp(outer, "Reshape")) continue;
    Node* inner = ed.Producer(outer->inputs[0]);
    if (inner == nullptr || inner->op_type != outer->op_type || inner->domain != outer->domain ||
        ed.SoleConsumer(outer->inputs[0]) != outer) {
      continue;
    }
    if (transpose) {
      const std::vector<int64_t> p1 = inner->GetInts("perm"), p2 = outer->GetInts("perm");
      if (p1.empty() || p1.size() != p2.size()) continue;  // default perms need the rank
      std::vector<int64_t> p(p2.size());
      bool valid = true;
      for (size_t i = 0; i < p2.size(); ++i) {
        valid = valid && p2[i] >= 0 && p2[i] < static_cast<int64_t>(p1.size());
        if (valid) p[i] = p1[p2[i]];
      }
      if (!valid) continue;
      const std::string x = inner->inputs[0];
      ed.RemoveNode(inner);
      ed.EditNode(outer, [&](Node& n) {
        n.inputs[0] = x;
        Attribute perm;
        perm.type = Attribute::Type::kInts;
        perm.ints = p;
        n.attributes["perm"] = perm;
      });
    } else {
      if (outer->NumInputs() != 2 || !IsConstantShapeWithoutZeros(ed, outer->inputs[1])) continue;
      const std::string x = inner->inputs[0];
      ed.RemoveNode(inner);
      ed.EditNode(outer, [&](Node& n) { n.inputs[0] = x; });
    }
    ++fired;
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

}  // namespace inferd
