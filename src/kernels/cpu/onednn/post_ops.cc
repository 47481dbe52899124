#include "kernels/cpu/onednn/post_ops.h"

#include <vector>

namespace inferd::cpu {

Status ParseFusedActivation(const Node& node, dnnl::post_ops* ops, const std::string& attr) {
  const std::string act = node.GetString(attr, "");
  if (act.empty()) return Status::Ok();
  const std::vector<float> p = node.GetFloats(attr + "_params");
  auto param = [&](size_t i, float def) { return i < p.size() ? p[i] : def; };
  using A = dnnl::algorithm;
  if (act == "Relu") {
    ops->append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f);
  } else if (act == "LeakyRelu") {
    ops->append_eltwise(1.f, A::eltwise_relu, param(0, 0.01f), 0.f);
  } else if (act == "Sigmoid") {
    ops->append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f);
  } else if (act == "Tanh") {
    ops->append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f);
  } else if (act == "Clip") {
    ops->append_eltwise(1.f, A::eltwise_clip, param(0, -3.4e38f), param(1, 3.4e38f));
  } else if (act == "Gelu") {  // added by the fusion passes: erf form
    ops->append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f);
  } else if (act == "GeluTanh") {  // tanh approximation
    ops->append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f);
  } else if (act == "HardSwish") {  // x * relu6(x + 3) / 6 (ONNX alpha 1/6, beta 0.5)
    ops->append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f);
  } else if (act == "HardSigmoid") {
    ops->append_eltwise(1.f, A::eltwise_linear, param(0, 0.2f), param(1, 0.5f));
    ops->append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
  } else {
    return InvalidArgument("{}: unsupported fused activation '{}'", node.Describe(), act);
  }
  return Status::Ok();
}

}  // namespace inferd::cpu
