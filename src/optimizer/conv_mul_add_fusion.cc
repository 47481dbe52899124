#include "optimizer/conv_mul_add_fusion.h"

#include "optimizer/conv_util.h"

namespace inferd {
namespace {

// The constant as M per-channel values if it broadcasts per channel against a rank-`rank` Conv
// output with M channels; empty otherwise.
std::vector<float> PerChannel(const Tensor& c, size_t rank, int64_t m) {
  if (c.dtype() != DataType::kFloat32 || static_cast<size_t>(c.rank()) > rank) return {};
  const size_t offset = rank - static_cast<size_t>(c.rank());  // c's dims align to the right
  bool varies = false;
  for (size_t i = 0; i < static_cast<size_t>(c.rank()); ++i) {
    int64_t d = c.dim(static_cast<int64_t>(i));
    if (d == 1) continue;
    if (offset + i != 1 || d != m) return {};
    varies = true;
  }
  std::vector<float> v(m);
  for (int64_t k = 0; k < m; ++k) v[k] = c.data<float>()[varies ? k : 0];
  return v;
}

}  // namespace

StatusOr<int> ConvMulAddFusion::Run(Graph& graph) const {
  GraphEditor ed(graph);
  int fired = 0;
  for (Node* conv : ed.Nodes()) {
    if (conv->op_type != "Conv") continue;
    // After each fold the Conv produces the Mul/Add's output; look at its new reader.
    while (true) {
      int64_t m = FoldableConvChannels(ed, *conv);
      if (m == 0) break;
      Node* next = ed.SoleConsumer(conv->outputs[0]);
      if (next == nullptr || (next->op_type != "Mul" && next->op_type != "Add") ||
          (!next->domain.empty() && next->domain != "ai.onnx") || next->NumInputs() != 2 ||
          next->outputs.size() != 1) {
        break;
      }
      const size_t other = next->inputs[0] == conv->outputs[0] ? 1 : 0;
      const Tensor* c = ed.Constant(next->inputs[other]);
      if (c == nullptr) break;
      const size_t rank = static_cast<size_t>(ed.Constant(conv->inputs[1])->rank());
      std::vector<float> v = PerChannel(*c, rank, m);
      if (v.empty()) break;
      if (next->op_type == "Mul") {
        RescaleConv(ed, conv, v, std::vector<float>(m, 0.f), "mul_folded");
      } else {
        RescaleConv(ed, conv, std::vector<float>(m, 1.f), v, "add_folded");
      }
      AbsorbSuccessor(ed, conv, next);
      ++fired;
    }
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

}  // namespace inferd
