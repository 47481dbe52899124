#include "optimizer/pipeline.h"

#include <fmt/format.h>

#include "optimizer/activation_fusion.h"
#include "optimizer/attention_fusion.h"
#include "optimizer/bf16_compute.h"
#include "optimizer/common_subexpression_elimination.h"
#include "optimizer/constant_folding.h"
#include "optimizer/conv_bn_fusion.h"
#include "optimizer/conv_mul_add_fusion.h"
#include "optimizer/dead_node_elimination.h"
#include "optimizer/depthwise_fusion.h"
#include "optimizer/fusion_util.h"
#include "optimizer/gelu_fusion.h"
#include "optimizer/int8_layout.h"
#include "optimizer/layer_norm_fusion.h"
#include "optimizer/layout_propagation.h"
#include "optimizer/matmul_bias_fusion.h"
#include "optimizer/matmul_add_fusion.h"
#include "optimizer/noop_elimination.h"
#include "optimizer/qdq_fusion.h"
#include "optimizer/residual_add_fusion.h"
#include "optimizer/shape_propagation.h"
#include "optimizer/transpose_reshape_folding.h"

namespace inferd {
namespace {

// A round rarely enables more than one further round (a fold exposing a no-op, a no-op exposing
// a fusion); the bound only guards against passes undoing each other.
constexpr int kMaxRounds = 8;

}  // namespace

std::vector<std::unique_ptr<GraphPass>> BuildPipeline(
    const Model& model, OptimizationLevel level, std::shared_ptr<ExecutionProvider> fold_provider) {
  std::vector<std::unique_ptr<GraphPass>> passes;
  if (level == OptimizationLevel::kNone) return passes;
  // Basic level.
  // 1. Constant folding first: it turns Constant nodes and constant subexpressions (weights
  //    transposed or reshaped in the graph, shape arithmetic) into initializers, and every fusion
  //    below only fires on initializer weights.
  passes.push_back(std::make_unique<ConstantFolding>(model.opsets, std::move(fold_provider)));
  // 2. No-op elimination after folding (a folded shape makes a Reshape recognisably a no-op) and
  //    before the fusions (Conv → Identity → BatchNormalization becomes adjacent).
  passes.push_back(std::make_unique<NoOpElimination>());
  // 3. CSE before the fusions: two identical readers of a Conv output would each block the
  //    single-consumer condition of a fusion; merged, the fusion fires.
  passes.push_back(std::make_unique<CommonSubexpressionElimination>());
  // 4. Conv+BN before Conv+Mul/Add: both rewrite the same Conv and BN is the common case; the
  //    Mul/Add folding then absorbs what follows the folded BN.
  passes.push_back(std::make_unique<ConvBnFusion>());
  passes.push_back(std::make_unique<ConvMulAddFusion>());
  passes.push_back(std::make_unique<MatMulAddFusion>());
  // (quant) QDQ → QLinearConv/QLinearMatMul after the float fusions (which never match QDQ
  //    patterns) and before dead-node elimination, which drops the DQ/Q pairs it disconnects.
  passes.push_back(std::make_unique<QdqFusion>());
  // 5. Dead-node elimination last: it drops what the passes above disconnected (replaced nodes,
  //    original weights of folded Convs, inputs of folded constants).
  passes.push_back(std::make_unique<DeadNodeElimination>());
  if (level == OptimizationLevel::kBasic) return passes;
  // Extended level: fusions into ai.inferd ops, after the basic passes that normalise the graph
  // for them (folded shapes and weights, no Identity in between, MatMul+Add on 2-D A already
  // Gemm). The list repeats in rounds, so a fusion that enables another fires next round at worst.
  const int64_t opset = model.OpsetFor("");
  // 6. Shape propagation first: the fusions check ranks and equal shapes, which ONNX shape
  //    inference often leaves unknown on dynamic-shape exports. Then chain folding: the pattern fusions below expect one Transpose/Reshape per step.
  passes.push_back(std::make_unique<ShapePropagation>());
  passes.push_back(std::make_unique<TransposeReshapeFolding>());
  // 7. Pattern fusions over standard ops (each consumes Add/Mul/Div nodes that the MatMul
  //    fusions below would otherwise claim, e.g. GELU's 1 + erf and the attention mask Add).
  passes.push_back(std::make_unique<LayerNormFusion>(opset));
  passes.push_back(std::make_unique<GeluFusion>());
  passes.push_back(std::make_unique<AttentionFusion>());
  // 8. MatMul + bias before residual Add (MatMul → Add(bias) → Add(residual) folds in that order),
  //    residual Add before activation (Conv → Add → Relu: the sum post-op precedes the eltwise).
  passes.push_back(std::make_unique<MatMulBiasFusion>());
  passes.push_back(std::make_unique<ResidualAddFusion>());
  passes.push_back(std::make_unique<ActivationFusion>(opset));
  // 9. Dead-node elimination again: the fusions leave disconnected weights and shape arithmetic.
  passes.push_back(std::make_unique<DeadNodeElimination>());
  if (level == OptimizationLevel::kExtended) return passes;
  // 10. All level: layout propagation last, on the fused graph (it rewrites fused Convs, and a
  //     BlockedConv is opaque to every pass above, so it must not run before them).
  passes.push_back(std::make_unique<LayoutPropagation>());
  //     Then MobileNet's 1x1 + 3x3 depthwise pairs, now blocked, into one BlockedConv (FP32
  //     only: the bf16 BlockedConv path does not take a fused depthwise).
  if (!Bf16Compute::Requested(model)) passes.push_back(std::make_unique<DepthwiseFusion>());
  // 11. The int8 counterpart (NHWC QLinearConv chains), after QdqFusion has formed them.
  passes.push_back(std::make_unique<Int8LayoutPropagation>());
  // 12. bf16 compute marking (only models that ask for it) after layout propagation: it marks
  //     BlockedConvs.
  if (Bf16Compute::Requested(model)) passes.push_back(std::make_unique<Bf16Compute>());
  return passes;
}

Status Optimize(Model& model, OptimizationLevel level,
                std::shared_ptr<ExecutionProvider> fold_provider, OptimizationReport* report) {
  OptimizationReport local;
  OptimizationReport& r = report ? *report : local;
  r = OptimizationReport();
  r.level = level;
  r.nodes_before = model.graph.nodes.size();
  std::vector<std::unique_ptr<GraphPass>> passes =
      BuildPipeline(model, level, std::move(fold_provider));
  for (const auto& p : passes) r.passes.push_back({std::string(p->Name()), 0});
  bool changed = !passes.empty();
  while (changed && r.rounds < kMaxRounds) {
    changed = false;
    ++r.rounds;
    for (size_t i = 0; i < passes.size(); ++i) {
      StatusOr<int> fired = passes[i]->Run(model.graph);
      if (!fired.ok()) {
        return fired.status().WithContext(fmt::format("optimizer pass {}", passes[i]->Name()));
      }
      r.passes[i].fired += *fired;
      changed = changed || *fired > 0;
    }
  }
  r.nodes_after = model.graph.nodes.size();
  // Fused ops live in inferd's domain: declare it so the written model passes the ONNX checker.
  for (const auto& n : model.graph.nodes) {
    if (n->domain == kInferdDomain) {
      model.opsets.emplace(kInferdDomain, 1);
      break;
    }
  }
  return Status::Ok();
}

std::string OptimizationReport::ToString() const {
  std::string s;
  for (const auto& p : passes) s += fmt::format("{}: {}\n", p.pass, p.fired);
  s += fmt::format("level {}: {} rounds, nodes {} -> {}\n", OptimizationLevelName(level), rounds,
                   nodes_before, nodes_after);
  return s;
}

}  // namespace inferd
