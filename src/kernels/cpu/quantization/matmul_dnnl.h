// oneDNN int8 matmul for MatMulInteger with a constant int8 B: y[int32, ..., N] =
// (A[uint8/int8, ..., K] - a_zero_point) · B[K, N], A's leading dims folded into M. B is packed
// once into oneDNN's layout; the A zero point is a run-time argument (DynamicQuantizeLinear
// computes it per call in dynamically quantized models). Primitives are cached per (M, A type).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"

namespace inferd::cpu {

class DnnlQMatMul {
 public:
  // `b` must be int8 [K, N] (copied); its zero point must be 0.
  static StatusOr<std::unique_ptr<DnnlQMatMul>> Create(const Tensor& b);
  // Whether Run computes exactly for A of `a_type` on this CPU (DnnlInt8IsExact); callers use
  // their reference otherwise.
  bool Takes(DataType a_type) const { return a_type == DataType::kUInt8 ? exact_u8_ : exact_s8_; }
  int64_t k() const { return b_.dim(0); }
  int64_t n() const { return b_.dim(1); }
  // a: uint8/int8 [..., K]; y: int32 [..., N] allocated by the caller.
  Status Run(const Node& node, const Tensor& a, int32_t a_zero_point, Tensor* y) const;

 private:
  struct Plan;
  explicit DnnlQMatMul(Tensor b);
  StatusOr<std::shared_ptr<const Plan>> GetPlan(int64_t m, DataType a_type) const;

  Tensor b_;
  bool exact_u8_ = false, exact_s8_ = false;
  mutable std::mutex mu_;
  mutable std::map<std::pair<int64_t, int>, std::shared_ptr<const Plan>> plans_;  // guarded by mu_
};

}  // namespace inferd::cpu
