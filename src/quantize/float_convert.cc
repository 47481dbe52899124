#include "quantize/float_convert.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "graph/prune.h"
#include "kernels/cpu/cpu_provider.h"
#include "optimizer/bf16_compute.h"
#include "optimizer/pipeline.h"
#include "quantize/model_util.h"

namespace inferd::quantize {
namespace {

// Which inputs of an op are weights worth storing in 16 bits.
std::vector<size_t> WeightInputs(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return {};
  if (n.op_type == "Conv" || n.op_type == "ConvTranspose" || n.op_type == "Gemm") return {1, 2};
  if (n.op_type == "MatMul") return {0, 1};
  if (n.op_type == "Gather") return {0};
  return {};
}

}  // namespace

Status ConvertFloatPrecision(Model& model, const QuantizeOptions& options, QuantizeReport* report) {
  const bool bf16 = options.precision == Precision::kBf16;
  if (!bf16 && options.precision != Precision::kFp16) {
    return InvalidArgument("ConvertFloatPrecision handles fp16 and bf16 only");
  }
  int64_t opset = model.OpsetFor("");
  if (bf16 && opset < 13) {
    return InvalidArgument("bf16 weights need ONNX opset >= 13 (Cast from bfloat16); model has {}",
                           opset);
  }
  if (bf16) {
    // Fold BatchNormalization (and MatMul+Add) first, so the weights rounded to bf16 are the ones
    // the convolutions use: folding a scale into a bf16 weight at load time would make it FP32
    // again (and round it twice once inferd computes in bf16).
    RETURN_IF_ERROR(Optimize(model, OptimizationLevel::kBasic, CpuProvider()));
    model.metadata[kComputePrecisionKey] = "bf16";
  }
  Graph& g = model.graph;
  std::set<std::string> excluded(options.exclude.begin(), options.exclude.end());
  std::map<std::string, std::string> converted;  // float32 initializer → its Cast output
  std::vector<std::pair<std::string, std::string>> casts;  // (16-bit initializer, cast output)
  for (const auto& n : g.nodes) {
    if (excluded.count(n->name)) {
      report->skipped.push_back(fmt::format("{} (excluded)", n->name));
      continue;
    }
    for (size_t i : WeightInputs(*n)) {
      if (!n->HasInput(i)) continue;
      const std::string name = n->inputs[i];
      auto it = g.initializers.find(name);
      if (it == g.initializers.end() || it->second.dtype() != DataType::kFloat32 ||
          g.IsGraphInput(name) || it->second.NumElements() < 16) {
        continue;
      }
      auto done = converted.find(name);
      if (done == converted.end()) {
        const Tensor& w = it->second;
        Tensor h = Tensor::Allocate(bf16 ? DataType::kBFloat16 : DataType::kFloat16, w.shape());
        for (int64_t k = 0; k < w.NumElements(); ++k) {
          if (bf16) {
            h.data<BFloat16>()[k] = BFloat16(w.data<float>()[k]);
          } else {
            h.data<Float16>()[k] = Float16(w.data<float>()[k]);
          }
        }
        std::string stored = name + (bf16 ? "_bf16" : "_fp16");
        while (g.initializers.count(stored)) stored += "_";
        g.initializers[stored] = h;
        std::string cast_out = stored + "_float";
        casts.push_back({stored, cast_out});
        done = converted.emplace(name, cast_out).first;
      }
      n->inputs[i] = done->second;
    }
  }
  for (const auto& [stored, out] : casts) {
    Node* c = g.AddNode("Cast", {stored}, {out}, stored + "_Cast");
    Attribute to;
    to.type = Attribute::Type::kInt;
    to.i = static_cast<int64_t>(DataType::kFloat32);
    c->attributes["to"] = to;
  }
  // Drop the float32 originals nothing reads now (other initializers stay as they were).
  std::vector<std::string> originals;
  for (const auto& [name, out] : converted) originals.push_back(name);
  PruneUnusedInitializers(g, originals);
  for (const auto& [name, out] : converted) {
    QuantizeReport::Layer l;
    l.node = name;
    l.op_type = bf16 ? "bf16 weight" : "fp16 weight";
    report->layers.push_back(l);
  }
  return g.TopologicalSort();
}

}  // namespace inferd::quantize
