#include "optimizer/conv_util.h"

namespace inferd {

int64_t FoldableConvChannels(const GraphEditor& ed, const Node& conv) {
  if (conv.op_type != "Conv" || (!conv.domain.empty() && conv.domain != "ai.onnx")) return 0;
  if (conv.outputs.size() != 1 || conv.outputs[0].empty() || conv.inputs.size() < 2) return 0;
  const Tensor* w = ed.Constant(conv.inputs[1]);
  if (w == nullptr || w->dtype() != DataType::kFloat32 || w->rank() < 3 || w->dim(0) <= 0) {
    return 0;
  }
  if (conv.HasInput(2)) {
    const Tensor* b = ed.Constant(conv.inputs[2]);
    if (b == nullptr || b->dtype() != DataType::kFloat32 || b->NumElements() != w->dim(0)) {
      return 0;
    }
  }
  return w->dim(0);
}

void RescaleConv(GraphEditor& ed, Node* conv, const std::vector<float>& scale,
                 const std::vector<float>& shift, const std::string& tag) {
  const Tensor& w = *ed.Constant(conv->inputs[1]);
  const int64_t m = w.dim(0);
  const int64_t per_channel = w.NumElements() / m;
  Tensor w2 = Tensor::Allocate(DataType::kFloat32, w.shape());
  const float* src = w.data<float>();
  float* dst = w2.data<float>();
  for (int64_t c = 0; c < m; ++c) {
    for (int64_t i = 0; i < per_channel; ++i) {
      dst[c * per_channel + i] = src[c * per_channel + i] * scale[c];
    }
  }
  Tensor b2 = Tensor::Allocate(DataType::kFloat32, {m});
  const Tensor* b = conv->HasInput(2) ? ed.Constant(conv->inputs[2]) : nullptr;
  for (int64_t c = 0; c < m; ++c) {
    float bias = b ? b->data<float>()[c] : 0.f;
    b2.data<float>()[c] = bias * scale[c] + shift[c];
  }
  std::string base = conv->name.empty() ? conv->outputs[0] : conv->name;
  std::string w_name = ed.AddInitializer(base + "/W_" + tag, std::move(w2));
  std::string b_name = ed.AddInitializer(base + "/B_" + tag, std::move(b2));
  ed.EditNode(conv, [&](Node& n) {
    n.inputs.resize(3);
    n.inputs[1] = w_name;
    n.inputs[2] = b_name;
  });
}

}  // namespace inferd
