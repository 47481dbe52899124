#include "optimizer/conv_mul_add_fusion.h"

#include "optimizer/conv_util.h"
#include "optimizer/fusion_util.h"

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

bool ConvMulAddFusion::Match(const GraphEditor& ed, const Node& conv) const {
  return IsStandardOp(&conv, "Conv") && conv.outputs.size() == 1;
}

bool ConvMulAddFusion::Rewrite(GraphEditor& ed, Node* conv) const {
  const int64_t m = FoldableConvChannels(ed, *conv);
  if (m == 0) return false;
  Node* next = ed.SoleConsumer(conv->outputs[0]);
  if ((!IsStandardOp(next, "Mul") && !IsStandardOp(next, "Add")) || next->NumInputs() != 2 ||
      next->outputs.size() != 1) {
    return false;
  }
  const size_t other = next->inputs[0] == conv->outputs[0] ? 1 : 0;
  const Tensor* c = ed.Constant(next->inputs[other]);
  if (c == nullptr) return false;
  const size_t rank = static_cast<size_t>(ed.Constant(conv->inputs[1])->rank());
  std::vector<float> v = PerChannel(*c, rank, m);
  if (v.empty()) return false;
  if (next->op_type == "Mul") {
    RescaleConv(ed, conv, v, std::vector<float>(m, 0.f), "mul_folded");
  } else {
    RescaleConv(ed, conv, std::vector<float>(m, 1.f), v, "add_folded");
  }
  AbsorbConsumer(ed, conv, next);
  return true;
}

}  // namespace inferd
