// The oneDNN int8 convolution behind QLinearConv when its quantization parameters are constant:
// u8/s8 activations with a per-tensor zero point, s8 symmetric weights (per tensor or per output
// channel, zero point 0), int32 bias, u8/s8 output. Requantization (x_scale * w_scale / y_scale)
// is oneDNN's output scales, the zero points are its src/dst zero-point attributes, and the
// result saturates to the output type (which is how a fused ReLU with y_zero_point 0 is applied).
//
// Layouts: x and y are NCHW, or NHWC ("channels last": the tensor's shape is [N, H, W, C]) for
// 2-D convolutions, per side. NHWC is the layout oneDNN's int8 convolutions compute in, so a chain
// of channels-last convolutions (Int8LayoutPropagation) runs without any reorder.
//
// Fused residual join (`residual`): the convolution is still requantized to y_type (rounded,
// saturated) as the QDQ graph says, then dequantized and added to a float32 Z of the output's
// shape and layout, with an optional ReLU; y is float32:
//   y = act((saturate(round(acc * x_scale * w_scale / y_scale) + y_zp) - y_zp) * y_scale + Z)
// All of it runs as post-ops of the one primitive (round, clip, linear, sum, relu): Z is copied
// into y first, or y already holds it (the kernel lets y take over Z's buffer).
//
// Weights are reordered once into oneDNN's blocked int8 layout; primitives are cached per input
// shape. Thread safe: Run may be called concurrently.
#pragma once

#include <dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"
#include "kernels/cpu/nn/window.h"

namespace inferd::cpu {

struct QConvParams {
  DataType x_type = DataType::kUInt8, y_type = DataType::kUInt8;
  float x_scale = 1.f, y_scale = 1.f;
  int32_t x_zero_point = 0, y_zero_point = 0;
  std::vector<float> w_scales;  // one, or one per output channel
  Tensor weights;               // int8 [M, C/group, k...]
  std::vector<int32_t> bias;    // empty or M values
  int64_t group = 1;
  WindowAttrs window;
  bool x_channels_last = false, y_channels_last = false;  // NHWC tensors (2-D convolutions)
  bool residual = false;  // y = act(DQ(requantized conv) + Z), float32 (see above)
  bool relu = false;      // with residual: ReLU after the join
};

// [N, C, H, W] ⇄ [N, H, W, C] shape orders.
Shape ChannelsLastShape(const Shape& nchw);
Shape ChannelsFirstShape(const Shape& nhwc);

class DnnlQConv {
 public:
  // Validates the parameters; fails (and the caller keeps its reference path) when oneDNN cannot
  // take them, or would not compute them exactly on this CPU (DnnlInt8IsExact: without AVX-512
  // VNNI only uint8 x with 7-bit weights).
  static StatusOr<std::unique_ptr<DnnlQConv>> Create(QConvParams params);
  // y (allocated by the caller with OutputShape(), type y_type or float32 with residual) =
  // QLinearConv(x) [+ Z]. `z` is required with residual and ignored otherwise; it may share y's
  // storage.
  Status Run(const Node& node, const Tensor& x, const Tensor* z, Tensor* y) const;
  // The shape of y (in y's layout) for an x of shape `x` (in x's layout).
  StatusOr<Shape> OutputShape(const Node& node, const Shape& x) const;
  const QConvParams& params() const { return p_; }

 private:
  struct Plan;
  explicit DnnlQConv(QConvParams p) : p_(std::move(p)) {}
  StatusOr<std::shared_ptr<const Plan>> GetPlan(const Node& node, const Shape& x) const;

  QConvParams p_;
  mutable std::mutex mu_;
  mutable std::map<Shape, std::shared_ptr<const Plan>> plans_;  // by shape + threads; mu_
  mutable std::vector<dnnl::memory> packed_weights_;              // guarded by mu_
};

}  // namespace inferd::cpu
