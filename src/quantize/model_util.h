// Small helpers of the quantization toolkit: deep copies of models, quantization parameters, and
// signal-to-quantization-noise ratios.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "graph/graph.h"

namespace inferd::quantize {

// A deep copy of `model` (nodes and value metadata copied; initializer buffers and subgraphs are
// shared, both read-only here).
Model CloneModel(const Model& model);

// Asymmetric uint8 parameters covering [min, max] (the range is widened to include 0 so that zero
// is exact, as padding and ReLU need).
struct QuantParams {
  float scale = 1.f;
  int32_t zero_point = 0;
};
QuantParams AsymmetricUInt8(float min, float max);

// Symmetric int8 weights per output channel along `axis` (or one scale when per_channel is false):
// q = round(w / s) clamped to [-L, L], s = max|w| / L, L = `max_level` (127 for 8-bit weights, 63
// for 7-bit ones). Returns the int8 tensor and fills `scales` (one per channel, or one).
Tensor QuantizeWeightsSymmetric(const Tensor& w, int64_t axis, bool per_channel,
                                std::vector<float>* scales, int max_level = 127);

// 10 * log10(sum(ref^2) / sum((ref - test)^2)) over float32 tensors of equal size; +inf when they
// are equal, -inf-free (a zero reference with noise gives a large negative value).
double Sqnr(const Tensor& reference, const Tensor& test);

// The transpose of a 2-D float32 tensor (a Gemm's transB weight as [K, N], or back).
Tensor Transpose2D(const Tensor& w);

}  // namespace inferd::quantize
