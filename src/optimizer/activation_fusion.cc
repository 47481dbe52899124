#include "optimizer/activation_fusion.h"

#include <limits>
#include <optional>

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

struct Activation {
  std::string name;
  std::vector<float> params;
};

// The activation a node computes, in the form the fused kernels read; nullopt when it is not
// one (or has non-constant parameters).
std::optional<Activation> AsActivation(const GraphEditor& ed, const Node& n, int64_t opset) {
  const bool standard = n.domain.empty() || n.domain == "ai.onnx";
  if (!standard) {
    if (IsInferdOp(&n, "Gelu")) {
      const std::string approx = n.GetString("approximate", "none");
      if (approx == "none") return Activation{"Gelu", {}};
      if (approx == "tanh") return Activation{"GeluTanh", {}};
    }
    return std::nullopt;
  }
  if (n.op_type == "Relu" || n.op_type == "Sigmoid" || n.op_type == "Tanh" ||
      n.op_type == "HardSwish") {
    return Activation{n.op_type, {}};
  }
  if (n.op_type == "LeakyRelu") return Activation{"LeakyRelu", {n.GetFloat("alpha", 0.01f)}};
  if (n.op_type == "HardSigmoid") {
    return Activation{"HardSigmoid", {n.GetFloat("alpha", 0.2f), n.GetFloat("beta", 0.5f)}};
  }
  if (n.op_type == "Clip") {
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    if (opset < 11) {
      lo = n.GetFloat("min", lo);
      hi = n.GetFloat("max", hi);
    } else {
      for (size_t i = 1; i <= 2; ++i) {
        if (!n.HasInput(i)) continue;
        std::optional<float> v = ScalarConstant(ed, n.inputs[i]);
        if (!v) return std::nullopt;
        (i == 1 ? lo : hi) = *v;
      }
    }
    return Activation{"Clip", {lo, hi}};
  }
  return std::nullopt;
}

// Whether `n` can take a fused activation, and (for standard ops) which ai.inferd op it becomes.
bool CanTakeActivation(const Node& n) {
  if (n.HasAttribute("activation") || n.outputs.size() != 1) return false;
  if (IsStandardOp(&n, "Conv") || IsInferdOp(&n, "Conv")) return true;
  if (IsStandardOp(&n, "Gemm") || IsInferdOp(&n, "Gemm")) return true;
  if (IsStandardOp(&n, "MatMul") || IsInferdOp(&n, "MatMul")) return true;
  return IsInferdOp(&n, "FusedMatMul");
}

}  // namespace

std::vector<std::string> ActivationFusion::TargetOpTypes() const {
  return {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish", "Gelu"};
}

bool ActivationFusion::Match(const GraphEditor& ed, const Node& act) const {
  return !act.inputs.empty() && act.outputs.size() == 1;
}

bool ActivationFusion::Rewrite(GraphEditor& ed, Node* act) const {
  Node* producer = ed.Producer(act->inputs[0]);
  if (producer == nullptr || !CanTakeActivation(*producer)) return false;
  if (ed.SoleConsumer(producer->outputs[0]) != act) return false;
  if (ed.graph().ValueType(producer->outputs[0]) != DataType::kFloat32) return false;
  std::optional<Activation> a = AsActivation(ed, *act, opset_);
  if (!a) return false;
  ed.EditNode(producer, [&](Node& n) {
    n.domain = kInferdDomain;
    Attribute name;
    name.type = Attribute::Type::kString;
    name.s = a->name;
    n.attributes["activation"] = name;
    if (!a->params.empty()) {
      Attribute params;
      params.type = Attribute::Type::kFloats;
      params.floats = a->params;
      n.attributes["activation_params"] = params;
    }
  });
  AbsorbConsumer(ed, producer, act);
  return true;
}

}  // namespace inferd
