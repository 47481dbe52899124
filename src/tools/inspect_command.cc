#include "tools/inspect_command.h"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "graph/onnx_io.h"
#include "kernels/cpu/cpu_provider.h"
#include "kernels/cpu/onednn/cpu_info.h"
#include "tools/run_command.h"

namespace inferd::tools {
namespace {

// Element-wise ops counted at one FLOP per output element.
const std::set<std::string>& ElementwiseOps() {
  static const std::set<std::string> ops = {
      "Add",     "Sub",   "Mul",         "Div",   "Pow",       "Sqrt",     "Exp",
      "Log",     "Relu",  "LeakyRelu",   "PRelu", "Sigmoid",   "Tanh",     "Erf",
      "Gelu",    "Elu",   "Selu",        "Clip",  "HardSigmoid", "HardSwish", "Softplus",
      "Neg",     "Abs",   "Reciprocal",  "Max",   "Min",       "Sum",      "Mean",
      "Where",   "Softmax", "LogSoftmax", "BatchNormalization", "LayerNormalization",
      "InstanceNormalization", "Mish",  "Sin",   "Cos",       "Floor",    "Ceil", "Round",
  };
  return ops;
}

// Shape of a value with symbolic/unknown dims taken as 1; nullopt if the rank is unknown.
std::optional<Shape> ShapeOf(const Graph& g, const std::string& name) {
  if (name.empty()) return std::nullopt;
  auto init = g.initializers.find(name);
  if (init != g.initializers.end()) return init->second.shape();
  const ValueInfo* vi = g.FindValueInfo(name);
  if (vi == nullptr || !vi->shape) return std::nullopt;
  Shape s;
  for (const Dim& d : *vi->shape) s.push_back(d.known() ? d.value : 1);
  return s;
}

// FLOPs of one node, or nullopt when the op is counted but shapes are missing; 0 for ops that
// are not counted.
std::optional<double> NodeFlops(const Graph& g, const Node& n) {
  if (!n.domain.empty()) return 0.0;
  auto in = [&](size_t i) { return i < n.inputs.size() ? ShapeOf(g, n.inputs[i]) : std::nullopt; };
  auto out = [&](size_t i) { return i < n.outputs.size() ? ShapeOf(g, n.outputs[i]) : std::nullopt; };
  if (n.op_type == "Conv") {
    auto w = in(1);
    auto y = out(0);
    if (!w || !y || w->size() < 2) return std::nullopt;
    // Each output element is a dot product over (C/group)·kernel weights.
    double per_output = static_cast<double>(NumElements(*w) / std::max<int64_t>(1, (*w)[0]));
    return 2.0 * static_cast<double>(NumElements(*y)) * per_output;
  }
  if (n.op_type == "ConvTranspose") {
    auto x = in(0);
    auto w = in(1);
    if (!x || !w || w->size() < 2) return std::nullopt;
    // Each input element scatters into (M/group)·kernel outputs.
    double per_input = static_cast<double>(NumElements(*w) / std::max<int64_t>(1, (*w)[0]));
    return 2.0 * static_cast<double>(NumElements(*x)) * per_input;
  }
  if (n.op_type == "MatMul" || n.op_type == "MatMulInteger") {
    auto a = in(0);
    auto y = out(0);
    if (!a || !y || a->empty()) return std::nullopt;
    return 2.0 * static_cast<double>(NumElements(*y)) * static_cast<double>(a->back());
  }
  if (n.op_type == "Gemm") {
    auto a = in(0);
    auto y = out(0);
    if (!a || !y || a->size() != 2) return std::nullopt;
    int64_t k = n.GetInt("transA", 0) != 0 ? (*a)[0] : (*a)[1];
    double flops = 2.0 * static_cast<double>(NumElements(*y)) * static_cast<double>(k);
    if (n.HasInput(2)) flops += static_cast<double>(NumElements(*y));
    return flops;
  }
  if (ElementwiseOps().count(n.op_type) > 0) {
    auto y = out(0);
    if (!y) return std::nullopt;
    return static_cast<double>(NumElements(*y));
  }
  return 0.0;
}

void AnalyzeGraph(const Model& model, const Graph& g, const ExecutionProvider& provider,
                  ModelReport* r, std::set<std::string>* unsupported) {
  for (const auto& [name, t] : g.initializers) {
    r->num_parameters += t.NumElements();
    r->parameter_bytes += static_cast<int64_t>(t.ByteSize());
  }
  for (const auto& node : g.nodes) {
    ++r->num_nodes;
    std::string key = node->domain.empty() || node->domain == "ai.onnx"
                          ? node->op_type
                          : node->domain + "::" + node->op_type;
    ++r->op_counts[key];
    int64_t opset = model.OpsetFor(node->domain);
    if (!provider.SupportsNode(*node, opset)) {
      unsupported->insert(fmt::format("{} (opset {})", key, opset));
    }
    std::optional<double> f = NodeFlops(g, *node);
    if (f) {
      r->flops += *f;
    } else {
      ++r->nodes_without_shapes;
    }
    for (const auto& [attr_name, attr] : node->attributes) {
      if (attr.g) AnalyzeGraph(model, *attr.g, provider, r, unsupported);
      for (const auto& sub : attr.graphs) {
        if (sub) AnalyzeGraph(model, *sub, provider, r, unsupported);
      }
    }
  }
}

std::string HumanCount(double v) {
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}{}", v, units[u]);
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

}  // namespace

ModelReport AnalyzeModel(const Model& model) {
  ModelReport r;
  std::set<std::string> unsupported;
  AnalyzeGraph(model, model.graph, *CpuProvider(), &r, &unsupported);
  r.unsupported_ops.assign(unsupported.begin(), unsupported.end());
  return r;
}

Status InspectModelCommand(const std::filesystem::path& path, std::ostream& out) {
  auto loaded = LoadOnnxModel(path);
  if (!loaded.ok()) return WithPath(loaded.status(), path);
  const Model& model = *loaded;
  const Graph& g = model.graph;
  ModelReport r = AnalyzeModel(model);

  out << fmt::format("model: {}\n", path.string());
  out << fmt::format("cpu: {}\n", cpu::DescribeCpu(cpu::DetectCpu()));
  out << fmt::format("graph: '{}', ir_version {}, producer '{}' {}\n", g.name, model.ir_version,
                     model.producer_name, model.producer_version);
  std::string opsets;
  for (const auto& [domain, version] : model.opsets) {
    opsets += fmt::format("{}{} {}", opsets.empty() ? "" : ", ",
                          domain.empty() ? "ai.onnx" : domain, version);
  }
  out << "opsets: " << opsets << "\n";
  out << fmt::format("inputs ({}):\n", g.inputs.size());
  for (const ValueInfo& vi : g.inputs) {
    out << fmt::format("  {}  {}{}\n", vi.name, DataTypeName(vi.dtype), vi.ShapeString());
  }
  out << fmt::format("outputs ({}):\n", g.outputs.size());
  for (const ValueInfo& vi : g.outputs) {
    out << fmt::format("  {}  {}{}\n", vi.name, DataTypeName(vi.dtype), vi.ShapeString());
  }

  std::vector<std::pair<std::string, int64_t>> ops(r.op_counts.begin(), r.op_counts.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  out << fmt::format("ops: {} nodes, {} distinct op types\n", r.num_nodes, ops.size());
  for (const auto& [op, count] : ops) out << fmt::format("  {:>6}  {}\n", count, op);

  out << fmt::format("parameters: {} ({} elements, {})\n", HumanCount(r.num_parameters),
                     r.num_parameters, HumanBytes(static_cast<double>(r.parameter_bytes)));
  out << fmt::format("FLOPs (estimate, batch 1): {}", HumanCount(r.flops));
  out << " (Conv, ConvTranspose, MatMul, Gemm at 2 per MAC; element-wise ops at 1 per element";
  if (r.nodes_without_shapes > 0) {
    out << fmt::format("; {} nodes skipped, shapes unknown", r.nodes_without_shapes);
  }
  out << ")\n";
  if (r.unsupported_ops.empty()) {
    out << "cpu provider: every op is supported\n";
  } else {
    out << fmt::format("cpu provider: {} op types NOT supported:\n", r.unsupported_ops.size());
    for (const std::string& op : r.unsupported_ops) out << "  " << op << "\n";
  }
  return Status::Ok();
}

}  // namespace inferd::tools
