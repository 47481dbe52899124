// Multi-input element-wise ops with numpy broadcasting: Sum, Mean, Max, Min (variadic), Where
// (ternary) and PRelu (slope broadcast to the input).
#include <cmath>
#include <cstring>

#include "kernels/cpu/elementwise/elementwise_util.h"
#include "kernels/cpu/elementwise/register.h"
#include "kernels/cpu/util/broadcast.h"
#include "kernels/cpu/util/string_index.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {
namespace {

template <typename C>
bool IsNan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

struct SumFold {
  static constexpr const char* kName = "Sum";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;
  template <typename C>
  static C Apply(C a, C b) {
    return a + b;
  }
};
struct MeanFold : SumFold {
  static constexpr const char* kName = "Mean";
};
// Max/Min propagate NaN like numpy.maximum/minimum.
struct MaxFold {
  static constexpr const char* kName = "Max";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;
  template <typename C>
  static C Apply(C a, C b) {
    return (a >= b || IsNan(a)) ? a : b;
  }
};
struct MinFold {
  static constexpr const char* kName = "Min";
  static constexpr TypeClass kTypes = TypeClass::kNumeric;
  template <typename C>
  static C Apply(C a, C b) {
    return (a <= b || IsNan(a)) ? a : b;
  }
};

// Folds the inputs pairwise into the output: out = in0 ∘ in1, then out = out ∘ in_k.
template <typename Fold>
class VariadicKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    std::vector<const Tensor*> ins;
    for (size_t i = 0; i < ctx.NumInputs(); ++i) {
      if (ctx.Input(i) != nullptr) ins.push_back(ctx.Input(i));
    }
    if (ins.empty()) return InvalidArgument("{} needs at least one input", Fold::kName);
    for (const Tensor* t : ins) {
      if (t->dtype() != ins[0]->dtype()) {
        return InvalidArgument("{}: input types differ ({} vs {})", Fold::kName,
                               DataTypeName(ins[0]->dtype()), DataTypeName(t->dtype()));
      }
    }
    ASSIGN_OR_RETURN(Shape out_shape, BroadcastOutputShape(Fold::kName, ins));
    return DispatchClass<Fold::kTypes>(ins[0]->dtype(), Fold::kName, [&](auto tag) -> Status {
      using T = decltype(tag);
      Tensor* out = ctx.AllocateOutput(0, ins[0]->dtype(), out_shape);
      T* z = out->data<T>();
      auto f = [](T x, T y) { return Down<T>(Fold::Apply(Up(x), Up(y))); };
      if (ins.size() == 1) {
        if (out->ByteSize() > 0) std::memcpy(z, ins[0]->raw_data(), out->ByteSize());
      } else {
        BinaryBroadcast(ins[0]->data<T>(), ins[1]->data<T>(), z,
                        PlanBroadcast(out_shape, {ins[0]->shape(), ins[1]->shape()}), f);
        for (size_t k = 2; k < ins.size(); ++k) {
          BinaryBroadcast(static_cast<const T*>(z), ins[k]->data<T>(), z,
                          PlanBroadcast(out_shape, {out_shape, ins[k]->shape()}), f);
        }
      }
      if constexpr (std::is_same_v<Fold, MeanFold>) {
        const auto n = static_cast<ComputeT<T>>(ins.size());
        UnaryMap(static_cast<const T*>(z), z, out->NumElements(),
                 [n](T x) { return Down<T>(Up(x) / n); });
      }
      return Status::Ok();
    });
  }
};

// Where(condition, X, Y): selects by a broadcast bool condition; moves bytes, so it dispatches on
// element size only.
class WhereKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor* c = ctx.Input(0);
    const Tensor* x = ctx.Input(1);
    const Tensor* y = ctx.Input(2);
    if (c == nullptr || x == nullptr || y == nullptr) {
      return InvalidArgument("Where needs three inputs");
    }
    if (c->dtype() != DataType::kBool) {
      return InvalidArgument("Where: condition must be bool, got {}", DataTypeName(c->dtype()));
    }
    if (x->dtype() != y->dtype()) {
      return InvalidArgument("Where: X and Y types differ ({} vs {})", DataTypeName(x->dtype()),
                             DataTypeName(y->dtype()));
    }
    ASSIGN_OR_RETURN(Shape out_shape, BroadcastOutputShape("Where", {c, x, y}));
    Tensor* out = ctx.AllocateOutput(0, x->dtype(), out_shape);
    BroadcastPlan plan = PlanBroadcast(out_shape, {c->shape(), x->shape(), y->shape()});
    const int64_t sc = plan.strides[0].back(), sx = plan.strides[1].back(),
                  sy = plan.strides[2].back();
    return DispatchBySize(
        x->dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          const bool* cp = c->data<bool>();
          const T* xp = x->data<T>();
          const T* yp = y->data<T>();
          T* zp = out->data<T>();
          ForEachSegment<3>(plan, kElementwiseGrain,
                            [&](const std::array<int64_t, 3>& off, int64_t o, int64_t n) {
                              const bool* cc = cp + off[0];
                              const T* xx = xp + off[1];
                              const T* yy = yp + off[2];
                              T* zz = zp + o;
                              if (sc && sx && sy) {
                                for (int64_t i = 0; i < n; ++i) zz[i] = cc[i] ? xx[i] : yy[i];
                              } else {
                                for (int64_t i = 0; i < n; ++i) {
                                  zz[i] = cc[i * sc] ? xx[i * sx] : yy[i * sy];
                                }
                              }
                            });
          return Status::Ok();
        },
        [&]() -> Status {
          return InvalidArgument("Where: element type {} is not supported",
                                 DataTypeName(x->dtype()));
        });
  }
};

// PRelu(X, slope): slope is broadcast unidirectionally to X's shape.
class PReluKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* s = ctx.Input(1);
    if (x == nullptr || s == nullptr) return InvalidArgument("PRelu needs two inputs");
    if (x->dtype() != s->dtype()) {
      return InvalidArgument("PRelu: X and slope types differ ({} vs {})", DataTypeName(x->dtype()),
                             DataTypeName(s->dtype()));
    }
    ASSIGN_OR_RETURN(Shape out_shape, BroadcastOutputShape("PRelu", {x, s}));
    if (out_shape != x->shape()) {
      return InvalidArgument("PRelu: slope shape {} does not broadcast to X shape {}",
                             ShapeToString(s->shape()), ShapeToString(x->shape()));
    }
    return DispatchClass<TypeClass::kNumeric>(x->dtype(), "PRelu", [&](auto tag) -> Status {
      using T = decltype(tag);
      Tensor* out = ctx.AllocateOutput(0, x->dtype(), out_shape);
      BinaryBroadcast(x->data<T>(), s->data<T>(), out->data<T>(),
                      PlanBroadcast(out_shape, {x->shape(), s->shape()}), [](T a, T b) {
                        auto v = Up(a);
                        return v < decltype(v)(0) ? Down<T>(v * Up(b)) : a;
                      });
      return Status::Ok();
    });
  }
};

}  // namespace

void RegisterVariadicKernels(KernelRegistry& r) {
  // Before opset 8 these required equal shapes, a special case of broadcasting.
  r.Add("Sum", 6, kOpsetMax, NumericTypes(), MakeKernel<VariadicKernel<SumFold>>());
  r.Add("Mean", 6, kOpsetMax, NumericTypes(), MakeKernel<VariadicKernel<MeanFold>>());
  r.Add("Max", 6, kOpsetMax, NumericTypes(), MakeKernel<VariadicKernel<MaxFold>>());
  r.Add("Min", 6, kOpsetMax, NumericTypes(), MakeKernel<VariadicKernel<MinFold>>());
  r.Add("Where", 9, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<WhereKernel>(), {1, 2}), /*type_input=*/1);
  r.Add("Where", 9, kOpsetMax, AllTypes(), MakeKernel<WhereKernel>(), /*type_input=*/1);
  r.Add("PRelu", 7, kOpsetMax, NumericTypes(), MakeKernel<PReluKernel>());
}

}  // namespace inferd::cpu
