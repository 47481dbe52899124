// TopK and Det.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/math/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

// TopK: k from the attribute (opset 1-9) or input 1 (opset 10+); largest/sorted from opset 11.
// Ties keep the lower index first; the result is always sorted.
class TopKKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    axis_ = n.GetInt("axis", -1);
    largest_ = n.GetInt("largest", 1) != 0;
    k_attr_ = info.opset() < 10 ? n.GetInt("k", -1) : -1;
    if (info.opset() < 10 && k_attr_ < 0) return InvalidArgument("TopK needs attribute k >= 0");
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr) return InvalidArgument("TopK needs an input");
    int64_t k = k_attr_;
    if (k < 0) {
      const Tensor* kt = ctx.Input(1);
      if (kt == nullptr || kt->NumElements() != 1 || !IsInteger(kt->dtype())) {
        return InvalidArgument("TopK needs K as a one-element integer tensor");
      }
      k = kt->GetAsInt64(0);
    }
    if (x->rank() == 0) return InvalidArgument("TopK input must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, x->rank()));
    int64_t len = x->dim(axis);
    if (k < 0 || k > len) {
      return InvalidArgument("TopK k = {} is out of range for axis of size {}", k, len);
    }
    Shape out_shape = x->shape();
    out_shape[axis] = k;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x->dim(d);
    for (int64_t d = axis + 1; d < x->rank(); ++d) inner *= x->dim(d);
    Tensor* values = ctx.AllocateOutput(0, x->dtype(), out_shape);
    Tensor* indices = ctx.AllocateOutput(1, DataType::kInt64, out_shape);
    return DispatchAll(
        x->dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          if constexpr (std::is_same_v<T, bool>) {
            return InvalidArgument("TopK does not support bool");
          } else {
            Run<T>(*x, outer, len, inner, k, values, indices);
            return Status::Ok();
          }
        },
        [&]() -> Status { return InvalidArgument("TopK: unsupported type"); });
  }

 private:
  template <typename T>
  void Run(const Tensor& x, int64_t outer, int64_t len, int64_t inner, int64_t k, Tensor* values,
           Tensor* indices) const {
    const T* src = x.data<T>();
    T* vout = values->data<T>();
    int64_t* iout = indices->data<int64_t>();
    bool largest = largest_;
    ParallelFor(outer * inner, 16, [&](int64_t b, int64_t e) {
      std::vector<int64_t> idx(len);
      std::vector<float> fkeys;
      for (int64_t line = b; line < e; ++line) {
        int64_t o = line / inner, in = line % inner;
        const T* base = src + o * len * inner + in;
        std::iota(idx.begin(), idx.end(), 0);
        // NaN sorts as the largest value (as numpy/ORT do).
        auto key_less = [&](int64_t i, int64_t j) {
          auto a = base[i * inner], c = base[j * inner];
          if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Float16> ||
                        std::is_same_v<T, BFloat16>) {
            float fa = static_cast<float>(a), fc = static_cast<float>(c);
            if (std::isnan(fa) || std::isnan(fc)) return !std::isnan(fa) && std::isnan(fc);
            return fa < fc;
          } else {
            return a < c;
          }
        };
        auto cmp = [&](int64_t i, int64_t j) {
          bool before = largest ? key_less(j, i) : key_less(i, j);
          bool after = largest ? key_less(i, j) : key_less(j, i);
          if (before != after) return before;
          return i < j;
        };
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), cmp);
        for (int64_t j = 0; j < k; ++j) {
          int64_t dst = (o * k + j) * inner + in;
          vout[dst] = base[idx[j] * inner];
          iout[dst] = idx[j];
        }
      }
    });
  }

  int64_t axis_ = -1;
  bool largest_ = true;
  int64_t k_attr_ = -1;
};

// Det over the last two (square) dims via LU with partial pivoting in double.
class DetKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr || x->rank() < 2 || x->dim(x->rank() - 1) != x->dim(x->rank() - 2)) {
      return InvalidArgument("Det needs an input of shape [*, M, M]");
    }
    if (!IsFloatingPoint(x->dtype())) return InvalidArgument("Det needs a floating-point input");
    int64_t m = x->dim(x->rank() - 1);
    Shape out_shape(x->shape().begin(), x->shape().end() - 2);
    Tensor* y = ctx.AllocateOutput(0, x->dtype(), out_shape);
    int64_t batches = NumElements(out_shape);
    std::vector<double> a(m * m);
    for (int64_t bi = 0; bi < batches; ++bi) {
      for (int64_t i = 0; i < m * m; ++i) a[i] = x->GetAsDouble(bi * m * m + i);
      double det = 1.0;
      for (int64_t c = 0; c < m && det != 0.0; ++c) {
        int64_t p = c;
        for (int64_t r = c + 1; r < m; ++r) {
          if (std::fabs(a[r * m + c]) > std::fabs(a[p * m + c])) p = r;
        }
        if (a[p * m + c] == 0.0) {
          det = 0.0;
          break;
        }
        if (p != c) {
          for (int64_t j = 0; j < m; ++j) std::swap(a[p * m + j], a[c * m + j]);
          det = -det;
        }
        det *= a[c * m + c];
        for (int64_t r = c + 1; r < m; ++r) {
          double f = a[r * m + c] / a[c * m + c];
          for (int64_t j = c; j < m; ++j) a[r * m + j] -= f * a[c * m + j];
        }
      }
      DispatchAll(
          x->dtype(), [&](auto tag) { y->data<decltype(tag)>()[bi] = FromFloat<decltype(tag)>(det); },
          [] {});
    }
    return Status::Ok();
  }
};

}  // namespace

void RegisterMathOpsKernels(KernelRegistry& r) {
  r.Add("TopK", 1, kOpsetMax, NumericTypes(), MakeKernel<TopKKernel>());
  r.Add("Det", 11, kOpsetMax, FloatTypes(), MakeKernel<DetKernel>());
}

}  // namespace inferd::cpu
