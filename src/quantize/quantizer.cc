#include "quantize/quantizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "graph/prune.h"
#include "kernels/cpu/cpu_provider.h"
#include "optimizer/pipeline.h"
#include "quantize/dynamic_int8.h"
#include "quantize/float_convert.h"
#include "quantize/int4_weights.h"
#include "quantize/model_util.h"

namespace inferd::quantize {

StatusOr<Precision> ParsePrecision(const std::string& name) {
  if (name == "int8") return Precision::kInt8;
  if (name == "bf16" || name == "bfloat16") return Precision::kBf16;
  if (name == "fp16" || name == "float16") return Precision::kFp16;
  if (name == "int4") return Precision::kInt4;
  return InvalidArgument("unknown precision '{}' (int8, bf16, fp16 or int4)", name);
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kInt8:
      return "int8";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kInt4:
      return "int4";
  }
  return "?";
}

size_t InitializerBytes(const Graph& graph) {
  size_t n = 0;
  for (const auto& [name, t] : graph.initializers) n += t.ByteSize();
  return n;
}

namespace {

// A Conv/MatMul/Gemm selected for int8, and where its weight is quantized.
struct QuantCandidate {
  Node* node;
  int64_t weight_axis;  // output-channel axis of the weight
  int bias_input;       // -1: none
  std::string output;   // the tensor quantized after it ("" when it stays float)
};

std::map<std::string, std::vector<Node*>> ConsumerMap(const Graph& g) {
  std::map<std::string, std::vector<Node*>> m;
  for (const auto& n : g.nodes) {
    for (const std::string& in : n->inputs) {
      if (!in.empty()) m[in].push_back(n.get());
    }
  }
  return m;
}

bool IsFloatConstant(const Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  return it != g.initializers.end() && it->second.dtype() == DataType::kFloat32 &&
         !g.IsGraphInput(name);
}

// Picks the nodes to quantize; reasons for skipping go to `skipped`.
std::vector<QuantCandidate> SelectCandidates(Graph& g, const QuantizeOptions& o,
                                             std::vector<std::string>* skipped) {
  auto consumers = ConsumerMap(g);
  std::set<std::string> excluded(o.exclude.begin(), o.exclude.end());
  std::vector<QuantCandidate> out;
  for (const auto& up : g.nodes) {
    Node* n = up.get();
    if (!n->domain.empty() && n->domain != "ai.onnx") continue;
    if (n->op_type != "Conv" && n->op_type != "MatMul" && n->op_type != "Gemm") continue;
    auto skip = [&](const std::string& why) {
      skipped->push_back(fmt::format("{} ({})", n->name.empty() ? n->outputs[0] : n->name, why));
    };
    if (excluded.count(n->name)) {
      skip("excluded");
      continue;
    }
    const DataType x_type = n->inputs.empty() ? DataType::kUndefined : g.ValueType(n->inputs[0]);
    if (n->inputs.size() < 2 || (x_type != DataType::kFloat32 && x_type != DataType::kUndefined) ||
        !IsFloatConstant(g, n->inputs[1])) {
      skip("no constant float32 weight");
      continue;
    }
    const Tensor& w = g.initializers.at(n->inputs[1]);
    QuantCandidate c{n, 0, -1, ""};
    if (n->op_type == "Conv") {
      if (w.rank() < 3) continue;
      c.weight_axis = 0;
      if (n->HasInput(2) && IsFloatConstant(g, n->inputs[2]))
        c.bias_input = 2;
      else if (n->HasInput(2))
        continue;
    } else if (n->op_type == "MatMul") {
      if (w.rank() != 2) {
        skip("weight is not 2-D");
        continue;
      }
      c.weight_axis = 1;
    } else {
      if (w.rank() != 2 || n->GetInt("transA", 0) != 0) {
        skip("transA or non-2-D weight");
        continue;
      }
      c.weight_axis = n->GetInt("transB", 0) ? 0 : 1;
      if (n->HasInput(2)) {
        int64_t cols = w.dim(c.weight_axis);
        const auto it = g.initializers.find(n->inputs[2]);
        bool vector_bias = it != g.initializers.end() && IsFloatConstant(g, n->inputs[2]) &&
                           it->second.NumElements() == cols && n->GetFloat("beta", 1.f) == 1.f &&
                           n->GetFloat("alpha", 1.f) == 1.f;
        if (vector_bias) c.bias_input = 2;  // otherwise C stays float
      }
    }
    // The tensor to quantize after the node: past a sole ReLU consumer when there is one.
    std::string out_name = n->outputs[0];
    auto it = consumers.find(out_name);
    if (it != consumers.end() && it->second.size() == 1 && it->second[0]->op_type == "Relu" &&
        !g.IsGraphOutput(out_name)) {
      out_name = it->second[0]->outputs[0];
    }
    if (!g.IsGraphOutput(out_name)) c.output = out_name;
    out.push_back(c);
  }
  return out;
}

Tensor ScalarFloat(float v) { return Tensor::Scalar<float>(v); }

class QdqWriter {
 public:
  QdqWriter(Graph& g, int64_t opset, int weight_level)
      : g_(g), opset_(opset), weight_level_(weight_level) {
    for (const auto& n : g.nodes) {
      for (const auto& s : n->inputs) used_.insert(s);
      for (const auto& s : n->outputs) used_.insert(s);
    }
    for (const auto& [k, v] : g.initializers) used_.insert(k);
    for (const auto& v : g.inputs) used_.insert(v.name);
  }

  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int i = 1; used_.count(name); ++i) name = fmt::format("{}_{}", base, i);
    used_.insert(name);
    return name;
  }

  // Q → DQ after activation `t`; the readers of `t` in `readers` (all readers when null) read the
  // DQ output instead.
  void QuantizeActivation(const std::string& t, QuantParams p,
                          const std::set<const Node*>* readers = nullptr) {
    std::string scale = Unique(t + "_scale"), zp = Unique(t + "_zero_point");
    std::string q = Unique(t + "_quantized"), dq = Unique(t + "_dequantized");
    g_.initializers[scale] = ScalarFloat(p.scale);
    g_.initializers[zp] = Tensor::Scalar<uint8_t>(static_cast<uint8_t>(p.zero_point));
    for (const auto& n : g_.nodes) {
      if (readers && !readers->count(n.get())) continue;
      for (std::string& in : n->inputs) {
        if (in == t) in = dq;
      }
    }
    g_.AddNode("QuantizeLinear", {t, scale, zp}, {q}, t + "_QuantizeLinear");
    g_.AddNode("DequantizeLinear", {q, scale, zp}, {dq}, t + "_DequantizeLinear");
    params_[t] = p;
  }

  // Replaces input `index` of `n` (a float constant) with DQ(int8 weight). Returns the scales.
  std::vector<float> QuantizeWeight(Node* n, int index, int64_t axis, bool per_channel) {
    const std::string& wname = n->inputs[index];
    const Tensor& w = g_.initializers.at(wname);
    std::vector<float> scales;
    Tensor q = QuantizeWeightsSymmetric(w, axis, per_channel, &scales, weight_level_);
    std::string qn = Unique(wname + "_quantized"), sn = Unique(wname + "_scale");
    std::string zn = Unique(wname + "_zero_point"), dq = Unique(wname + "_dequantized");
    g_.initializers[qn] = q;
    if (per_channel) {
      g_.initializers[sn] =
          Tensor::FromVector<float>(scales, {static_cast<int64_t>(scales.size())});
      g_.initializers[zn] =
          Tensor::Allocate(DataType::kInt8, {static_cast<int64_t>(scales.size())});
    } else {
      g_.initializers[sn] = ScalarFloat(scales[0]);
      g_.initializers[zn] = Tensor::Scalar<int8_t>(0);
    }
    Node* d = g_.AddNode("DequantizeLinear", {qn, sn, zn}, {dq}, wname + "_DequantizeLinear");
    if (per_channel) d->attributes["axis"] = IntAttr(axis);
    n->inputs[index] = dq;
    return scales;
  }

  void QuantizeBias(Node* n, int index, float x_scale, const std::vector<float>& w_scales) {
    const std::string& bname = n->inputs[index];
    const Tensor& b = g_.initializers.at(bname);
    int64_t c = b.NumElements();
    std::vector<float> scales(c);
    Tensor q = Tensor::Allocate(DataType::kInt32, {c});
    for (int64_t i = 0; i < c; ++i) {
      scales[i] = x_scale * (w_scales.size() == 1 ? w_scales[0] : w_scales[i]);
      double v = std::nearbyint(double(b.data<float>()[i]) / scales[i]);
      q.data<int32_t>()[i] = static_cast<int32_t>(std::clamp(v, -2147483647.0, 2147483647.0));
    }
    std::string qn = Unique(bname + "_quantized"), sn = Unique(bname + "_scale");
    std::string zn = Unique(bname + "_zero_point"), dq = Unique(bname + "_dequantized");
    g_.initializers[qn] = q;
    bool per_channel = w_scales.size() > 1;
    g_.initializers[sn] =
        per_channel ? Tensor::FromVector<float>(scales, {c}) : ScalarFloat(scales[0]);
    g_.initializers[zn] =
        per_channel ? Tensor::Allocate(DataType::kInt32, {c}) : Tensor::Scalar<int32_t>(0);
    Node* d = g_.AddNode("DequantizeLinear", {qn, sn, zn}, {dq}, bname + "_DequantizeLinear");
    if (per_channel) d->attributes["axis"] = IntAttr(0);
    n->inputs[index] = dq;
  }

  const QuantParams* ParamsOf(const std::string& t) const {
    auto it = params_.find(t);
    return it == params_.end() ? nullptr : &it->second;
  }

 private:
  static Attribute IntAttr(int64_t v) {
    Attribute a;
    a.type = Attribute::Type::kInt;
    a.i = v;
    return a;
  }
  Graph& g_;
  int64_t opset_;
  int weight_level_;  // largest |q| of a weight (WeightMaxLevel)
  std::set<std::string> used_;
  std::map<std::string, QuantParams> params_;
};

Status MeasureReport(const Model& fp32, const Model& quantized,
                     const std::vector<QuantCandidate>& cands, const std::vector<Batch>& batches,
                     int threads, QuantizeReport* report) {
  std::vector<std::string> tensors;
  for (const auto& l : report->layers) tensors.push_back(l.output);
  std::map<std::string, std::vector<Tensor>> ref, test;
  auto keep = [](std::map<std::string, std::vector<Tensor>>& into) {
    return [&into](size_t, const std::string& name, const Tensor& v) { into[name].push_back(v); };
  };
  RETURN_IF_ERROR(RunWithIntermediates(fp32, tensors, batches, threads, keep(ref)));
  RETURN_IF_ERROR(RunWithIntermediates(quantized, tensors, batches, threads, keep(test)));
  auto sqnr_of = [&](const std::string& name) {
    double sig = 0, noise = 0;
    const auto& r = ref[name];
    const auto& t = test[name];
    for (size_t b = 0; b < r.size() && b < t.size(); ++b) {
      if (r[b].dtype() != DataType::kFloat32 || t[b].dtype() != DataType::kFloat32) continue;
      for (int64_t i = 0; i < std::min(r[b].NumElements(), t[b].NumElements()); ++i) {
        double x = r[b].data<float>()[i], y = t[b].data<float>()[i];
        sig += x * x;
        noise += (x - y) * (x - y);
      }
    }
    return noise == 0 ? 999.0 : sig == 0 ? -300.0 : 10 * std::log10(sig / noise);
  };
  for (auto& l : report->layers) {
    if (ref.count(l.output) && test.count(l.output)) {
      l.activation_sqnr_db = sqnr_of(l.output);
      l.has_activation_sqnr = true;
    }
  }
  int64_t agree = 0, total = 0;
  for (const ValueInfo& o : fp32.graph.outputs) {
    report->output_sqnr_db.push_back({o.name, sqnr_of(o.name)});
    const auto& r = ref[o.name];
    const auto& t = test[o.name];
    for (size_t b = 0; b < r.size() && b < t.size(); ++b) {
      if (r[b].rank() != 2 || r[b].dtype() != DataType::kFloat32 || r[b].shape() != t[b].shape())
        continue;
      int64_t rows = r[b].dim(0), cols = r[b].dim(1);
      for (int64_t i = 0; i < rows; ++i) {
        const float* x = r[b].data<float>() + i * cols;
        const float* y = t[b].data<float>() + i * cols;
        agree += (std::max_element(x, x + cols) - x) == (std::max_element(y, y + cols) - y);
        ++total;
      }
    }
  }
  if (total > 0) report->top1_agreement = double(agree) / double(total);
  (void)cands;
  return Status::Ok();
}

Status QuantizeInt8(Model& model, const QuantizeOptions& o, QuantizeReport* report) {
  if (o.calibration_dir.empty()) {
    return InvalidArgument(
        "static int8 quantization needs calibration data (--calibration DIR), or use --dynamic");
  }
  int64_t opset = model.OpsetFor("");
  if (opset < 10) {
    return InvalidArgument("int8 QDQ needs ONNX opset >= 10; the model uses opset {}", opset);
  }
  bool per_channel = o.per_channel && opset >= 13;
  if (o.per_channel && !per_channel) {
    report->skipped.push_back(
        fmt::format("per-channel weights (opset {} < 13: per tensor)", opset));
  }
  RETURN_IF_ERROR(Optimize(model, OptimizationLevel::kBasic, CpuProvider()));
  int threads = o.num_threads > 0
                    ? o.num_threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ASSIGN_OR_RETURN(std::vector<Batch> batches,
                   LoadCalibrationData(o.calibration_dir, model.graph, o.samples, o.batch_size));
  for (const Batch& b : batches) report->calibration_samples += b.empty() ? 0 : b[0].dim(0);

  Model fp32 = CloneModel(model);
  Graph& g = model.graph;
  std::vector<QuantCandidate> cands = SelectCandidates(g, o, &report->skipped);
  if (cands.empty())
    return InvalidArgument("no Conv, MatMul or Gemm with constant weights to quantize");
  std::vector<std::string> tensors;
  std::set<std::string> seen;
  for (const QuantCandidate& c : cands) {
    for (const std::string& t : {c.node->inputs[0], c.output}) {
      if (!t.empty() && seen.insert(t).second) tensors.push_back(t);
    }
  }
  RangeCalibrator calibrator(o.method, o.percentile);
  RETURN_IF_ERROR(calibrator.Collect(model, tensors, batches, threads));
  ASSIGN_OR_RETURN(auto ranges, calibrator.ComputeRanges());

  // A quantized layer's output is read through DQ by everyone (so the engine can fuse the layer
  // with its Q); any other quantized tensor only by the quantized layers, so that float paths such
  // as a residual stream are not rounded to 8 bits on every block.
  std::set<std::string> layer_outputs;
  std::set<const Node*> layers;
  for (const QuantCandidate& c : cands) {
    layer_outputs.insert(c.output);
    layers.insert(c.node);
  }
  const int weight_level = WeightMaxLevel(report->weight_bits);
  QdqWriter w(g, opset, weight_level);
  for (const std::string& t : tensors) {
    auto it = ranges.find(t);
    if (it == ranges.end()) continue;  // not a float32 tensor
    w.QuantizeActivation(t, AsymmetricUInt8(it->second.min, it->second.max),
                         layer_outputs.count(t) ? nullptr : &layers);
  }
  for (const QuantCandidate& c : cands) {
    QuantizeReport::Layer layer;
    layer.node = c.node->name;
    layer.op_type = c.node->op_type;
    layer.output = c.node->outputs[0];
    const Tensor w_fp32 = g.initializers.at(c.node->inputs[1]);
    std::vector<float> ws = w.QuantizeWeight(c.node, 1, c.weight_axis, per_channel);
    // Weight error: dequantize and compare.
    {
      std::vector<float> scales;
      Tensor q =
          QuantizeWeightsSymmetric(w_fp32, c.weight_axis, per_channel, &scales, weight_level);
      Tensor dq = Tensor::Allocate(DataType::kFloat32, w_fp32.shape());
      const Shape& s = w_fp32.shape();
      int64_t inner = 1;
      for (size_t d = c.weight_axis + 1; d < s.size(); ++d) inner *= s[d];
      int64_t ch = per_channel ? s[c.weight_axis] : 1;
      for (int64_t i = 0; i < dq.NumElements(); ++i) {
        int64_t k = per_channel ? (i / inner) % ch : 0;
        dq.data<float>()[i] = q.data<int8_t>()[i] * scales[k];
      }
      layer.weight_sqnr_db = Sqnr(w_fp32, dq);
    }
    if (c.bias_input >= 0) {
      // The input was rewired to its DQ output: find its scale by the original name.
      std::string x = c.node->inputs[0];
      const std::string suffix = "_dequantized";
      if (x.size() > suffix.size() && x.ends_with(suffix))
        x = x.substr(0, x.size() - suffix.size());
      if (const QuantParams* p = w.ParamsOf(x)) w.QuantizeBias(c.node, c.bias_input, p->scale, ws);
    }
    report->layers.push_back(layer);
  }
  PruneUnusedInitializers(g);  // the FP32 weights replaced by int8 ones
  RETURN_IF_ERROR(g.TopologicalSort());
  if (o.report || o.accuracy_target > 0) {
    std::vector<Batch> few;
    if (!o.validation_dir.empty()) {
      ASSIGN_OR_RETURN(few, LoadCalibrationData(o.validation_dir, fp32.graph,
                                                o.report_batches * o.batch_size, o.batch_size));
    } else {
      few.assign(batches.begin(),
                 batches.begin() + std::min<int64_t>(o.report_batches, batches.size()));
    }
    RETURN_IF_ERROR(MeasureReport(fp32, model, cands, few, threads, report));
  }
  return Status::Ok();
}

// The metric --accuracy-target compares: the lowest output SQNR, or top-1 agreement in percent.
double AccuracyMetric(const QuantizeReport& r, const std::string& metric) {
  if (metric == "top1") return r.top1_agreement < 0 ? -1 : r.top1_agreement * 100;
  double worst = 1e9;
  for (const auto& [name, db] : r.output_sqnr_db) worst = std::min(worst, db);
  return worst;
}

// Static INT8 with layers returned to FP32 until the accuracy target is met.
Status QuantizeMixedInt8(Model& model, const QuantizeOptions& o, QuantizeReport* report) {
  if (o.accuracy_metric != "sqnr" && o.accuracy_metric != "top1") {
    return InvalidArgument("unknown accuracy metric '{}' (sqnr or top1)", o.accuracy_metric);
  }
  const Model original = CloneModel(model);
  QuantizeOptions round = o;
  std::vector<std::string> returned;
  for (int64_t step = 1;; step *= 2) {
    Model m = CloneModel(original);
    QuantizeReport r;
    r.precision = report->precision;
    r.bytes_before = report->bytes_before;
    r.weight_bits = report->weight_bits;
    RETURN_IF_ERROR(QuantizeInt8(m, round, &r));
    double metric = AccuracyMetric(r, o.accuracy_metric);
    // Layers still quantized, most damaged first.
    std::vector<const QuantizeReport::Layer*> order;
    for (const auto& l : r.layers) order.push_back(&l);
    std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
      return a->activation_sqnr_db < b->activation_sqnr_db;
    });
    // Stop when the target is met, or when one quantized layer is left (returning it too would
    // leave nothing quantized: the caller then knows the target is out of reach in INT8).
    if (metric >= o.accuracy_target || order.size() <= 1) {
      model = std::move(m);
      *report = std::move(r);
      report->kept_float = returned;
      if (metric < o.accuracy_target) {
        report->skipped.push_back(
            fmt::format("accuracy target {} not reached ({} = {:.2f} with {} layers in FP32)",
                        o.accuracy_target, o.accuracy_metric, metric, returned.size()));
      }
      return Status::Ok();
    }
    for (int64_t i = 0; i < step && i + 1 < static_cast<int64_t>(order.size()); ++i) {
      returned.push_back(order[i]->node);
      round.exclude.push_back(order[i]->node);
    }
  }
}

}  // namespace

StatusOr<int> ResolveWeightBits(const QuantizeOptions& options) {
  if (options.weight_bits == 0) return CpuInt8NeedsSevenBitWeights() ? 7 : 8;
  if (options.weight_bits != 7 && options.weight_bits != 8) {
    return InvalidArgument("int8 weight bits must be 7 or 8 (0 = for this CPU), got {}",
                           options.weight_bits);
  }
  return options.weight_bits;
}

Status QuantizeModel(Model& model, const QuantizeOptions& options, QuantizeReport* report) {
  QuantizeReport local;
  QuantizeReport& r = report ? *report : local;
  r = QuantizeReport();
  r.precision = options.precision;
  r.bytes_before = InitializerBytes(model.graph);
  switch (options.precision) {
    case Precision::kInt8: {
      ASSIGN_OR_RETURN(r.weight_bits, ResolveWeightBits(options));
      if (options.dynamic) {
        RETURN_IF_ERROR(QuantizeDynamicInt8(model, options, &r));
      } else if (options.accuracy_target > 0) {
        RETURN_IF_ERROR(QuantizeMixedInt8(model, options, &r));
      } else {
        RETURN_IF_ERROR(QuantizeInt8(model, options, &r));
      }
      break;
    }
    case Precision::kFp16:
    case Precision::kBf16:
      RETURN_IF_ERROR(ConvertFloatPrecision(model, options, &r));
      break;
    case Precision::kInt4:
      RETURN_IF_ERROR(QuantizeInt4Weights(model, options, &r));
      break;
  }
  r.bytes_after = InitializerBytes(model.graph);
  return Status::Ok();
}

std::string QuantizeReport::ToString() const {
  std::string s = fmt::format("# inferd quantize report: {}\n\n", PrecisionName(precision));
  s += fmt::format("weights: {:.2f} MB -> {:.2f} MB\n", bytes_before / 1e6, bytes_after / 1e6);
  if (calibration_samples > 0) s += fmt::format("calibration samples: {}\n", calibration_samples);
  if (weight_bits > 0) s += fmt::format("weight bits: {}\n", weight_bits);
  for (const auto& [name, db] : output_sqnr_db) {
    s += fmt::format("output {}: SQNR {:.2f} dB\n", name, db);
  }
  if (top1_agreement >= 0)
    s += fmt::format("top-1 agreement with FP32: {:.2f}%\n", top1_agreement * 100);
  if (!layers.empty()) {
    s += "\n| layer | op | tensor | weight SQNR (dB) | activation SQNR (dB) |\n";
    s += "|---|---|---|---|---|\n";
    for (const auto& l : layers) {
      s += fmt::format("| {} | {} | {} | {:.2f} | {} |\n", l.node, l.op_type, l.output,
                       l.weight_sqnr_db,
                       l.has_activation_sqnr ? fmt::format("{:.2f}", l.activation_sqnr_db) : "-");
    }
  }
  if (!kept_float.empty()) {
    s += "\nreturned to FP32 by --accuracy-target:\n";
    for (const auto& k : kept_float) s += "- " + k + "\n";
  }
  if (!skipped.empty()) {
    s += "\nleft in float:\n";
    for (const auto& k : skipped) s += "- " + k + "\n";
  }
  return s;
}

}  // namespace inferd::quantize
