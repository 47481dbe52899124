// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul.
// Conv variants live in conv.cc; shared helpers in quant_util.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cpu/quantization/matmul_dnnl.h"
#include "kernels/cpu/quantization/quant_util.h"
#include "kernels/cpu/quantization/register.h"
#include "kernels/cpu/util/broadcast.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

// Splits `shape` around the quantization axis: per-tensor when the scale has one element, else
// per-axis along `axis` (opset 13+) with `scale_count` == shape[axis].
struct AxisLayout {
  int64_t outer = 1, channels = 1, inner = 1;
};

StatusOr<AxisLayout> LayoutFor(const Shape& shape, const Tensor& scale, int64_t axis, int64_t opset,
                               const char* op) {
  AxisLayout l;
  l.inner = NumElements(shape);
  if (scale.NumElements() == 1 && scale.rank() <= 1) return l;
  if (opset < 13 || scale.rank() != 1) {
    return InvalidArgument("{}: scale must be a scalar{}, got shape {}", op,
                           opset < 13 ? " before opset 13" : " or 1-D",
                           ShapeToString(scale.shape()));
  }
  ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axis, static_cast<int64_t>(shape.size())));
  if (shape.empty() || shape[a] != scale.NumElements()) {
    return InvalidArgument("{}: per-axis scale has {} elements but axis {} of {} has size {}", op,
                           scale.NumElements(), axis, ShapeToString(shape),
                           shape.empty() ? 0 : shape[a]);
  }
  l.outer = 1;
  for (int64_t d = 0; d < a; ++d) l.outer *= shape[d];
  l.channels = shape[a];
  l.inner = 1;
  for (size_t d = a + 1; d < shape.size(); ++d) l.inner *= shape[d];
  return l;
}

Status CheckZeroPointMatchesScale(const Tensor* zp, const Tensor& scale, const char* op) {
  if (zp != nullptr && zp->NumElements() != scale.NumElements()) {
    return InvalidArgument("{}: zero point has {} elements but scale has {}", op, zp->NumElements(),
                           scale.NumElements());
  }
  return Status::Ok();
}

// Runs fn(begin, end, channel) over [0, n) in parallel, split at channel boundaries of `l`.
template <typename Fn>
void ForEachChannelSegment(const AxisLayout& l, int64_t n, Fn&& fn) {
  ParallelFor(n, 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e;) {
      int64_t oc = i / l.inner;
      int64_t end = std::min(e, (oc + 1) * l.inner);
      fn(i, end, oc % l.channels);
      i = end;
    }
  });
}

// float32 → uint8/int8, written so the compiler vectorizes it (the hot case of QDQ models).
template <typename Q>
void QuantizeFloat(const float* x, Q* y, int64_t n, float scale, int32_t zp) {
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
  const float z = static_cast<float>(zp);
  for (int64_t i = 0; i < n; ++i) {
    float q = x[i] / scale;
    q = q == q ? q : 0.f;  // NaN → zero point
    float v = std::nearbyint(q) + z;
    v = std::min(std::max(v, lo), hi);
    y[i] = static_cast<Q>(static_cast<int32_t>(v));
  }
}

template <typename Q>
void DequantizeToFloat(const Q* x, float* y, int64_t n, float scale, int32_t zp) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}

class QuantizeLinearKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axis_ = info.node().GetInt("axis", 1);
    opset_ = info.opset();
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* scale = ctx.Input(1);
    const Tensor* zp = ctx.Input(2);
    if (x == nullptr || scale == nullptr)
      return InvalidArgument("QuantizeLinear needs x and y_scale");
    DataType out_type = zp ? zp->dtype() : DataType::kUInt8;
    if (!IsQuantType(out_type)) {
      return InvalidArgument("QuantizeLinear output type must be uint8 or int8, got {}",
                             DataTypeName(out_type));
    }
    RETURN_IF_ERROR(CheckZeroPointMatchesScale(zp, *scale, "QuantizeLinear"));
    ASSIGN_OR_RETURN(AxisLayout l, LayoutFor(x->shape(), *scale, axis_, opset_, "QuantizeLinear"));
    ASSIGN_OR_RETURN(auto scales, ReadScales(scale, l.channels, "y_scale"));
    ASSIGN_OR_RETURN(auto zps, ReadZeroPoints(zp, l.channels, "y_zero_point"));
    Tensor* y = ctx.AllocateOutputUninitialized(0, out_type, x->shape());
    if (x->dtype() == DataType::kFloat32) {
      const float* src = x->data<float>();
      ForEachChannelSegment(l, x->NumElements(), [&](int64_t b, int64_t e, int64_t c) {
        if (out_type == DataType::kUInt8) {
          QuantizeFloat(src + b, y->data<uint8_t>() + b, e - b, scales[c], zps[c]);
        } else {
          QuantizeFloat(src + b, y->data<int8_t>() + b, e - b, scales[c], zps[c]);
        }
      });
      return Status::Ok();
    }
    return DispatchAll(
        x->dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t> ||
                        std::is_same_v<T, uint64_t>) {
            return InvalidArgument("QuantizeLinear does not accept {} input",
                                   DataTypeName(x->dtype()));
          } else {
            const T* src = x->data<T>();
            ParallelFor(l.outer * l.channels,
                        std::max<int64_t>(1, 16384 / std::max<int64_t>(1, l.inner)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t oc = b; oc < e; ++oc) {
                            int64_t c = oc % l.channels;
                            float s = scales[c];
                            int32_t z = zps[c];
                            for (int64_t i = oc * l.inner; i < (oc + 1) * l.inner; ++i) {
                              StoreQuantized(*y, i, static_cast<float>(src[i]) / s, z);
                            }
                          }
                        });
            return Status::Ok();
          }
        },
        [&]() -> Status {
          return InvalidArgument("QuantizeLinear: unsupported input type {}",
                                 DataTypeName(x->dtype()));
        });
  }

 private:
  int64_t axis_ = 1;
  int64_t opset_ = 13;
};

class DequantizeLinearKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axis_ = info.node().GetInt("axis", 1);
    opset_ = info.opset();
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* scale = ctx.Input(1);
    const Tensor* zp = ctx.Input(2);
    if (x == nullptr || scale == nullptr) {
      return InvalidArgument("DequantizeLinear needs x and x_scale");
    }
    if (!IsQuantType(x->dtype()) && x->dtype() != DataType::kInt32) {
      return InvalidArgument("DequantizeLinear input must be uint8, int8 or int32, got {}",
                             DataTypeName(x->dtype()));
    }
    if (zp != nullptr && zp->dtype() != x->dtype()) {
      return InvalidArgument("DequantizeLinear zero point type {} differs from input type {}",
                             DataTypeName(zp->dtype()), DataTypeName(x->dtype()));
    }
    if (!IsFloatingPoint(scale->dtype())) {
      return InvalidArgument("DequantizeLinear scale must be floating point");
    }
    RETURN_IF_ERROR(CheckZeroPointMatchesScale(zp, *scale, "DequantizeLinear"));
    ASSIGN_OR_RETURN(AxisLayout l,
                     LayoutFor(x->shape(), *scale, axis_, opset_, "DequantizeLinear"));
    ASSIGN_OR_RETURN(auto scales, ReadScales(scale, l.channels, "x_scale"));
    ASSIGN_OR_RETURN(auto zps, ReadZeroPoints(zp, l.channels, "x_zero_point"));
    DataType out_type = scale->dtype();
    Tensor* y = ctx.AllocateOutputUninitialized(0, out_type, x->shape());
    if (out_type == DataType::kFloat32 && IsQuantType(x->dtype())) {
      float* dst = y->data<float>();
      ForEachChannelSegment(l, x->NumElements(), [&](int64_t b, int64_t e, int64_t c) {
        if (x->dtype() == DataType::kUInt8) {
          DequantizeToFloat(x->data<uint8_t>() + b, dst + b, e - b, scales[c], zps[c]);
        } else {
          DequantizeToFloat(x->data<int8_t>() + b, dst + b, e - b, scales[c], zps[c]);
        }
      });
      return Status::Ok();
    }
    std::vector<int32_t> xs = WidenToInt32(*x);
    return DispatchAll(
        out_type,
        [&](auto tag) -> Status {
          using T = decltype(tag);
          T* dst = y->data<T>();
          for (int64_t oc = 0; oc < l.outer * l.channels; ++oc) {
            int64_t c = oc % l.channels;
            for (int64_t i = oc * l.inner; i < (oc + 1) * l.inner; ++i) {
              dst[i] = FromFloat<T>(static_cast<float>(xs[i] - zps[c]) * scales[c]);
            }
          }
          return Status::Ok();
        },
        [] { return Internal("unreachable"); });
  }

 private:
  int64_t axis_ = 1;
  int64_t opset_ = 13;
};

class DynamicQuantizeLinearKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr || x->dtype() != DataType::kFloat32) {
      return InvalidArgument("DynamicQuantizeLinear needs a float32 input");
    }
    const float* src = x->data<float>();
    int64_t n = x->NumElements();
    float lo = 0.f, hi = 0.f;
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, src[i]);
      hi = std::max(hi, src[i]);
    }
    float scale = (hi - lo) / 255.f;
    int32_t zp = 0;
    if (scale > 0.f && std::isfinite(scale)) {
      zp = static_cast<int32_t>(std::nearbyint(std::clamp(0.f - lo / scale, 0.f, 255.f)));
    }
    Tensor* y = ctx.AllocateOutput(0, DataType::kUInt8, x->shape());
    uint8_t* dst = y->data<uint8_t>();
    if (scale > 0.f) {
      for (int64_t i = 0; i < n; ++i) dst[i] = Saturate<uint8_t>(src[i] / scale, zp);
    } else {
      std::fill(dst, dst + n, static_cast<uint8_t>(zp));
    }
    if (ctx.OutputRequested(1))
      *ctx.AllocateOutput(1, DataType::kFloat32, {})->data<float>() = scale;
    if (ctx.OutputRequested(2)) {
      *ctx.AllocateOutput(2, DataType::kUInt8, {})->data<uint8_t>() = static_cast<uint8_t>(zp);
    }
    return Status::Ok();
  }
};

// Numpy matmul shape rules for A[..., M, K] x B[..., K, N] (1-D operands promoted and the
// promoted dims dropped from the result).
struct QMatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  Shape batch;                     // broadcast batch shape
  std::vector<int64_t> a_offsets;  // per batch index: matrix index into A / B
  std::vector<int64_t> b_offsets;
  Shape out_shape;
};

StatusOr<QMatMulPlan> PlanMatMul(const Shape& a_in, const Shape& b_in, const char* op) {
  if (a_in.empty() || b_in.empty()) return InvalidArgument("{}: inputs must have rank >= 1", op);
  Shape a = a_in, b = b_in;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  QMatMulPlan p;
  p.m = a[a.size() - 2];
  p.k = a.back();
  p.n = b.back();
  if (b[b.size() - 2] != p.k) {
    return InvalidArgument("{}: inner dimensions differ: {} vs {}", op, ShapeToString(a_in),
                           ShapeToString(b_in));
  }
  Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  ASSIGN_OR_RETURN(p.batch, BroadcastShapes({ab, bb}));
  int64_t count = NumElements(p.batch);
  BroadcastIterator it(PlanBroadcast(p.batch, {ab, bb}));
  for (int64_t i = 0; i < count; ++i, it.Next()) {
    p.a_offsets.push_back(it.offset(0));
    p.b_offsets.push_back(it.offset(1));
  }
  p.out_shape = p.batch;
  if (a_in.size() > 1) p.out_shape.push_back(p.m);
  if (b_in.size() > 1) p.out_shape.push_back(p.n);
  return p;
}

// int32 accumulators of (A - a_zp[row]) x (B - b_zp[col]) for every batch, shape plan.out_shape.
StatusOr<std::vector<int32_t>> IntegerMatMul(const Tensor& a, const Tensor& b,
                                             const std::vector<int32_t>& a_zp,
                                             const std::vector<int32_t>& b_zp,
                                             const QMatMulPlan& p) {
  std::vector<int32_t> aw = WidenToInt32(a), bw = WidenToInt32(b);
  int64_t a_mat = p.m * p.k, b_mat = p.k * p.n;
  for (size_t i = 0; i < aw.size(); ++i) aw[i] -= a_zp[(i / p.k) % p.m];
  for (size_t i = 0; i < bw.size(); ++i) bw[i] -= b_zp[i % p.n];
  std::vector<int32_t> out(p.a_offsets.size() * p.m * p.n);
  for (size_t bi = 0; bi < p.a_offsets.size(); ++bi) {
    QGemmInt32(aw.data() + p.a_offsets[bi] * a_mat, bw.data() + p.b_offsets[bi] * b_mat, p.m, p.n,
               p.k, out.data() + bi * p.m * p.n);
  }
  return out;
}

// Per-row (A) / per-column (B) zero points: scalar, or 1-D of M / N values.
StatusOr<std::vector<int32_t>> MatMulZeroPoints(const Tensor* zp, int64_t n, const Tensor& operand,
                                                const char* what) {
  if (zp != nullptr && zp->dtype() != operand.dtype()) {
    return InvalidArgument("{} type {} differs from its operand's {}", what,
                           DataTypeName(zp->dtype()), DataTypeName(operand.dtype()));
  }
  return ReadZeroPoints(zp, n, what);
}

// A constant int8 B [K, N] stored transposed ([N, K]) for the exact fallback below: each output
// is one contiguous int8 dot product, which compilers vectorize (sign-extend + pmaddwd; a pair of
// u8/s8 products is at most 2 * 255 * 128 in magnitude, so int16 x int16 -> int32 is exact).
struct TransposedInt8 {
  int64_t k = 0, n = 0;
  std::vector<int8_t> bt;

  explicit TransposedInt8(const Tensor& b) : k(b.dim(0)), n(b.dim(1)), bt(k * n) {
    const int8_t* src = b.data<int8_t>();
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t c = 0; c < n; ++c) bt[c * k + r] = src[r * n + c];
    }
  }

  // y[m, n] = sum_k (a[m, k] - a_zp) * b[k, n]; a is uint8/int8 [M, K].
  template <typename A>
  void Run(const A* a, int64_t m, int32_t a_zp, int32_t* y) const {
    std::vector<int16_t> aw(m * k);
    for (int64_t i = 0; i < m * k; ++i) aw[i] = static_cast<int16_t>(int32_t{a[i]} - a_zp);
    ParallelFor(n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const int8_t* col = bt.data() + c * k;
        for (int64_t r = 0; r < m; ++r) {
          const int16_t* row = aw.data() + r * k;
          int32_t acc = 0;
          for (int64_t i = 0; i < k; ++i) acc += int32_t{row[i]} * int32_t{col[i]};
          y[r * n + c] = acc;
        }
      }
    });
  }
};

// MatMulInteger; with a constant int8 2-D B whose zero points are 0 (what `inferd quantize
// --dynamic` writes) it runs on oneDNN's int8 matmul (matmul_dnnl.h) where that is exact on this
// CPU (DnnlQMatMul::Takes), else on B transposed once (TransposedInt8): the generic path widens
// all of B to int32 on every call, ~100x slower for a decoder's matrix-vector products.
class MatMulIntegerKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Tensor* b = info.ConstantInput(1);
    if (!b || b->dtype() != DataType::kInt8 || b->rank() != 2) return Status::Ok();
    if (info.NumInputs() > 3 && !info.node().inputs[3].empty()) {
      const Tensor* bzp = info.ConstantInput(3);
      if (!bzp) return Status::Ok();
      for (int64_t i = 0; i < bzp->NumElements(); ++i) {
        if (bzp->GetAsInt64(i) != 0) return Status::Ok();
      }
    }
    StatusOr<std::unique_ptr<DnnlQMatMul>> fast = DnnlQMatMul::Create(*b);
    if (fast.ok()) fast_ = std::move(*fast);
    if (!fast_ || !fast_->Takes(DataType::kUInt8) || !fast_->Takes(DataType::kInt8)) {
      transposed_ = std::make_unique<TransposedInt8>(*b);
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.Input(0);
    const Tensor* b = ctx.Input(1);
    if (a == nullptr || b == nullptr) return InvalidArgument("MatMulInteger needs A and B");
    if (!IsQuantType(a->dtype()) || !IsQuantType(b->dtype())) {
      return InvalidArgument("MatMulInteger inputs must be uint8/int8");
    }
    const Tensor* a_zp = ctx.Input(2);
    if (a_zp && a_zp->dtype() != a->dtype()) {
      return InvalidArgument("MatMulInteger a_zero_point type {} differs from A type {}",
                             DataTypeName(a_zp->dtype()), DataTypeName(a->dtype()));
    }
    if (fast_ && fast_->Takes(a->dtype()) && a->rank() >= 2 &&
        a->dim(a->rank() - 1) == fast_->k() && (a_zp == nullptr || a_zp->NumElements() == 1)) {
      Shape out = a->shape();
      out.back() = fast_->n();
      Tensor* y = ctx.AllocateOutput(0, DataType::kInt32, out);
      int32_t zp = a_zp ? static_cast<int32_t>(a_zp->GetAsInt64(0)) : 0;
      Status st = fast_->Run(ctx.node(), *a, zp, y);
      if (st.ok() || st.code() != StatusCode::kInternal) return st;
    }
    if (transposed_ && a->rank() >= 2 && a->dim(a->rank() - 1) == transposed_->k &&
        (a_zp == nullptr || a_zp->NumElements() == 1)) {
      Shape out = a->shape();
      out.back() = transposed_->n;
      Tensor* y = ctx.AllocateOutputUninitialized(0, DataType::kInt32, out);
      const int32_t zp = a_zp ? static_cast<int32_t>(a_zp->GetAsInt64(0)) : 0;
      const int64_t m = a->NumElements() / transposed_->k;
      if (a->dtype() == DataType::kUInt8) {
        transposed_->Run(a->data<uint8_t>(), m, zp, y->data<int32_t>());
      } else {
        transposed_->Run(a->data<int8_t>(), m, zp, y->data<int32_t>());
      }
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(QMatMulPlan p, PlanMatMul(a->shape(), b->shape(), "MatMulInteger"));
    ASSIGN_OR_RETURN(auto azp, MatMulZeroPoints(ctx.Input(2), p.m, *a, "a_zero_point"));
    ASSIGN_OR_RETURN(auto bzp, MatMulZeroPoints(ctx.Input(3), p.n, *b, "b_zero_point"));
    ASSIGN_OR_RETURN(auto acc, IntegerMatMul(*a, *b, azp, bzp, p));
    Tensor* y = ctx.AllocateOutput(0, DataType::kInt32, p.out_shape);
    std::copy(acc.begin(), acc.end(), y->data<int32_t>());
    return Status::Ok();
  }

 private:
  std::unique_ptr<DnnlQMatMul> fast_;
  std::unique_ptr<TransposedInt8> transposed_;  // when oneDNN is not exact for some A type
};

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp).
class QLinearMatMulKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    for (size_t i : {0, 1, 3, 4, 6}) {
      if (ctx.Input(i) == nullptr) return InvalidArgument("QLinearMatMul input {} is missing", i);
    }
    const Tensor& a = *ctx.Input(0);
    const Tensor& b = *ctx.Input(3);
    if (!IsQuantType(a.dtype()) || !IsQuantType(b.dtype())) {
      return InvalidArgument("QLinearMatMul inputs must be uint8/int8");
    }
    DataType out_type = ctx.Input(7) ? ctx.Input(7)->dtype() : DataType::kUInt8;
    if (!IsQuantType(out_type))
      return InvalidArgument("QLinearMatMul y_zero_point must be uint8/int8");
    ASSIGN_OR_RETURN(QMatMulPlan p, PlanMatMul(a.shape(), b.shape(), "QLinearMatMul"));
    ASSIGN_OR_RETURN(auto as, ReadScales(ctx.Input(1), p.m, "a_scale"));
    ASSIGN_OR_RETURN(auto azp, MatMulZeroPoints(ctx.Input(2), p.m, a, "a_zero_point"));
    ASSIGN_OR_RETURN(auto bs, ReadScales(ctx.Input(4), p.n, "b_scale"));
    ASSIGN_OR_RETURN(auto bzp, MatMulZeroPoints(ctx.Input(5), p.n, b, "b_zero_point"));
    ASSIGN_OR_RETURN(auto ys, ReadScales(ctx.Input(6), 1, "y_scale"));
    ASSIGN_OR_RETURN(auto yzp, ReadZeroPoints(ctx.Input(7), 1, "y_zero_point"));
    ASSIGN_OR_RETURN(auto acc, IntegerMatMul(a, b, azp, bzp, p));
    Tensor* y = ctx.AllocateOutput(0, out_type, p.out_shape);
    int64_t mn = p.m * p.n;
    for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
      int64_t r = (i % mn) / p.n, c = i % p.n;
      float mult = as[r] * bs[c] / ys[0];
      StoreQuantized(*y, i, static_cast<float>(acc[i]) * mult, yzp[0]);
    }
    return Status::Ok();
  }
};

}  // namespace

void RegisterQuantizeKernels(KernelRegistry& r) {
  r.Add("QuantizeLinear", 10, kOpsetMax, {}, MakeKernel<QuantizeLinearKernel>());
  r.Add("DequantizeLinear", 10, kOpsetMax, {}, MakeKernel<DequantizeLinearKernel>());
  r.Add("DynamicQuantizeLinear", 11, kOpsetMax, {DataType::kFloat32},
        MakeKernel<DynamicQuantizeLinearKernel>());
  r.Add("MatMulInteger", 10, kOpsetMax, {DataType::kUInt8, DataType::kInt8},
        MakeKernel<MatMulIntegerKernel>());
  r.Add("QLinearMatMul", 10, kOpsetMax, {DataType::kUInt8, DataType::kInt8},
        MakeKernel<QLinearMatMulKernel>());
}

}  // namespace inferd::cpu
