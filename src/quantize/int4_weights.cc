#include "quantize/int4_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "graph/prune.h"
#include "kernels/cpu/cpu_provider.h"
#include "kernels/cpu/quantization/nbits_gemm.h"
#include "optimizer/fusion_util.h"
#include "optimizer/pipeline.h"
#include "quantize/model_util.h"

namespace inferd::quantize {

void PackInt4(const Tensor& w, int64_t block, Tensor* packed, Tensor* scales) {
  const int64_t rows = w.dim(0), cols = w.dim(1), blocks = (cols + block - 1) / block;
  *packed = Tensor::Allocate(DataType::kUInt8, {rows, (cols + 1) / 2});
  *scales = Tensor::Allocate(DataType::kFloat32, {rows, blocks});
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w.data<float>() + r * cols;
    uint8_t* q = packed->data<uint8_t>() + r * ((cols + 1) / 2);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t lo = b * block, hi = std::min(cols, lo + block);
      float amax = 0.f;
      for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float s = amax > 0.f && std::isfinite(amax) ? amax / 7.f : 1.f;
      scales->data<float>()[r * blocks + b] = s;
      for (int64_t i = lo; i < hi; ++i) {
        float v = std::nearbyint(x[i] / s);
        int nib = static_cast<int>(std::clamp(std::isnan(v) ? 0.f : v, -8.f, 7.f)) + 8;
        q[i >> 1] = static_cast<uint8_t>((i & 1) ? (q[i >> 1] | (nib << 4)) : nib);
      }
    }
  }
}

namespace {

// `rows` [R, C] float32 as ai.inferd.MatMulNBits/GatherNBits 4-bit weights (symmetric, groups of
// `block` along C; kernels/cpu/quantization/nbits_gemm.h) and the SQNR of their round trip.
void PackNBits4(const Tensor& rows, int64_t block, Tensor* packed, Tensor* scales, double* sqnr) {
  const int64_t r = rows.dim(0), c = rows.dim(1);
  *packed = Tensor::Allocate(DataType::kUInt8, {r, cpu::NBitsRowBytes(4, c)});
  *scales = Tensor::Allocate(DataType::kFloat32, {r, cpu::NBitsGroups(c, block)});
  cpu::QuantizeNBits(rows.data<float>(), r, c, 4, block, false, packed->data<uint8_t>(),
                     scales->data<float>(), nullptr);
  const cpu::NBitsWeights view{4, r, c, block, packed->data<uint8_t>(), scales->data<float>(),
                               nullptr};
  Tensor dq = Tensor::Allocate(DataType::kFloat32, rows.shape());
  for (int64_t i = 0; i < r; ++i) cpu::DequantizeNBitsRow(view, i, dq.data<float>() + i * c);
  *sqnr = Sqnr(rows, dq);
}

}  // namespace

Status QuantizeInt4Weights(Model& model, const QuantizeOptions& o, QuantizeReport* report) {
  const int64_t block = o.int4_block_size;
  if (block != 32 && block != 64 && block != 128) {
    return InvalidArgument("int4 block size must be 32, 64 or 128, got {}", block);
  }
  RETURN_IF_ERROR(Optimize(model, OptimizationLevel::kBasic, CpuProvider()));
  Graph& g = model.graph;
  std::set<std::string> excluded(o.exclude.begin(), o.exclude.end());
  std::set<std::string> names;
  for (const auto& n : g.nodes) names.insert(n->outputs.begin(), n->outputs.end());
  for (const auto& [k, v] : g.initializers) names.insert(k);
  auto unique = [&](const std::string& base) {
    std::string s = base;
    for (int i = 1; names.count(s); ++i) s = fmt::format("{}_{}", base, i);
    names.insert(s);
    return s;
  };
  std::vector<std::unique_ptr<Node>> extra;  // bias Adds, appended then sorted
  for (const auto& up : g.nodes) {
    Node* n = up.get();
    if (!n->domain.empty() && n->domain != "ai.onnx") continue;
    const bool gemm = n->op_type == "Gemm", gather = n->op_type == "Gather";
    if (n->op_type != "MatMul" && !gemm && !gather) continue;
    const std::string label = n->name.empty() ? n->outputs[0] : n->name;
    if (excluded.count(n->name)) {
      report->skipped.push_back(label + " (excluded)");
      continue;
    }
    const int w_input = gather ? 0 : 1;
    if (n->inputs.size() <= static_cast<size_t>(w_input)) continue;
    auto it = g.initializers.find(n->inputs[w_input]);
    if (it == g.initializers.end() || g.IsGraphInput(it->first) ||
        it->second.dtype() != DataType::kFloat32 || it->second.rank() != 2) {
      continue;
    }
    if (gather && n->GetInt("axis", 0) != 0) continue;
    if (gemm && (n->GetInt("transA", 0) != 0 || n->GetFloat("alpha", 1.f) != 1.f ||
                 (n->HasInput(2) && n->GetFloat("beta", 1.f) != 1.f))) {
      report->skipped.push_back(label + " (Gemm with transA/alpha/beta)");
      continue;
    }
    // Pack along the reduction dim: rows = N (MatMul: B^T), or the table's rows (Gather).
    Tensor w = it->second;
    Tensor rows_major = gather ? w : (gemm && n->GetInt("transB", 0) ? w : Transpose2D(w));
    const float* wd = rows_major.data<float>();
    if (!std::all_of(wd, wd + rows_major.NumElements(), [](float v) { return std::isfinite(v); })) {
      return InvalidArgument("weight '{}' has non-finite values; cannot quantize to int4",
                             n->inputs[w_input]);
    }
    Tensor packed, scales;
    double sqnr = 0;
    PackNBits4(rows_major, block, &packed, &scales, &sqnr);
    QuantizeReport::Layer layer;
    layer.node = label;
    layer.op_type = n->op_type + " (int4)";
    layer.output = n->outputs[0];
    layer.weight_sqnr_db = sqnr;
    report->layers.push_back(layer);
    const std::string base = n->inputs[w_input];
    std::string qn = unique(base + "_int4"), sn = unique(base + "_int4_scale");
    g.initializers[qn] = packed;
    g.initializers[sn] = scales;
    std::vector<std::string> ins;
    std::string out = n->outputs[0];
    if (gather) {
      ins = {qn, sn, n->inputs[1]};
    } else {
      ins = {n->inputs[0], qn, sn};
      if (gemm && n->HasInput(2)) {
        std::string mm = unique(out + "_matmul");
        auto add = std::make_unique<Node>();
        add->op_type = "Add";
        add->name = label + "_BiasAdd";
        add->inputs = {mm, n->inputs[2]};
        add->outputs = {out};
        extra.push_back(std::move(add));
        out = mm;
      }
    }
    n->op_type = gather ? "GatherNBits" : "MatMulNBits";
    n->domain = "ai.inferd";
    n->inputs = ins;
    n->outputs = {out};
    n->attributes.clear();
    n->attributes["bits"] = IntAttr(4);
    n->attributes["block_size"] = IntAttr(block);
    n->attributes["K"] = IntAttr(rows_major.dim(1));
    if (!gather) n->attributes["N"] = IntAttr(rows_major.dim(0));
  }
  if (report->layers.empty()) {
    return InvalidArgument("no MatMul, Gemm or Gather with constant 2-D float32 weights for int4");
  }
  for (auto& n : extra) g.nodes.push_back(std::move(n));
  PruneUnusedInitializers(g);  // the float weights nothing reads now
  model.opsets["ai.inferd"] = 1;
  return g.TopologicalSort();
}

}  // namespace inferd::quantize
