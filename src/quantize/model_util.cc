#include "quantize/model_util.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace inferd::quantize {

Model CloneModel(const Model& model) {
  Model m;
  m.ir_version = model.ir_version;
  m.producer_name = model.producer_name;
  m.producer_version = model.producer_version;
  m.opsets = model.opsets;
  m.metadata = model.metadata;
  const Graph& g = model.graph;
  m.graph.name = g.name;
  m.graph.inputs = g.inputs;
  m.graph.outputs = g.outputs;
  m.graph.initializers = g.initializers;
  m.graph.value_info = g.value_info;
  for (const auto& n : g.nodes) m.graph.nodes.push_back(std::make_unique<Node>(*n));
  return m;
}

QuantParams AsymmetricUInt8(float min, float max) {
  min = std::min(min, 0.f);
  max = std::max(max, 0.f);
  QuantParams p;
  float range = max - min;
  if (!(range > 0.f) || !std::isfinite(range)) {
    p.scale = 1.f;
    p.zero_point = 0;
    return p;
  }
  p.scale = range / 255.f;
  p.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-min / p.scale), 0.f, 255.f));
  return p;
}

Tensor QuantizeWeightsSymmetric(const Tensor& w, int64_t axis, bool per_channel,
                                std::vector<float>* scales, int max_level) {
  const float level = static_cast<float>(max_level);
  const Shape& s = w.shape();
  int64_t outer = 1, channels = 1, inner = 1;
  if (per_channel && !s.empty()) {
    for (int64_t d = 0; d < axis; ++d) outer *= s[d];
    channels = s[axis];
    for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  } else {
    inner = w.NumElements();
  }
  const float* x = w.data<float>();
  std::vector<float> absmax(channels, 0.f);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const float* p = x + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) absmax[c] = std::max(absmax[c], std::fabs(p[i]));
    }
  }
  scales->assign(channels, 1.f);
  for (int64_t c = 0; c < channels; ++c) {
    if (absmax[c] > 0.f && std::isfinite(absmax[c])) (*scales)[c] = absmax[c] / level;
  }
  Tensor q = Tensor::Allocate(DataType::kInt8, s);
  int8_t* y = q.data<int8_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      int64_t base = (o * channels + c) * inner;
      float inv = 1.f / (*scales)[c];
      for (int64_t i = 0; i < inner; ++i) {
        float v = std::nearbyint(x[base + i] * inv);
        y[base + i] = static_cast<int8_t>(std::clamp(std::isnan(v) ? 0.f : v, -level, level));
      }
    }
  }
  return q;
}

double Sqnr(const Tensor& reference, const Tensor& test) {
  int64_t n = std::min(reference.NumElements(), test.NumElements());
  double sig = 0, noise = 0;
  for (int64_t i = 0; i < n; ++i) {
    double r = reference.GetAsDouble(i), t = test.GetAsDouble(i);
    sig += r * r;
    noise += (r - t) * (r - t);
  }
  if (noise == 0) return std::numeric_limits<double>::infinity();
  if (sig == 0) return -300.0;
  return 10.0 * std::log10(sig / noise);
}

Tensor Transpose2D(const Tensor& w) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, {w.dim(1), w.dim(0)});
  const int64_t r = w.dim(0), c = w.dim(1);
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) t.data<float>()[j * r + i] = w.data<float>()[i * c + j];
  }
  return t;
}

}  // namespace inferd::quantize
