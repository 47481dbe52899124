// Binary element-wise ops with numpy broadcasting: arithmetic, comparison, logical, bitwise, Pow.
#include <cmath>
#include <string>

#include "kernels/cpu/elementwise/elementwise_util.h"
#include "kernels/cpu/elementwise/register.h"
#include "kernels/cpu/util/broadcast.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {
namespace {

// An op struct provides kName, kTypes, `template <class T> using Out` (T or bool), Init(node)
// and `template <class T> Out<T> Apply(T a, T b) const`.
struct OpBase {
  Status Init(const Node&) { return Status::Ok(); }
};

template <typename T>
using Same = T;
template <typename T>
using Bool = bool;

// Arithmetic done in ComputeT<T> and rounded back to T.
#define INFERD_ARITH_OP(Name, Types, expr)      \
  struct Name##Op : OpBase {                    \
    static constexpr const char* kName = #Name; \
    static constexpr TypeClass kTypes = Types;  \
    template <typename T>                       \
    using Out = T;                              \
    template <typename T>                       \
    T Apply(T x, T y) const {                   \
      using C = ComputeT<T>;                    \
      C a = Up(x), b = Up(y);                   \
      return Down<T>(expr);                     \
    }                                           \
  };
INFERD_ARITH_OP(Add, TypeClass::kNumeric, a + b)
INFERD_ARITH_OP(Sub, TypeClass::kNumeric, a - b)
INFERD_ARITH_OP(Mul, TypeClass::kNumeric, a* b)
INFERD_ARITH_OP(BitwiseAnd, TypeClass::kInteger, a& b)
INFERD_ARITH_OP(BitwiseOr, TypeClass::kInteger, a | b)
INFERD_ARITH_OP(BitwiseXor, TypeClass::kInteger, a ^ b)
#undef INFERD_ARITH_OP

#define INFERD_COMPARE_OP(Name, Types, expr)    \
  struct Name##Op : OpBase {                    \
    static constexpr const char* kName = #Name; \
    static constexpr TypeClass kTypes = Types;  \
    template <typename T>                       \
    using Out = bool;                           \
    template <typename T>                       \
    bool Apply(T x, T y) const {                \
      auto a = Up(x);                           \
      auto b = Up(y);                           \
      return expr;                              \
    }                                           \
  };
INFERD_COMPARE_OP(Equal, TypeClass::kAll, a == b)
INFERD_COMPARE_OP(Less, TypeClass::kNumeric, a < b)
INFERD_COMPARE_OP(LessOrEqual, TypeClass::kNumeric, a <= b)
INFERD_COMPARE_OP(Greater, TypeClass::kNumeric, a > b)
INFERD_COMPARE_OP(GreaterOrEqual, TypeClass::kNumeric, a >= b)
INFERD_COMPARE_OP(And, TypeClass::kBool, a&& b)
INFERD_COMPARE_OP(Or, TypeClass::kBool, a || b)
INFERD_COMPARE_OP(Xor, TypeClass::kBool, a != b)
#undef INFERD_COMPARE_OP

// Integer division truncates toward zero; division by zero yields 0 instead of trapping, and
// MIN / -1 wraps.
struct DivOp : OpBase {
  static constexpr const char* kName = "Div";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;
  template <typename T>
  using Out = T;
  template <typename T>
  T Apply(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      if (y == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (y == T(-1)) return static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(x));
      }
      return static_cast<T>(x / y);
    } else {
      return Down<T>(Up(x) / Up(y));
    }
  }
};

// fmod=0: the result takes the divisor's sign (numpy.mod); fmod=1: the dividend's (C fmod).
struct ModOp {
  static constexpr const char* kName = "Mod";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;
  template <typename T>
  using Out = T;
  bool fmod = false;
  Status Init(const Node& node) {
    int64_t f = node.GetInt("fmod", 0);
    if (f != 0 && f != 1) return InvalidArgument("Mod: fmod must be 0 or 1, got {}", f);
    fmod = f == 1;
    return Status::Ok();
  }
  template <typename T>
  T Apply(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      if (y == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (y == T(-1)) return T(0);
        T r = static_cast<T>(x % y);
        if (!fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
        return r;
      } else {
        return static_cast<T>(x % y);
      }
    } else {
      auto a = Up(x), b = Up(y);
      auto r = std::fmod(a, b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return Down<T>(r);
    }
  }
};

struct BitShiftOp {
  static constexpr const char* kName = "BitShift";
  static constexpr TypeClass kTypes = TypeClass::kUnsigned;
  template <typename T>
  using Out = T;
  bool left = true;
  Status Init(const Node& node) {
    std::string dir = node.GetString("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") {
      return InvalidArgument("BitShift: direction must be LEFT or RIGHT, got '{}'", dir);
    }
    left = dir == "LEFT";
    return Status::Ok();
  }
  template <typename T>
  T Apply(T x, T y) const {
    if (static_cast<uint64_t>(y) >= sizeof(T) * 8)
      return T(0);  // shifting all bits out (and no UB)
    return static_cast<T>(left ? x << y : x >> y);
  }
};

template <typename Op>
class BinaryKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override { return op_.Init(info.node()); }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.Input(0);
    const Tensor* b = ctx.Input(1);
    if (a == nullptr || b == nullptr) return InvalidArgument("{} needs two inputs", Op::kName);
    if (a->dtype() != b->dtype()) {
      return InvalidArgument("{}: input types differ ({} vs {})", Op::kName,
                             DataTypeName(a->dtype()), DataTypeName(b->dtype()));
    }
    ASSIGN_OR_RETURN(Shape out_shape, BroadcastOutputShape(Op::kName, {a, b}));
    return DispatchClass<Op::kTypes>(a->dtype(), Op::kName, [&](auto tag) -> Status {
      using T = decltype(tag);
      using O = typename Op::template Out<T>;
      Tensor* out = ctx.AllocateOutput(0, DataTypeOf<O>::value, out_shape);
      BroadcastPlan plan = PlanBroadcast(out_shape, {a->shape(), b->shape()});
      const Op op = op_;
      BinaryBroadcast(a->data<T>(), b->data<T>(), out->data<O>(), plan,
                      [op](T x, T y) -> O { return op.template Apply<T>(x, y); });
      return Status::Ok();
    });
  }

 private:
  Op op_;
};

// Integer power by squaring; negative exponents give 0 unless |base| == 1.
template <typename T, typename E>
T IntPow(T base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if constexpr (std::is_signed_v<T>) {
        if (base == -1) return (exp % 2 == 0) ? T(1) : T(-1);
      }
      return 0;
    }
  }
  T result = 1;
  using U = std::make_unsigned_t<T>;
  U b = static_cast<U>(base), r = 1;
  uint64_t e = static_cast<uint64_t>(exp);
  while (e) {
    if (e & 1) r = static_cast<U>(r * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  result = static_cast<T>(r);
  return result;
}

// Pow: the exponent may have a different numeric type than the base (opset >= 12). A differently
// typed exponent is widened to double first (it is usually a scalar).
class PowKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.Input(0);
    const Tensor* b = ctx.Input(1);
    if (a == nullptr || b == nullptr) return InvalidArgument("Pow needs two inputs");
    ASSIGN_OR_RETURN(Shape out_shape, BroadcastOutputShape("Pow", {a, b}));
    BroadcastPlan plan = PlanBroadcast(out_shape, {a->shape(), b->shape()});
    return DispatchClass<TypeClass::kNumeric>(a->dtype(), "Pow", [&](auto tag) -> Status {
      using T = decltype(tag);
      using C = ComputeT<T>;
      Tensor* out = ctx.AllocateOutput(0, a->dtype(), out_shape);
      const T* x = a->data<T>();
      T* z = out->data<T>();
      if (b->dtype() == a->dtype()) {
        const T* y = b->data<T>();
        if constexpr (std::is_integral_v<T>) {
          BinaryBroadcast(x, y, z, plan, [](T p, T q) { return IntPow(p, q); });
        } else {
          if (b->NumElements() == 1 && static_cast<float>(Up(y[0])) == 2.0f) {
            UnaryMap(x, z, out->NumElements(), [](T p) { return Down<T>(Up(p) * Up(p)); });
          } else {
            BinaryBroadcast(x, y, z, plan, [](T p, T q) {
              return Down<T>(std::pow(Up(p), static_cast<C>(Up(q))));
            });
          }
        }
        return Status::Ok();
      }
      // Mixed types: exponent as double.
      std::vector<double> e(static_cast<size_t>(b->NumElements()));
      bool integral_exp = IsInteger(b->dtype());
      for (size_t i = 0; i < e.size(); ++i) e[i] = b->GetAsDouble(static_cast<int64_t>(i));
      if (!IsSupportedDataType(b->dtype()) || b->dtype() == DataType::kBool) {
        return InvalidArgument("Pow: exponent type {} is not supported", DataTypeName(b->dtype()));
      }
      if constexpr (std::is_integral_v<T>) {
        if (integral_exp) {
          BinaryBroadcast(x, e.data(), z, plan,
                          [](T p, double q) { return IntPow(p, static_cast<int64_t>(q)); });
          return Status::Ok();
        }
      }
      BinaryBroadcast(x, e.data(), z, plan, [](T p, double q) {
        return Down<T>(std::pow(static_cast<double>(Up(p)), q));
      });
      return Status::Ok();
    });
  }
};

// Equal on string tensors (opset 19 allows them; earlier models get it too): byte-wise equality
// with numpy broadcasting, one element at a time.
class StringEqualKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.Input(0);
    const Tensor* b = ctx.Input(1);
    if (a == nullptr || b == nullptr) return InvalidArgument("Equal needs two inputs");
    if (!a->is_string() || !b->is_string()) {
      return InvalidArgument("Equal: cannot compare {} with {}", DataTypeName(a->dtype()),
                             DataTypeName(b->dtype()));
    }
    ASSIGN_OR_RETURN(Shape out_shape, BroadcastOutputShape("Equal", {a, b}));
    Tensor* out = ctx.AllocateOutput(0, DataType::kBool, out_shape);
    const int64_t n = out->NumElements();
    if (n == 0) return Status::Ok();
    BroadcastIterator it(PlanBroadcast(out_shape, {a->shape(), b->shape()}));
    const std::string* x = a->data<std::string>();
    const std::string* y = b->data<std::string>();
    bool* z = out->data<bool>();
    for (int64_t i = 0; i < n; ++i, it.Next()) z[i] = x[it.offset(0)] == y[it.offset(1)];
    return Status::Ok();
  }
};

template <typename Op>
void AddBinary(KernelRegistry& r, int since, int until = kOpsetMax) {
  r.Add(Op::kName, since, until, TypesOf(Op::kTypes), MakeKernel<BinaryKernel<Op>>());
}

}  // namespace

void RegisterBinaryKernels(KernelRegistry& r) {
  // Opset 7 introduced numpy broadcasting for these; later versions only widened type lists.
  AddBinary<AddOp>(r, 7);
  AddBinary<SubOp>(r, 7);
  AddBinary<MulOp>(r, 7);
  AddBinary<DivOp>(r, 7);
  AddBinary<ModOp>(r, 10);
  AddBinary<BitShiftOp>(r, 11);
  AddBinary<BitwiseAndOp>(r, 18);
  AddBinary<BitwiseOrOp>(r, 18);
  AddBinary<BitwiseXorOp>(r, 18);
  AddBinary<EqualOp>(r, 7);
  r.Add("Equal", 7, kOpsetMax, {DataType::kString}, MakeKernel<StringEqualKernel>());
  AddBinary<LessOp>(r, 7);
  AddBinary<LessOrEqualOp>(r, 12);
  AddBinary<GreaterOp>(r, 7);
  AddBinary<GreaterOrEqualOp>(r, 12);
  AddBinary<AndOp>(r, 7);
  AddBinary<OrOp>(r, 7);
  AddBinary<XorOp>(r, 7);
  r.Add("Pow", 7, kOpsetMax, NumericTypes(), MakeKernel<PowKernel>());
}

}  // namespace inferd::cpu
