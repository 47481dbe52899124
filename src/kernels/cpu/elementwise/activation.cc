// Activation functions (Relu family, sigmoids, Softplus, ...), Shrink and Clip.
#include <cmath>
#include <limits>

#include "kernels/cpu/elementwise/register.h"
#include "kernels/cpu/elementwise/unary.h"

namespace inferd::cpu {
namespace {

// Numerically stable forms: no exp() of a large positive argument.
template <typename C>
C Sigmoid(C a) {
  if (a >= C(0)) return C(1) / (C(1) + std::exp(-a));
  C e = std::exp(a);
  return e / (C(1) + e);
}
template <typename C>
C Softplus(C a) {
  return a > C(0) ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a));
}

INFERD_SIMPLE_UNARY_EXTRA(Sigmoid, TypeClass::kFloat, Sigmoid(a),
                          INFERD_DNNL_ALG(EltwiseAlg::kLogistic))
INFERD_SIMPLE_UNARY_EXTRA(Tanh, TypeClass::kFloat, std::tanh(a), INFERD_DNNL_ALG(EltwiseAlg::kTanh))
INFERD_SIMPLE_UNARY(Softplus, TypeClass::kFloat, Softplus(a))
INFERD_SIMPLE_UNARY(Softsign, TypeClass::kFloat, a / (C(1) + std::fabs(a)))
INFERD_SIMPLE_UNARY(HardSwish, TypeClass::kFloat,
                    a* std::max(C(0), std::min(C(1), a / C(6) + C(0.5))))
INFERD_SIMPLE_UNARY_EXTRA(Mish, TypeClass::kFloat, a* std::tanh(Softplus(a)),
                          INFERD_DNNL_ALG(EltwiseAlg::kMish))
// Relu accepts signed integers from opset 14.
INFERD_SIMPLE_UNARY(Relu, TypeClass::kSignedNumeric, a > C(0) ? a : C(0))

// One float attribute `alpha` (with a default) used as C(alpha) by `expr`.
#define INFERD_ALPHA_UNARY(Name, default_alpha, expr)      \
  struct Name##Op : UnaryOpBase {                          \
    static constexpr const char* kName = #Name;            \
    static constexpr TypeClass kTypes = TypeClass::kFloat; \
    float alpha_attr = default_alpha;                      \
    Status Init(const Node& node) {                        \
      alpha_attr = node.GetFloat("alpha", default_alpha);  \
      return Status::Ok();                                 \
    }                                                      \
    template <typename T>                                  \
    T Apply(T x) const {                                   \
      using C = ComputeT<T>;                               \
      C a = Up(x), alpha = static_cast<C>(alpha_attr);     \
      return Down<T>(expr);                                \
    }                                                      \
  };
INFERD_ALPHA_UNARY(LeakyRelu, 0.01f, a < C(0) ? alpha * a : a)
INFERD_ALPHA_UNARY(Celu, 1.0f,
                   std::max(C(0), a) + std::min(C(0), alpha*(std::exp(a / alpha) - C(1))))
INFERD_ALPHA_UNARY(ThresholdedRelu, 1.0f, a > alpha ? a : C(0))
#undef INFERD_ALPHA_UNARY

struct EluOp : UnaryOpBase {
  static constexpr const char* kName = "Elu";
  static constexpr TypeClass kTypes = TypeClass::kFloat;
  float alpha = 1.0f;
  Status Init(const Node& node) {
    alpha = node.GetFloat("alpha", alpha);
    return Status::Ok();
  }
  std::tuple<EltwiseAlg, float, float> Dnnl() const { return {EltwiseAlg::kElu, alpha, 0.f}; }
  template <typename T>
  T Apply(T x) const {
    using C = ComputeT<T>;
    C a = Up(x), al = static_cast<C>(alpha);
    return Down<T>(a < C(0) ? al * (std::exp(a) - C(1)) : a);
  }
};

struct SeluOp : UnaryOpBase {
  static constexpr const char* kName = "Selu";
  static constexpr TypeClass kTypes = TypeClass::kFloat;
  float alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f;
  Status Init(const Node& node) {
    alpha = node.GetFloat("alpha", alpha);
    gamma = node.GetFloat("gamma", gamma);
    return Status::Ok();
  }
  template <typename T>
  T Apply(T x) const {
    using C = ComputeT<T>;
    C a = Up(x), al = static_cast<C>(alpha), g = static_cast<C>(gamma);
    return Down<T>(a > C(0) ? g * a : g * (al * std::exp(a) - al));
  }
};

struct HardSigmoidOp : UnaryOpBase {
  static constexpr const char* kName = "HardSigmoid";
  static constexpr TypeClass kTypes = TypeClass::kFloat;
  float alpha = 0.2f, beta = 0.5f;
  Status Init(const Node& node) {
    alpha = node.GetFloat("alpha", alpha);
    beta = node.GetFloat("beta", beta);
    return Status::Ok();
  }
  template <typename T>
  T Apply(T x) const {
    using C = ComputeT<T>;
    C v = static_cast<C>(alpha) * Up(x) + static_cast<C>(beta);
    return Down<T>(std::max(C(0), std::min(C(1), v)));
  }
};

struct ShrinkOp : UnaryOpBase {
  static constexpr const char* kName = "Shrink";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;
  float lambd = 0.5f, bias = 0.0f;
  Status Init(const Node& node) {
    lambd = node.GetFloat("lambd", lambd);
    bias = node.GetFloat("bias", bias);
    return Status::Ok();
  }
  template <typename T>
  T Apply(T x) const {
    // Compared in double so integer inputs see the fractional thresholds exactly.
    double v = static_cast<double>(Up(x));
    if (v < -lambd) return Down<T>(v + bias);
    if (v > lambd) return Down<T>(v - bias);
    return Down<T>(0.0);
  }
};

// Clip: bounds are attributes `min`/`max` (float inputs only) before opset 11, and optional
// scalar inputs 1 and 2 from opset 11 on. An absent bound does not clip.
class ClipKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    bounds_from_inputs_ = info.opset() >= 11;
    if (!bounds_from_inputs_) {
      attr_min_ = info.node().GetFloat("min", std::numeric_limits<float>::lowest());
      attr_max_ = info.node().GetFloat("max", std::numeric_limits<float>::max());
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr) return InvalidArgument("Clip needs an input");
    return DispatchClass<TypeClass::kNumeric>(x->dtype(), "Clip", [&](auto tag) -> Status {
      using T = decltype(tag);
      using C = ComputeT<T>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if (!bounds_from_inputs_) {
        if constexpr (std::is_floating_point_v<C>) {
          lo = static_cast<C>(attr_min_);
          hi = static_cast<C>(attr_max_);
        }
      } else {
        if (const Tensor* t = ctx.Input(1); t != nullptr) {
          ASSIGN_OR_RETURN(T v, ReadScalar<T>(*t, "Clip min"));
          lo = Up(v);
        }
        if (const Tensor* t = ctx.Input(2); t != nullptr) {
          ASSIGN_OR_RETURN(T v, ReadScalar<T>(*t, "Clip max"));
          hi = Up(v);
        }
      }
      Tensor* out = ctx.AllocateOutput(0, x->dtype(), x->shape());
      // max then min, as numpy.clip: min > max yields max everywhere; NaN passes through.
      UnaryMap(x->data<T>(), out->data<T>(), x->NumElements(), [lo, hi](T v) {
        C a = Up(v);
        a = a < lo ? lo : a;
        return Down<T>(a > hi ? hi : a);
      });
      return Status::Ok();
    });
  }

 private:
  bool bounds_from_inputs_ = true;
  float attr_min_ = 0, attr_max_ = 0;
};

}  // namespace

void RegisterActivationKernels(KernelRegistry& r) {
  AddUnary<ReluOp>(r, 6);
  AddUnary<LeakyReluOp>(r, 6);
  AddUnary<EluOp>(r, 6);
  AddUnary<SeluOp>(r, 6);
  AddUnary<CeluOp>(r, 12);
  AddUnary<SigmoidOp>(r, 6);
  AddUnary<HardSigmoidOp>(r, 6);
  AddUnary<HardSwishOp>(r, 14);
  AddUnary<TanhOp>(r, 6);
  AddUnary<SoftplusOp>(r, 1);
  AddUnary<SoftsignOp>(r, 1);
  AddUnary<ThresholdedReluOp>(r, 10);
  AddUnary<MishOp>(r, 18);
  AddUnary<ShrinkOp>(r, 9);
  r.Add("Clip", 6, kOpsetMax, NumericTypes(), MakeKernel<ClipKernel>());
}

}  // namespace inferd::cpu
