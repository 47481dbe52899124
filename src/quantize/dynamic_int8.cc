#include "quantize/dynamic_int8.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "graph/prune.h"
#include "kernels/cpu/cpu_provider.h"
#include "optimizer/fusion_util.h"
#include "optimizer/pipeline.h"
#include "quantize/model_util.h"
#include "quantize/quantizer.h"

namespace inferd::quantize {
Status QuantizeDynamicInt8(Model& model, const QuantizeOptions& o, QuantizeReport* report) {
  int64_t opset = model.OpsetFor("");
  if (opset < 11) {
    return InvalidArgument(
        "dynamic int8 needs ONNX opset >= 11 (DynamicQuantizeLinear); model has {}", opset);
  }
  RETURN_IF_ERROR(Optimize(model, OptimizationLevel::kBasic, CpuProvider()));
  Graph& g = model.graph;
  std::set<std::string> excluded(o.exclude.begin(), o.exclude.end());
  std::set<std::string> used;
  for (const auto& n : g.nodes) {
    used.insert(n->inputs.begin(), n->inputs.end());
    used.insert(n->outputs.begin(), n->outputs.end());
  }
  for (const auto& [k, v] : g.initializers) used.insert(k);
  auto unique = [&](const std::string& base) {
    std::string name = base;
    for (int i = 1; used.count(name); ++i) name = fmt::format("{}_{}", base, i);
    used.insert(name);
    return name;
  };
  struct Quantized {
    std::string q, scale, zp;
  };
  std::map<std::string, Quantized> inputs;  // activation → its DynamicQuantizeLinear outputs
  std::vector<std::unique_ptr<Node>> added;
  std::set<const Node*> replaced;
  auto add = [&](const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                 const std::string& name) {
    auto n = std::make_unique<Node>();
    n->op_type = op;
    n->inputs = std::move(in);
    n->outputs = std::move(out);
    n->name = name;
    added.push_back(std::move(n));
    return added.back().get();
  };
  for (const auto& up : g.nodes) {
    Node* n = up.get();
    if (!n->domain.empty() && n->domain != "ai.onnx") continue;
    const bool gemm = n->op_type == "Gemm";
    if (n->op_type != "MatMul" && !gemm) continue;
    const std::string label = n->name.empty() ? n->outputs[0] : n->name;
    if (excluded.count(n->name)) {
      report->skipped.push_back(label + " (excluded)");
      continue;
    }
    auto wit = g.initializers.find(n->inputs[1]);
    if (wit == g.initializers.end() || g.IsGraphInput(n->inputs[1]) ||
        wit->second.dtype() != DataType::kFloat32 || wit->second.rank() != 2) {
      continue;  // activation × activation (attention scores) stays float
    }
    const DataType a_type = g.ValueType(n->inputs[0]);
    if (a_type != DataType::kFloat32 && a_type != DataType::kUndefined) continue;
    if (gemm && (n->GetInt("transA", 0) != 0 || n->GetFloat("alpha", 1.f) != 1.f ||
                 (n->HasInput(2) && n->GetFloat("beta", 1.f) != 1.f))) {
      report->skipped.push_back(label + " (Gemm with transA/alpha/beta)");
      continue;
    }
    Tensor w = wit->second;
    if (gemm && n->GetInt("transB", 0) != 0) w = Transpose2D(w);  // [K, N]
    std::vector<float> scales;
    Tensor wq = QuantizeWeightsSymmetric(w, 1, o.per_channel, &scales,
                                         WeightMaxLevel(report->weight_bits));
    const int64_t cols = w.dim(1);
    QuantizeReport::Layer layer;
    layer.node = label;
    layer.op_type = n->op_type + " (dynamic)";
    layer.output = n->outputs[0];
    {
      Tensor dq = Tensor::Allocate(DataType::kFloat32, w.shape());
      for (int64_t i = 0; i < w.NumElements(); ++i) {
        dq.data<float>()[i] = wq.data<int8_t>()[i] * scales[scales.size() == 1 ? 0 : i % cols];
      }
      layer.weight_sqnr_db = Sqnr(w, dq);
    }
    report->layers.push_back(layer);

    const std::string& a = n->inputs[0];
    auto qa = inputs.find(a);
    if (qa == inputs.end()) {
      Quantized q{unique(a + "_quantized"), unique(a + "_scale"), unique(a + "_zero_point")};
      add("DynamicQuantizeLinear", {a}, {q.q, q.scale, q.zp}, a + "_DynamicQuantizeLinear");
      qa = inputs.emplace(a, q).first;
    }
    const std::string base = n->inputs[1];
    std::string wq_name = unique(base + "_quantized"), ws_name = unique(base + "_scale");
    std::string wz_name = unique(base + "_zero_point");
    g.initializers[wq_name] = wq;
    if (scales.size() == 1) {
      g.initializers[ws_name] = Tensor::Scalar<float>(scales[0]);
      g.initializers[wz_name] = Tensor::Scalar<int8_t>(0);
    } else {
      g.initializers[ws_name] = Tensor::FromVector<float>(scales, {cols});
      g.initializers[wz_name] = Tensor::Allocate(DataType::kInt8, {cols});
    }
    const std::string out = n->outputs[0];
    std::string acc = unique(out + "_int32"), accf = unique(out + "_float");
    std::string scale = unique(out + "_output_scale");
    add("MatMulInteger", {qa->second.q, wq_name, qa->second.zp, wz_name}, {acc},
        label + "_MatMulInteger");
    Node* cast = add("Cast", {acc}, {accf}, label + "_Cast");
    cast->attributes["to"] = IntAttr(static_cast<int64_t>(DataType::kFloat32));
    add("Mul", {qa->second.scale, ws_name}, {scale}, label + "_ScaleMul");
    if (gemm && n->HasInput(2)) {
      std::string scaled = unique(out + "_scaled");
      add("Mul", {accf, scale}, {scaled}, label + "_Mul");
      add("Add", {scaled, n->inputs[2]}, {out}, label + "_BiasAdd");
    } else {
      add("Mul", {accf, scale}, {out}, label + "_Mul");
    }
    replaced.insert(n);
  }
  if (report->layers.empty()) {
    return InvalidArgument("no MatMul or Gemm with constant 2-D float32 weights to quantize");
  }
  std::erase_if(g.nodes,
                [&](const std::unique_ptr<Node>& n) { return replaced.count(n.get()) > 0; });
  for (auto& n : added) g.nodes.push_back(std::move(n));
  PruneUnusedInitializers(g);  // the float weights nothing reads now
  return g.TopologicalSort();
}

}  // namespace inferd::quantize
