#include "optimizer/conv_bn_fusion.h"

#include <cmath>

#include "optimizer/conv_util.h"

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

StatusOr<int> ConvBnFusion::Run(Graph& graph) const {
  GraphEditor ed(graph);
  int fired = 0;
  for (Node* conv : ed.Nodes()) {
    if (conv->op_type != "Conv" || ed.IsRemoved(conv)) continue;
    int64_t m = FoldableConvChannels(ed, *conv);
    if (m == 0) continue;
    Node* bn = ed.SoleConsumer(conv->outputs[0]);
    if (bn == nullptr || bn->op_type != "BatchNormalization" ||
        (!bn->domain.empty() && bn->domain != "ai.onnx") || bn->inputs[0] != conv->outputs[0]) {
      continue;
    }
    if (bn->GetInt("training_mode", 0) != 0 || bn->GetInt("spatial", 1) != 1) continue;
    bool extra_outputs_used = false;
    for (size_t i = 1; i < bn->outputs.size(); ++i) {
      extra_outputs_used =
          extra_outputs_used || (!bn->outputs[i].empty() && ed.IsUsed(bn->outputs[i]));
    }
    if (extra_outputs_used || bn->outputs[0].empty()) continue;
    std::vector<float> scale = Param(ed, *bn, 1, m), bias = Param(ed, *bn, 2, m),
                       mean = Param(ed, *bn, 3, m), var = Param(ed, *bn, 4, m);
    if (scale.empty() || bias.empty() || mean.empty() || var.empty()) continue;
    const float eps = bn->GetFloat("epsilon", 1e-5f);
    std::vector<float> s(m), shift(m);
    for (int64_t c = 0; c < m; ++c) {
      s[c] = scale[c] / std::sqrt(var[c] + eps);
      shift[c] = bias[c] - mean[c] * s[c];
    }
    RescaleConv(ed, conv, s, shift, "bn_folded");
    AbsorbSuccessor(ed, conv, bn);
    ++fired;
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

}  // namespace inferd
