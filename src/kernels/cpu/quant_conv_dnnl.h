// The oneDNN int8 convolution behind QLinearConv when its quantization parameters are constant:
// u8/s8 activations with a per-tensor zero point, s8 symmetric weights (per tensor or per output
// channel, zero point 0), int32 bias, u8/s8 output. Requantization (x_scale * w_scale / y_scale)
// is oneDNN's output scales, the zero points are its src/dst zero-point attributes, and the
// result saturates to the output type (which is how a fused ReLU with y_zero_point 0 is applied).
//
// Weights are reordered once into oneDNN's blocked int8 layout; primitives are cached per input
// shape. Activations are NCHW in and out (reordered to and from the primitive's layout per call).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"
#include "kernels/cpu/nn_common.h"

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
};

class DnnlQConv {
 public:
  // Validates the parameters; fails (and the caller keeps its reference path) when oneDNN cannot
  // take them.
  static StatusOr<std::unique_ptr<DnnlQConv>> Create(QConvParams params);
  // y (allocated by the caller with OutputShape()) = QLinearConv(x).
  Status Run(const Node& node, const Tensor& x, Tensor* y) const;
  StatusOr<Shape> OutputShape(const Node& node, const Shape& x) const;

 private:
  struct Plan;
  explicit DnnlQConv(QConvParams p) : p_(std::move(p)) {}
  StatusOr<std::shared_ptr<const Plan>> GetPlan(const Node& node, const Shape& x) const;

  QConvParams p_;
  mutable std::mutex mu_;
  mutable std::map<Shape, std::shared_ptr<const Plan>> plans_;  // guarded by mu_
};

}  // namespace inferd::cpu
