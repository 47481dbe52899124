#include "optimizer/conv_bn_fusion.h"

#include <cmath>

#include "optimizer/conv_util.h"
#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

// The BN's parameter `i` (1 scale, 2 bias, 3 mean, 4 var) as M floats, or empty.
std::vector<float> Param(const GraphEditor& ed, const Node& bn, size_t i, int64_t m) {
  if (!bn.HasInput(i)) return {};
  const Tensor* t = ed.Constant(bn.inputs[i]);
  if (t == nullptr || t->dtype() != DataType::kFloat32 || t->NumElements() != m || t->rank() != 1) {
    return {};
  }
  return {t->data<float>(), t->data<float>() + m};
}

}  // namespace

bool ConvBnFusion::Match(const GraphEditor& ed, const Node& conv) const {
  return IsStandardOp(&conv, "Conv") && conv.outputs.size() == 1;
}

bool ConvBnFusion::Rewrite(GraphEditor& ed, Node* conv) const {
  const int64_t m = FoldableConvChannels(ed, *conv);
  if (m == 0) return false;
  Node* bn = ed.SoleConsumer(conv->outputs[0]);
  if (!IsStandardOp(bn, "BatchNormalization") || bn->inputs[0] != conv->outputs[0]) return false;
  if (bn->GetInt("training_mode", 0) != 0 || bn->GetInt("spatial", 1) != 1) return false;
  for (size_t i = 1; i < bn->outputs.size(); ++i) {
    if (!bn->outputs[i].empty() && ed.IsUsed(bn->outputs[i])) return false;
  }
  if (bn->outputs[0].empty()) return false;
  std::vector<float> scale = Param(ed, *bn, 1, m), bias = Param(ed, *bn, 2, m),
                     mean = Param(ed, *bn, 3, m), var = Param(ed, *bn, 4, m);
  if (scale.empty() || bias.empty() || mean.empty() || var.empty()) return false;
  const float eps = bn->GetFloat("epsilon", 1e-5f);
  std::vector<float> s(m), shift(m);
  for (int64_t c = 0; c < m; ++c) {
    s[c] = scale[c] / std::sqrt(var[c] + eps);
    shift[c] = bias[c] - mean[c] * s[c];
  }
  RescaleConv(ed, conv, s, shift, "bn_folded");
  AbsorbConsumer(ed, conv, bn);
  return true;
}

}  // namespace inferd
