#include "optimizer/residual_add_fusion.h"

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

// Whether `p` can absorb a residual Add; MatMul needs a 2-D B (what FusedMatMul takes).
bool CanTakeResidual(const GraphEditor& ed, const Node* p) {
  if (p == nullptr || p->outputs.size() != 1 || p->HasAttribute("activation")) return false;
  if (IsStandardOp(p, "Conv") || IsInferdOp(p, "Conv")) return p->NumInputs() <= 3;
  if (IsInferdOp(p, "FusedMatMul")) return p->NumInputs() <= 3;
  if (IsStandardOp(p, "MatMul")) {
    std::optional<size_t> a_rank = ed.Rank(p->inputs[0]);
    return p->NumInputs() == 2 && a_rank && *a_rank >= 2 && ed.Rank(p->inputs[1]) == 2u;
  }
  return false;
}

}  // namespace

bool ResidualAddFusion::Match(const GraphEditor& ed, const Node& add) const {
  return IsStandardOp(&add, "Add") && add.NumInputs() == 2 && add.inputs[0] != add.inputs[1] &&
         add.outputs.size() == 1;
}

bool ResidualAddFusion::Rewrite(GraphEditor& ed, Node* add) const {
  const Graph& graph = ed.graph();
  if (graph.ValueType(add->outputs[0]) != DataType::kFloat32 &&
      graph.ValueType(add->inputs[0]) != DataType::kFloat32) {
    return false;
  }
  for (size_t side = 0; side < 2; ++side) {
    const std::string y = add->inputs[side], z = add->inputs[1 - side];
    Node* p = ed.Producer(y);
    if (!CanTakeResidual(ed, p) || ed.SoleConsumer(y) != add) continue;
    if (!SameDeclaredShape(graph, y, z)) continue;
    std::vector<std::string> inputs = p->inputs;
    inputs.resize(3);  // omitted bias stays an empty name
    inputs.push_back(z);
    const bool conv = p->op_type == "Conv";
    Node fused = *p;
    ed.RemoveNode(p);
    ed.EditNode(add, [&](Node& n) {
      n.name = fused.name;
      n.op_type = conv ? "Conv" : "FusedMatMul";
      n.domain = kInferdDomain;
      n.inputs = inputs;
      n.attributes = fused.attributes;
    });
    return true;
  }
  return false;
}

}  // namespace inferd
