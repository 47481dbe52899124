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
#include "optimizer/matmul_add_fusion.h"
#include "optimizer/matmul_bias_fusion.h"
#include "optimizer/noop_elimination.h"
#include "optimizer/qdq_fusion.h"
#include "optimizer/residual_add_fusion.h"
#include "optimizer/rewrite_rule.h"
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
  //    before the fusions (Conv → Identity → BatchNormalization becomes adjacent): its own sweep,
  //    since a fusion anchored before the no-op would not see through it in the same sweep.
  passes.push_back(MakeRuleSweep(std::make_unique<NoOpElimination>()));
  // 3. CSE before the fusions: two identical readers of a Conv output would each block the
  //    single-consumer condition of a fusion; merged, the fusion fires.
  passes.push_back(std::make_unique<CommonSubexpressionElimination>());
  // 4. One sweep of the weight folds. Conv+BN before Conv+Mul/Add on each Conv: both rewrite the
  //    same Conv and BN is the common case; the Mul/Add folding then absorbs what follows the
  //    folded BN. MatMul+Add claims Adds after a MatMul, the Conv folds Adds after a Conv, and
  //    none reads what another changes elsewhere (a Conv's folds read its weights and readers; a
  //    MatMul's, the ranks of its inputs, settled by the folds of the nodes before it), so one
  //    sweep gives the graph that three sweeps in this order give.
  passes.push_back(MakeRuleSweep("WeightFolds", MakeRules(std::make_unique<ConvBnFusion>(),
                                                          std::make_unique<ConvMulAddFusion>(),
                                                          std::make_unique<MatMulAddFusion>())));
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
  //    inference often leaves unknown on dynamic-shape exports. Then chain folding, in a sweep of
  //    its own: the pattern fusions below expect one Transpose/Reshape per step, also upstream
  //    of their anchors.
  passes.push_back(std::make_unique<ShapePropagation>());
  passes.push_back(MakeRuleSweep(std::make_unique<TransposeReshapeFolding>()));
  // 7. Pattern fusions over standard ops, in one sweep (each consumes Add/Mul/Div nodes that the
  //    MatMul fusions below would otherwise claim, e.g. GELU's 1 + erf and the attention mask
  //    Add). Their patterns never share a node (LayerNorm hangs off a ReduceMean, GELU off an
  //    Erf/Tanh, attention off a Softmax, and each needs its intermediates read inside the
  //    pattern only), and none renames a value or changes a shape, so the order between them
  //    does not matter.
  passes.push_back(MakeRuleSweep(
      "PatternFusions",
      MakeRules(std::make_unique<LayerNormFusion>(opset), std::make_unique<GeluFusion>(),
                std::make_unique<AttentionFusion>())));
  // 8. MatMul + bias before residual Add (MatMul → Add(bias) → Add(residual) folds in that order),
  //    in one sweep: the MatMul is visited before its Adds, and a residual Add (which renames
  //    nothing) never changes what a later MatMul's match reads. Then residual Add before
  //    activation (Conv → Add → Relu: the sum post-op precedes the eltwise), in a sweep of its
  //    own: fusing an activation renames the producer's output, which can give that value a
  //    declared shape a later MatMul or residual match reads.
  passes.push_back(MakeRuleSweep(
      "MatMulAndResidual",
      MakeRules(std::make_unique<MatMulBiasFusion>(), std::make_unique<ResidualAddFusion>())));
  passes.push_back(MakeRuleSweep(std::make_unique<ActivationFusion>(opset)));
  // 9. Dead-node elimination again: the fusions leave disconnected weights and shape arithmetic.
  passes.push_back(std::make_unique<DeadNodeElimination>());
  if (level == OptimizationLevel::kExtended) return passes;
  // 10. All level: layout propagation last, on the fused graph (it rewrites fused Convs, and a
  //     BlockedConv is opaque to every pass above, so it must not run before them).
  passes.push_back(std::make_unique<LayoutPropagation>());
  //     Then MobileNet's 1x1 + 3x3 depthwise pairs, now blocked, into one BlockedConv (FP32
  //     only: the bf16 BlockedConv path does not take a fused depthwise).
  if (!Bf16Compute::Requested(model)) {
    passes.push_back(MakeRuleSweep(std::make_unique<DepthwiseFusion>()));
  }
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
  std::vector<size_t> first_stat;  // passes[i] counts into r.passes[first_stat[i]...]
  for (const auto& p : passes) {
    first_stat.push_back(r.passes.size());
    for (std::string_view name : p->CountedNames()) r.passes.push_back({std::string(name), 0});
  }
  bool changed = !passes.empty();
  while (changed && r.rounds < kMaxRounds) {
    changed = false;
    ++r.rounds;
    for (size_t i = 0; i < passes.size(); ++i) {
      StatusOr<std::vector<int>> fired = passes[i]->RunCounted(model.graph);
      if (!fired.ok()) {
        return fired.status().WithContext(fmt::format("optimizer pass {}", passes[i]->Name()));
      }
      for (size_t k = 0; k < fired->size(); ++k) {
        r.passes[first_stat[i] + k].fired += (*fired)[k];
        changed = changed || (*fired)[k] > 0;
      }
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
