#include "optimizer/matmul_add_fusion.h"

#include "optimizer/graph_edit.h"

namespace inferd {
namespace {

bool IsStandard(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

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

StatusOr<int> MatMulAddFusion::Run(Graph& graph) const {
  GraphEditor ed(graph);
  int fired = 0;
  for (Node* mm : ed.Nodes()) {
    if (mm->op_type != "MatMul" || !IsStandard(*mm) || mm->NumInputs() != 2 ||
        mm->outputs.size() != 1) {
      continue;
    }
    const std::string& a = mm->inputs[0];
    const std::string& b = mm->inputs[1];
    if (ed.Rank(a) != std::optional<size_t>(2) || ed.Rank(b) != std::optional<size_t>(2)) continue;
    if (graph.ValueType(a) != DataType::kFloat32) continue;
    Node* add = ed.SoleConsumer(mm->outputs[0]);
    if (add == nullptr || add->op_type != "Add" || !IsStandard(*add) || add->NumInputs() != 2) {
      continue;
    }
    const std::string& bias = add->inputs[add->inputs[0] == mm->outputs[0] ? 1 : 0];
    const Tensor* c = ed.Constant(bias);
    if (c == nullptr || c->dtype() != DataType::kFloat32) continue;
    if (!BiasFits(*c, KnownDim(graph, a, 0), KnownDim(graph, b, 1))) continue;
    ed.EditNode(mm, [&](Node& n) {
      n.op_type = "Gemm";
      n.inputs = {a, b, bias};
      n.attributes.clear();
    });
    std::string old_out = mm->outputs[0];
    ed.RemoveNode(add);
    ed.RenameValue(old_out, add->outputs[0]);
    ++fired;
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

}  // namespace inferd
