// Softmax, LogSoftmax (oneDNN for float32 and staged float16/bfloat16, plain loop for float64) and
// Hardmax (plain loop).
//
// Before opset 13 the input is coerced to 2-D at `axis` (default 1) and normalized over the
// flattened trailing block; from 13 the op normalizes along the single `axis` (default -1). Both
// map to (outer, len, inner) with the reduction over len.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cpu/nn/register.h"
#include "kernels/cpu/onednn/dnnl_kernel.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/util/float32.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

using dnnl::memory;

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

template <typename T>
void PlainSoftmax(SoftmaxKind kind, int64_t outer, int64_t len, int64_t inner, const T* x, T* y) {
  ParallelFor(outer * inner, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t base = (row / inner) * len * inner + row % inner;
      double mx = -std::numeric_limits<double>::infinity();
      int64_t arg = 0;
      for (int64_t i = 0; i < len; ++i) {
        const double v = static_cast<double>(x[base + i * inner]);
        if (v > mx) {
          mx = v;
          arg = i;
        }
      }
      if (kind == SoftmaxKind::kHardmax) {
        for (int64_t i = 0; i < len; ++i) y[base + i * inner] = FromFloat<T>(i == arg ? 1.0 : 0.0);
        continue;
      }
      double sum = 0;
      for (int64_t i = 0; i < len; ++i) sum += std::exp(static_cast<double>(x[base + i * inner]) - mx);
      for (int64_t i = 0; i < len; ++i) {
        const double v = static_cast<double>(x[base + i * inner]) - mx;
        y[base + i * inner] = FromFloat<T>(kind == SoftmaxKind::kSoftmax ? std::exp(v) / sum
                                                                         : v - std::log(sum));
      }
    }
  });
}

class SoftmaxKernel final : public DnnlKernel {
 public:
  explicit SoftmaxKernel(SoftmaxKind kind) : kind_(kind) {}

  Status Init(const KernelInfo& info) override {
    coerce_2d_ = info.opset() < 13;
    axis_ = info.node().GetInt("axis", coerce_2d_ ? 1 : -1);
    return Status::Ok();
  }

 private:
  struct Plan {
    dnnl::primitive prim;
    memory::desc md;
  };

  Status Run(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    if (!x) return InvalidArgument("{}: input is required", node.Describe());
    const Shape& xs = x->shape();
    if (xs.empty()) return InvalidArgument("{}: input must have rank >= 1", node.Describe());
    auto axis_or = NormalizeAxis(axis_, x->rank());
    if (!axis_or.ok()) return axis_or.status().WithContext(node.Describe());
    const int64_t axis = *axis_or;
    const int64_t outer = NumElements(Shape(xs.begin(), xs.begin() + axis));
    const int64_t len = coerce_2d_ ? NumElements(Shape(xs.begin() + axis, xs.end())) : xs[axis];
    const int64_t inner = coerce_2d_ ? 1 : NumElements(Shape(xs.begin() + axis + 1, xs.end()));
    const DataType dtype = x->dtype();
    if (x->NumElements() == 0) {
      ctx.AllocateOutput(0, dtype, xs);
      return Status::Ok();
    }
    const bool dnnl_ok = kind_ != SoftmaxKind::kHardmax &&
                         (dtype == DataType::kFloat32 || dtype == DataType::kFloat16 ||
                          dtype == DataType::kBFloat16);
    if (!dnnl_ok) {
      Tensor* y = ctx.AllocateOutput(0, dtype, xs);
      return DispatchAll(
          dtype,
          [&](auto tag) {
            using T = decltype(tag);
            if constexpr (std::is_same_v<T, bool>) {
              return InvalidArgument("{}: bool input is not supported", node.Describe());
            } else {
              PlainSoftmax<T>(kind_, outer, len, inner, x->data<T>(), y->data<T>());
              return Status::Ok();
            }
          },
          [&] { return InvalidArgument("{}: unsupported type {}", node.Describe(), DataTypeName(dtype)); });
    }
    Tensor xf = ToFloat32(*x);
    Tensor y = dtype == DataType::kFloat32 ? *ctx.AllocateOutputUninitialized(0, dtype, xs)
                                           : Tensor::Allocate(DataType::kFloat32, xs);
    ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, GetPlan({outer, len, inner}));
    dnnl::engine& eng = DnnlEngine();
    dnnl::stream s(eng);
    ExecutePrimitive(plan->prim, s, {{DNNL_ARG_SRC, memory(plan->md, eng, xf.raw_data())},
                           {DNNL_ARG_DST, memory(plan->md, eng, y.raw_data())}});
    s.wait();
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

  StatusOr<std::shared_ptr<const Plan>> GetPlan(const Shape& key) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    auto plan = std::make_shared<Plan>();
    plan->md = PlainDesc(ToDims(key));
    const auto prop = dnnl::prop_kind::forward_inference;
    if (kind_ == SoftmaxKind::kSoftmax) {
      dnnl::softmax_forward::primitive_desc pd({prop, plan->md, 1}, UserScratchpad(), DnnlEngine());
      plan->prim = dnnl::softmax_forward(pd);
    } else {
      dnnl::logsoftmax_forward::primitive_desc pd({prop, plan->md, 1}, UserScratchpad(), DnnlEngine());
      plan->prim = dnnl::logsoftmax_forward(pd);
    }
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.emplace(key, std::move(plan)).first->second;
  }

  SoftmaxKind kind_;
  bool coerce_2d_ = false;
  int64_t axis_ = -1;
  mutable std::mutex mu_;
  mutable std::map<Shape, std::shared_ptr<const Plan>> cache_;  // guarded by mu_
};

template <SoftmaxKind kKind>
KernelFactory MakeSoftmax() {
  return [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<SoftmaxKernel>(kKind);
    RETURN_IF_ERROR(k->Init(info));
    return std::unique_ptr<OpKernel>(std::move(k));
  };
}

}  // namespace

void RegisterSoftmaxKernels(KernelRegistry& r) {
  r.Add("Softmax", 1, kOpsetMax, FloatTypes(), MakeSoftmax<SoftmaxKind::kSoftmax>());
  r.Add("LogSoftmax", 1, kOpsetMax, FloatTypes(), MakeSoftmax<SoftmaxKind::kLogSoftmax>());
  r.Add("Hardmax", 1, kOpsetMax, FloatTypes(), MakeSoftmax<SoftmaxKind::kHardmax>());
}

}  // namespace inferd::cpu
