#include "optimizer/matmul_bias_fusion.h"

#include "optimizer/fusion_util.h"

namespace inferd {

bool MatMulBiasFusion::Match(const GraphEditor& ed, const Node& mm) const {
  return IsStandardOp(&mm, "MatMul") && mm.NumInputs() == 2 && mm.outputs.size() == 1;
}

bool MatMulBiasFusion::Rewrite(GraphEditor& ed, Node* mm) const {
  const std::string a = mm->inputs[0], b = mm->inputs[1];
  std::optional<size_t> a_rank = ed.Rank(a);
  std::optional<Shape> b_shape = ed.StaticShape(b);
  if (!a_rank || *a_rank < 2 || !b_shape || b_shape->size() != 2) return false;
  if (ed.graph().ValueType(a) != DataType::kFloat32) return false;
  Node* add = ed.SoleConsumer(mm->outputs[0]);
  if (!IsStandardOp(add, "Add") || add->NumInputs() != 2) return false;
  const std::string bias = OtherInput(*add, mm->outputs[0]);
  const Tensor* c = bias.empty() ? nullptr : ed.Constant(bias);
  if (c == nullptr || c->dtype() != DataType::kFloat32 || c->NumElements() != (*b_shape)[1] ||
      static_cast<size_t>(c->rank()) > *a_rank) {
    return false;
  }
  bool row = true;  // all dims but the last are 1
  for (int64_t i = 0; i + 1 < c->rank(); ++i) row = row && c->dim(i) == 1;
  if (!row || (c->rank() > 0 && c->dim(c->rank() - 1) != (*b_shape)[1])) return false;
  ed.EditNode(mm, [&](Node& n) {
    n.op_type = "FusedMatMul";
    n.domain = kInferdDomain;
    n.inputs = {a, b, bias};
  });
  AbsorbConsumer(ed, mm, add);
  return true;
}

}  // namespace inferd
