#include "quantize/int4_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "graph/prune.h"
#include "kernels/cpu/cpu_provider.h"
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

// SQNR of `w` (rows along the packing) against its int4 round trip.
double Int4Sqnr(const Tensor& w, const Tensor& packed, const Tensor& scales, int64_t block) {
  Tensor dq = Tensor::Allocate(DataType::kFloat32, w.shape());
  const int64_t cols = w.dim(1), blocks = scales.dim(1), rb = packed.dim(1);
  for (int64_t r = 0; r < w.dim(0); ++r) {
    for (int64_t i = 0; i < cols; ++i) {
      uint8_t b = packed.data<uint8_t>()[r * rb + (i >> 1)];
      int nib = (i & 1) ? (b >> 4) : (b & 15);
      dq.data<float>()[r * cols + i] = (nib - 8) * scales.data<float>()[r * blocks + i / block];
    }
  }
  return Sqnr(w, dq);
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
    Tensor packed, scales;
    PackInt4(rows_major, block, &packed, &scales);
    QuantizeReport::Layer layer;
    layer.node = label;
    layer.op_type = n->op_type + " (int4)";
    layer.output = n->outputs[0];
    layer.weight_sqnr_db = Int4Sqnr(rows_major, packed, scales, block);
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
    n->op_type = gather ? "GatherInt4" : "MatMulInt4";
    n->domain = "ai.inferd";
    n->inputs = ins;
    n->outputs = {out};
    n->attributes.clear();
    n->attributes["block_size"] = IntAttr(block);
    if (gather) {
      n->attributes["D"] = IntAttr(rows_major.dim(1));
    } else {
      n->attributes["K"] = IntAttr(rows_major.dim(1));
      n->attributes["N"] = IntAttr(rows_major.dim(0));
    }
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
