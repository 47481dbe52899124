#include "quantize/nbits_weights.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

#include "graph/onnx_io.h"
#include "graph/prune.h"
#include "optimizer/fusion_util.h"
#include "kernels/cpu/quantization/nbits_gemm.h"
#include "quantize/model_util.h"

namespace inferd::quantize {
namespace {

namespace fs = std::filesystem;

// The constant float32 2-D weight a MatMul (input 1) or axis-0 Gather (input 0) reads, or null.
const Tensor* Candidate(const Graph& g, const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return nullptr;
  const bool gather = n.op_type == "Gather";
  if (n.op_type != "MatMul" && !gather) return nullptr;
  if (gather && n.GetInt("axis", 0) != 0) return nullptr;
  const size_t w = gather ? 0 : 1;
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return nullptr;
  auto it = g.initializers.find(n.inputs[w]);
  if (it == g.initializers.end() || g.IsGraphInput(it->first)) return nullptr;
  const Tensor& t = it->second;
  if (t.dtype() != DataType::kFloat32 || t.rank() != 2 || t.NumElements() == 0) return nullptr;
  return &t;
}

struct Packed {
  Tensor data, scales, zero_points;  // zero_points undefined when symmetric
  double sqnr_db = 0;
};

// rows [R, C] quantized along C.
Packed PackRows(const Tensor& rows, const NBitsOptions& o) {
  const int64_t r = rows.dim(0), c = rows.dim(1), groups = cpu::NBitsGroups(c, o.group_size);
  const DataType code = o.bits == 4 ? DataType::kUInt8 : DataType::kInt8;
  Packed p;
  p.data = Tensor::Allocate(code, {r, cpu::NBitsRowBytes(o.bits, c)});
  p.scales = Tensor::Allocate(DataType::kFloat32, {r, groups});
  if (o.asymmetric) p.zero_points = Tensor::Allocate(code, {r, groups});
  cpu::QuantizeNBits(rows.data<float>(), r, c, o.bits, o.group_size, o.asymmetric,
                     static_cast<uint8_t*>(p.data.raw_data()), p.scales.data<float>(),
                     o.asymmetric ? static_cast<uint8_t*>(p.zero_points.raw_data()) : nullptr);
  cpu::NBitsWeights view{o.bits,
                         r,
                         c,
                         o.group_size,
                         static_cast<const uint8_t*>(p.data.raw_data()),
                         p.scales.data<float>(),
                         o.asymmetric ? static_cast<const uint8_t*>(p.zero_points.raw_data())
                                      : nullptr};
  Tensor dq = Tensor::Allocate(DataType::kFloat32, rows.shape());
  for (int64_t i = 0; i < r; ++i) cpu::DequantizeNBitsRow(view, i, dq.data<float>() + i * c);
  p.sqnr_db = Sqnr(rows, dq);
  return p;
}

// An ai.inferd.MoE node (kernels/cpu/moe/moe.h) whose gate, up and down are float32 3-D
// initializers; its other checks are the kernel's, at load.
bool MoeCandidate(const Graph& g, const Node& n) {
  if (n.domain != "ai.inferd" || n.op_type != "MoE" || n.inputs.size() != 5) return false;
  for (size_t i = 2; i <= 4; ++i) {
    auto it = g.initializers.find(n.inputs[i]);
    if (it == g.initializers.end() || g.IsGraphInput(it->first)) return false;
    if (it->second.dtype() != DataType::kFloat32 || it->second.rank() != 3) return false;
  }
  return true;
}

// Expert matrices w [E, K, N] (MatMul layout) as rows [E * N, K]: each expert's transpose, the
// layout MatMulNBits and MoENBits read.
Tensor ExpertRows(const Tensor& w) {
  const int64_t e = w.dim(0), k = w.dim(1), n = w.dim(2);
  Tensor rows = Tensor::Allocate(DataType::kFloat32, {e * n, k});
  const float* src = w.data<float>();
  float* dst = rows.data<float>();
  for (int64_t x = 0; x < e; ++x) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) dst[(x * n + j) * k + i] = src[(x * k + i) * n + j];
    }
  }
  return rows;
}

Status CheckFinite(const Tensor& w, const std::string& name) {
  const float* x = w.data<float>();
  for (int64_t i = 0; i < w.NumElements(); ++i) {
    if (!std::isfinite(x[i])) {
      return InvalidArgument("weight '{}' has a non-finite value at element {}; cannot quantize",
                             name, i);
    }
  }
  return Status::Ok();
}

StatusOr<std::string> ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return InvalidArgument("{}: cannot read", p.string());
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// config.json with "quantization_config" added (replaced).
StatusOr<std::string> QuantizedConfig(const fs::path& file, const NBitsOptions& o) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  rapidjson::Document doc;
  doc.Parse(text.c_str());
  if (doc.HasParseError() || !doc.IsObject()) {
    return InvalidArgument("{}: not a JSON object; not a decoder model folder", file.string());
  }
  auto& alloc = doc.GetAllocator();
  doc.RemoveMember("quantization_config");
  rapidjson::Value q(rapidjson::kObjectType);
  q.AddMember("quant_method", "inferd_nbits", alloc);
  q.AddMember("bits", o.bits, alloc);
  q.AddMember("group_size", static_cast<int>(o.group_size), alloc);
  q.AddMember("symmetric", !o.asymmetric, alloc);
  q.AddMember("embeddings", o.embeddings, alloc);
  doc.AddMember("quantization_config", q, alloc);
  rapidjson::StringBuffer out;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(out);
  w.SetIndent(' ', 2);
  doc.Accept(w);
  return std::string(out.GetString()) + "\n";
}

}  // namespace

Status CheckNBitsOptions(const NBitsOptions& o) {
  if (o.bits != 4 && o.bits != 8) {
    return InvalidArgument("weight-only quantization takes 4 or 8 bits, got {}", o.bits);
  }
  if (o.group_size != 32 && o.group_size != 64 && o.group_size != 128) {
    return InvalidArgument("group size must be 32, 64 or 128, got {}", o.group_size);
  }
  return Status::Ok();
}

Status QuantizeWeightsNBits(Model& model, const NBitsOptions& o, QuantizeReport* report) {
  RETURN_IF_ERROR(CheckNBitsOptions(o));
  Graph& g = model.graph;
  const std::set<std::string> excluded(o.exclude.begin(), o.exclude.end());
  std::vector<Node*> todo;
  for (const auto& n : g.nodes) {
    const Tensor* w = Candidate(g, *n);
    if (w == nullptr || (n->op_type == "Gather" && !o.embeddings)) continue;
    const std::string label = n->name.empty() ? n->outputs[0] : n->name;
    if (excluded.count(n->name)) {
      report->skipped.push_back(label + " (excluded)");
      continue;
    }
    RETURN_IF_ERROR(CheckFinite(*w, n->op_type == "Gather" ? n->inputs[0] : n->inputs[1]));
    todo.push_back(n.get());
  }
  std::vector<Node*> moe;  // MoE nodes whose experts become MoENBits
  for (const auto& n : g.nodes) {
    if (!MoeCandidate(g, *n)) continue;
    const Tensor& gate = g.initializers.at(n->inputs[2]);
    const Tensor& up = g.initializers.at(n->inputs[3]);
    const Tensor& down = g.initializers.at(n->inputs[4]);
    const std::string label = n->name.empty() ? n->outputs[0] : n->name;
    if (excluded.count(n->name)) {
      report->skipped.push_back(label + " (excluded)");
      continue;
    }
    if (gate.NumElements() == 0 || up.shape() != gate.shape() ||
        down.shape() != Shape{gate.dim(0), gate.dim(2), gate.dim(1)}) {
      return InvalidArgument(
          "MoE node '{}': expert weights gate {}, up {}, down {} are not [E, H, I], [E, H, I], "
          "[E, I, H]; cannot quantize",
          label, ShapeToString(gate.shape()), ShapeToString(up.shape()),
          ShapeToString(down.shape()));
    }
    for (size_t i = 2; i <= 4; ++i)
      RETURN_IF_ERROR(CheckFinite(g.initializers.at(n->inputs[i]), n->inputs[i]));
    moe.push_back(n.get());
  }
  if (std::none_of(todo.begin(), todo.end(), [](Node* n) { return n->op_type == "MatMul"; })) {
    return InvalidArgument("no MatMul with constant 2-D float32 weights to quantize to {} bits",
                           o.bits);
  }
  std::set<std::string> names;
  for (const auto& n : g.nodes) names.insert(n->outputs.begin(), n->outputs.end());
  for (const auto& [k, v] : g.initializers) names.insert(k);
  auto unique = [&](const std::string& base) {
    std::string s = base;
    for (int i = 1; names.count(s); ++i) s = fmt::format("{}_{}", base, i);
    names.insert(s);
    return s;
  };
  const std::string tag = fmt::format("_q{}", o.bits);
  std::map<std::pair<std::string, bool>, std::vector<std::string>> done;  // (weight, gather)
  for (Node* n : todo) {
    const bool gather = n->op_type == "Gather";
    const std::string weight = n->inputs[gather ? 0 : 1];
    const Tensor& w = g.initializers.at(weight);
    const int64_t k = gather ? w.dim(1) : w.dim(0), rows = gather ? w.dim(0) : w.dim(1);
    std::vector<std::string>& packed = done[{weight, gather}];
    if (packed.empty()) {  // a table read by several nodes is packed once
      Packed p = PackRows(gather ? w : Transpose2D(w), o);
      packed = {unique(weight + tag), unique(weight + tag + "_scale")};
      g.initializers[packed[0]] = p.data;
      g.initializers[packed[1]] = p.scales;
      if (o.asymmetric) {
        packed.push_back(unique(weight + tag + "_zero_point"));
        g.initializers[packed[2]] = p.zero_points;
      }
      QuantizeReport::Layer layer;
      layer.node = n->name.empty() ? n->outputs[0] : n->name;
      layer.op_type = fmt::format("{} (int{}, group {})", n->op_type, o.bits, o.group_size);
      layer.output = n->outputs[0];
      layer.weight_sqnr_db = p.sqnr_db;
      report->layers.push_back(layer);
    }
    const std::string other = n->inputs[gather ? 1 : 0];
    n->inputs = gather ? std::vector<std::string>{packed[0], packed[1], other}
                       : std::vector<std::string>{other, packed[0], packed[1]};
    if (o.asymmetric) n->inputs.push_back(packed[2]);
    n->op_type = gather ? "GatherNBits" : "MatMulNBits";
    n->domain = "ai.inferd";
    n->attributes.clear();
    n->attributes["K"] = IntAttr(k);
    n->attributes["bits"] = IntAttr(o.bits);
    n->attributes["block_size"] = IntAttr(o.group_size);
    if (!gather) n->attributes["N"] = IntAttr(rows);
  }
  // MoE -> MoENBits (kernels/cpu/moe/moe_nbits.h): per matrix codes [E, N, row bytes] and
  // scales [E, N, groups] (zero points after all six when asymmetric); the router stays float32.
  for (Node* n : moe) {
    const std::string label = n->name.empty() ? n->outputs[0] : n->name;
    std::vector<std::string> inputs = {n->inputs[0], n->inputs[1]}, zero_points;
    for (size_t i = 2; i <= 4; ++i) {
      const std::string weight = n->inputs[i];
      const Tensor& w = g.initializers.at(weight);
      const int64_t e = w.dim(0), k = w.dim(1), rows = w.dim(2);
      Packed p = PackRows(ExpertRows(w), o);
      auto stacked = [&](const Tensor& t) {  // [E * N, C] -> [E, N, C]
        return *t.Reshaped({e, rows, t.dim(1)});
      };
      inputs.push_back(unique(weight + tag));
      g.initializers[inputs.back()] = stacked(p.data);
      inputs.push_back(unique(weight + tag + "_scale"));
      g.initializers[inputs.back()] = stacked(p.scales);
      if (o.asymmetric) {
        zero_points.push_back(unique(weight + tag + "_zero_point"));
        g.initializers[zero_points.back()] = stacked(p.zero_points);
      }
      QuantizeReport::Layer layer;
      layer.node = label;
      layer.op_type = fmt::format("MoE {} (int{}, group {}, {} experts x [{}, {}])",
                                  i == 2   ? "gate"
                                  : i == 3 ? "up"
                                           : "down",
                                  o.bits, o.group_size, e, k, rows);
      layer.output = n->outputs[0];
      layer.weight_sqnr_db = p.sqnr_db;
      report->layers.push_back(layer);
    }
    inputs.insert(inputs.end(), zero_points.begin(), zero_points.end());
    n->inputs = inputs;
    n->op_type = "MoENBits";
    n->attributes["bits"] = IntAttr(o.bits);
    n->attributes["block_size"] = IntAttr(o.group_size);
  }
  PruneUnusedInitializers(g);  // the float weights nothing reads now
  model.opsets["ai.inferd"] = 1;
  return Status::Ok();
}

Status QuantizeDecoderFolder(const fs::path& in, const fs::path& out, const NBitsOptions& o,
                             QuantizeReport* report) {
  RETURN_IF_ERROR(CheckNBitsOptions(o));
  std::error_code ec;
  if (!fs::is_directory(in, ec)) return InvalidArgument("{}: not a folder", in.string());
  for (const char* f : {"config.json", "model.onnx"}) {
    if (!fs::is_regular_file(in / f, ec)) {
      return InvalidArgument("{}: no {}; not a decoder model folder (config.json + model.onnx)",
                             in.string(), f);
    }
  }
  if (fs::exists(out, ec) && fs::equivalent(in, out, ec)) {
    return InvalidArgument("the output folder {} is the input folder", out.string());
  }
  ASSIGN_OR_RETURN(std::string config, QuantizedConfig(in / "config.json", o));
  ASSIGN_OR_RETURN(Model model, LoadOnnxModel(in / "model.onnx"));
  report->bytes_before = InitializerBytes(model.graph);
  RETURN_IF_ERROR(QuantizeWeightsNBits(model, o, report)
                      .WithContext((in / "model.onnx").string()));
  report->bytes_after = InitializerBytes(model.graph);
  fs::create_directories(out, ec);
  if (ec) return InvalidArgument("cannot create {}: {}", out.string(), ec.message());
  model.producer_name = "inferd quantize";
  RETURN_IF_ERROR(SaveOnnxModel(model, out / "model.onnx"));
  {
    std::ofstream f(out / "config.json", std::ios::binary);
    f << config;
    if (!f) return InvalidArgument("cannot write {}", (out / "config.json").string());
  }
  for (const auto& e : fs::directory_iterator(in, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name == "model.onnx" || name == "config.json" ||
        name == "weights.npz") {
      continue;
    }
    fs::copy_file(e.path(), out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return InvalidArgument("cannot copy {}: {}", e.path().string(), ec.message());
  }
  if (ec) return InvalidArgument("cannot list {}: {}", in.string(), ec.message());
  return Status::Ok();
}

}  // namespace inferd::quantize
