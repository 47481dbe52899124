#include "optimizer/bf16_compute.h"

#include <cstring>
#include <unordered_set>

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

bool IsBf16Exact(const Tensor& w) {
  if (w.dtype() != DataType::kFloat32) return false;
  for (float v : w.values<float>()) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    if ((bits & 0xffffu) != 0) return false;
  }
  return true;
}

// Sets an int attribute; returns whether it changed (so a second run reports 0).
bool SetFlag(GraphEditor& ed, Node* n, const char* key, bool on) {
  if (n->GetInt(key, 0) == static_cast<int64_t>(on)) return false;
  ed.EditNode(n, [&](Node& node) { node.attributes[key] = IntAttr(on); });
  return true;
}

}  // namespace

bool Bf16Compute::Requested(const Model& model) {
  auto it = model.metadata.find(kComputePrecisionKey);
  return it != model.metadata.end() && it->second == "bf16";
}

StatusOr<int> Bf16Compute::Run(Graph& graph) const {
  GraphEditor ed(graph);
  std::unordered_set<const Node*> bf16;
  for (Node* n : ed.Nodes()) {
    // (a depthwise-fused pair, inputs 4 and 5, stays FP32)
    if (!IsInferdOp(n, "BlockedConv") || n->NumInputs() < 2 || n->HasInput(4)) continue;
    if (n->GetInt("compute_bf16", 0) != 0) {
      bf16.insert(n);
      continue;
    }
    const Tensor* w = ed.Constant(n->inputs[1]);
    if (w != nullptr && IsBf16Exact(*w)) bf16.insert(n);
  }
  // FusedMatMuls with a constant bf16 B compute in bf16 too (float32 in and out).
  int fired = 0;
  for (Node* n : ed.Nodes()) {
    if (!IsInferdOp(n, "FusedMatMul") || n->NumInputs() < 2) continue;
    const Tensor* b = ed.Constant(n->inputs[1]);
    if (b != nullptr && b->rank() == 2 && IsBf16Exact(*b)) {
      fired += SetFlag(ed, n, "compute_bf16", true);
    }
  }
  auto keeps_bf16_output = [&](const Node* n) {
    if (!bf16.count(n) || n->GetInt("y_blocked", 0) == 0) return false;
    const std::string& y = n->outputs[0];
    if (ed.IsGraphOutput(y)) return false;
    std::vector<Node*> readers = ed.Consumers(y);
    if (readers.empty()) return false;
    for (const Node* r : readers) {
      if (!bf16.count(r)) return false;
      for (size_t i = 0; i < r->inputs.size(); ++i) {
        if (r->inputs[i] == y && i != 0 && i != 3) return false;
      }
    }
    return true;
  };
  auto from_bf16 = [&](const std::string& v) {
    const Node* p = v.empty() ? nullptr : ed.Producer(v);
    return p != nullptr && keeps_bf16_output(p);
  };
  for (Node* n : ed.Nodes()) {
    if (!bf16.count(n)) continue;
    bool changed = SetFlag(ed, n, "compute_bf16", true);
    changed |= SetFlag(ed, n, "y_bf16", keeps_bf16_output(n));
    changed |= SetFlag(ed, n, "x_bf16", from_bf16(n->inputs[0]));
    changed |= SetFlag(ed, n, "z_bf16", n->HasInput(3) && from_bf16(n->inputs[3]));
    fired += changed;
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

}  // namespace inferd
