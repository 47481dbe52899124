// Fused activations as oneDNN post-ops: how graph fusion passes attach an activation to
// Conv/MatMul/Gemm nodes (in the ai.inferd domain or as an extra attribute).
#pragma once

#include <dnnl.hpp>

#include <string>

#include "common/status.h"
#include "graph/graph.h"

namespace inferd::cpu {

// Builds post-ops for an optional fused activation given by the node attributes "activation"
// ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "Gelu" (erf), "GeluTanh",
// "HardSwish") and "activation_params" (floats). No attribute: empty post-ops.
Status ParseFusedActivation(const Node& node, dnnl::post_ops* ops,
                            const std::string& attr = "activation");

}  // namespace inferd::cpu
