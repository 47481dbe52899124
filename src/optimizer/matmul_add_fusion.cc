#include "optimizer/matmul_add_fusion.h"

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

// Dim `i` of a value's declared shape, or -1 when unknown.
int64_t KnownDim(const Graph& g, const std::string& value, size_t i) {
  if (auto it = g.initializers.find(value); it != g.initializers.end()) {
    return static_cast<size_t>(it->second.rank()) > i ? it->second.dim(static_cast<int64_t>(i))
                                                      : -1;
  }
  const ValueInfo* vi = g.FindValueInfo(value);
  if (vi == nullptr || !vi->shape || vi->shape->size() <= i) return -1;
  return (*vi->shape)[i].value;
}

// Whether C broadcasts to [m, n] (-1: unknown) without changing it.
bool BiasFits(const Tensor& c, int64_t m, int64_t n) {
  if (c.rank() > 2) return false;
  int64_t c_m = c.rank() == 2 ? c.dim(0) : 1;
  int64_t c_n = c.rank() >= 1 ? c.dim(c.rank() - 1) : 1;
  return (c_m == 1 || (m >= 0 && c_m == m)) && (c_n == 1 || (n >= 0 && c_n == n));
}

}  // namespace

bool MatMulAddFusion::Match(const GraphEditor& ed, const Node& mm) const {
  return IsStandardOp(&mm, "MatMul") && mm.NumInputs() == 2 && mm.outputs.size() == 1;
}

bool MatMulAddFusion::Rewrite(GraphEditor& ed, Node* mm) const {
  const Graph& graph = ed.graph();
  const std::string a = mm->inputs[0], b = mm->inputs[1];
  if (ed.Rank(a) != std::optional<size_t>(2) || ed.Rank(b) != std::optional<size_t>(2)) {
    return false;
  }
  if (graph.ValueType(a) != DataType::kFloat32) return false;
  Node* add = ed.SoleConsumer(mm->outputs[0]);
  if (!IsStandardOp(add, "Add") || add->NumInputs() != 2) return false;
  const std::string bias = add->inputs[add->inputs[0] == mm->outputs[0] ? 1 : 0];
  const Tensor* c = ed.Constant(bias);
  if (c == nullptr || c->dtype() != DataType::kFloat32) return false;
  if (!BiasFits(*c, KnownDim(graph, a, 0), KnownDim(graph, b, 1))) return false;
  ed.EditNode(mm, [&](Node& n) {
    n.op_type = "Gemm";
    n.inputs = {a, b, bias};
    n.attributes.clear();
  });
  AbsorbConsumer(ed, mm, add);
  return true;
}

}  // namespace inferd
