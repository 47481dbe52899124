// Unary math ops: Abs, Neg, rounding, roots, exp/log, trigonometric and hyperbolic functions,
// Erf, Sign, IsNaN, IsInf, Not, BitwiseNot.
#include "kernels/cpu/elementwise_unary.h"

#include <cmath>

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
// Erf on integers (allowed by the spec) is computed in double.
INFERD_SIMPLE_UNARY(Erf, TypeClass::kNumeric,
                    std::erf(std::conditional_t<std::is_integral_v<C>, double, C>(a)))

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
