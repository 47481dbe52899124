// Unary math ops: Abs, Neg, rounding, roots, exp/log, trigonometric and hyperbolic functions,
// Erf, Sign, IsNaN, IsInf, Not, BitwiseNot.
#include <cmath>

#include "kernels/cpu/elementwise/register.h"
#include "kernels/cpu/elementwise/unary.h"

namespace inferd::cpu {
namespace {

INFERD_SIMPLE_UNARY(Reciprocal, TypeClass::kFloat, C(1) / a)
INFERD_SIMPLE_UNARY(Floor, TypeClass::kFloat, std::floor(a))
INFERD_SIMPLE_UNARY(Ceil, TypeClass::kFloat, std::ceil(a))
// nearbyint in the default rounding mode rounds half to even, as the spec requires.
INFERD_SIMPLE_UNARY(Round, TypeClass::kFloat, std::nearbyint(a))
INFERD_SIMPLE_UNARY_EXTRA(Sqrt, TypeClass::kFloat, std::sqrt(a), INFERD_DNNL_ALG(EltwiseAlg::kSqrt))
INFERD_SIMPLE_UNARY_EXTRA(Exp, TypeClass::kFloat, std::exp(a), INFERD_DNNL_ALG(EltwiseAlg::kExp))
INFERD_SIMPLE_UNARY_EXTRA(Log, TypeClass::kFloat, std::log(a), INFERD_DNNL_ALG(EltwiseAlg::kLog))
INFERD_SIMPLE_UNARY(Sin, TypeClass::kFloat, std::sin(a))
INFERD_SIMPLE_UNARY(Cos, TypeClass::kFloat, std::cos(a))
INFERD_SIMPLE_UNARY(Tan, TypeClass::kFloat, std::tan(a))
INFERD_SIMPLE_UNARY(Asin, TypeClass::kFloat, std::asin(a))
INFERD_SIMPLE_UNARY(Acos, TypeClass::kFloat, std::acos(a))
INFERD_SIMPLE_UNARY(Atan, TypeClass::kFloat, std::atan(a))
INFERD_SIMPLE_UNARY(Sinh, TypeClass::kFloat, std::sinh(a))
INFERD_SIMPLE_UNARY(Cosh, TypeClass::kFloat, std::cosh(a))
INFERD_SIMPLE_UNARY(Asinh, TypeClass::kFloat, std::asinh(a))
INFERD_SIMPLE_UNARY(Acosh, TypeClass::kFloat, std::acosh(a))
INFERD_SIMPLE_UNARY(Atanh, TypeClass::kFloat, std::atanh(a))
INFERD_SIMPLE_UNARY(Neg, TypeClass::kSignedNumeric, -a)
INFERD_SIMPLE_UNARY(BitwiseNot, TypeClass::kInteger, ~a)
// erf for float as a branch-free rational approximation (Eigen's generic_fast_erf_float, a few
// ulp), so the loop vectorizes; libm's erff does not, and Erf dominates GELU in BERT-like models.
inline float FastErf(float v) {
  const float x = std::min(4.f, std::max(-4.f, v));  // |erf| rounds to 1 beyond 4
  const float x2 = x * x;
  float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return x * p / q;
}

struct ErfOp : UnaryOpBase {
  static constexpr const char* kName = "Erf";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;  // integers computed in double
  template <typename T>
  T Apply(T x) const {
    using C = ComputeT<T>;
    if constexpr (std::is_same_v<C, float>) {
      float v = Up(x);
      return Down<T>(std::isnan(v) ? v : FastErf(v));
    } else {
      return Down<T>(std::erf(static_cast<double>(Up(x))));
    }
  }
};

struct AbsOp : UnaryOpBase {
  static constexpr const char* kName = "Abs";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;
  template <typename T>
  T Apply(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x;
    } else if constexpr (std::is_integral_v<T>) {
      return x < 0 ? static_cast<T>(-x) : x;
    } else {
      return Down<T>(std::fabs(Up(x)));
    }
  }
};

struct SignOp : UnaryOpBase {
  static constexpr const char* kName = "Sign";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;
  template <typename T>
  T Apply(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x != 0 ? T(1) : T(0);
    } else {
      auto a = Up(x);
      using C = decltype(a);
      if constexpr (std::is_floating_point_v<C>) {
        if (std::isnan(a)) return x;
      }
      return Down<T>(a > C(0) ? C(1) : (a < C(0) ? C(-1) : C(0)));
    }
  }
};

struct NotOp : UnaryOpBase {
  static constexpr const char* kName = "Not";
  static constexpr TypeClass kTypes = TypeClass::kBool;
  template <typename T>
  bool Apply(T x) const {
    return !x;
  }
};

struct IsNaNOp : UnaryOpBase {
  static constexpr const char* kName = "IsNaN";
  static constexpr TypeClass kTypes = TypeClass::kFloat;
  template <typename T>
  using Out = bool;
  template <typename T>
  bool Apply(T x) const {
    return std::isnan(Up(x));
  }
};

struct IsInfOp : UnaryOpBase {
  static constexpr const char* kName = "IsInf";
  static constexpr TypeClass kTypes = TypeClass::kFloat;
  template <typename T>
  using Out = bool;
  bool positive = true, negative = true;
  Status Init(const Node& node) {
    positive = node.GetInt("detect_positive", 1) != 0;
    negative = node.GetInt("detect_negative", 1) != 0;
    return Status::Ok();
  }
  template <typename T>
  bool Apply(T x) const {
    auto v = Up(x);
    return std::isinf(v) && (v > 0 ? positive : negative);
  }
};

}  // namespace

void RegisterUnaryKernels(KernelRegistry& r) {
  // Opset 6/13 revisions of these only widened type lists (bfloat16), so one registration each.
  AddUnary<AbsOp>(r, 6);
  AddUnary<NegOp>(r, 6);
  AddUnary<ReciprocalOp>(r, 6);
  AddUnary<FloorOp>(r, 6);
  AddUnary<CeilOp>(r, 6);
  AddUnary<RoundOp>(r, 11);
  AddUnary<SqrtOp>(r, 6);
  AddUnary<ExpOp>(r, 6);
  AddUnary<LogOp>(r, 6);
  AddUnary<SinOp>(r, 7);
  AddUnary<CosOp>(r, 7);
  AddUnary<TanOp>(r, 7);
  AddUnary<AsinOp>(r, 7);
  AddUnary<AcosOp>(r, 7);
  AddUnary<AtanOp>(r, 7);
  AddUnary<SinhOp>(r, 9);
  AddUnary<CoshOp>(r, 9);
  AddUnary<AsinhOp>(r, 9);
  AddUnary<AcoshOp>(r, 9);
  AddUnary<AtanhOp>(r, 9);
  AddUnary<ErfOp>(r, 9);
  AddUnary<SignOp>(r, 9);
  AddUnary<IsNaNOp>(r, 9);
  AddUnary<IsInfOp>(r, 10);
  AddUnary<NotOp>(r, 1);
  AddUnary<BitwiseNotOp>(r, 18);
}

}  // namespace inferd::cpu
