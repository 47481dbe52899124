// The unary element-wise kernel template shared by unary.cc (math) and
// activation.cc (activations).
//
// An op is a struct with kName, kTypes (a TypeClass), `template <class T> using Out` (the output
// element type for input T), `Status Init(const Node&)` (parses attributes) and
// `template <class T> Out<T> Apply(T x) const`. An op may add `std::tuple<EltwiseAlg, float, float>
// Dnnl() const` (algorithm, alpha, beta) to run large float32 inputs on oneDNN. Float ops compute
// in ComputeT<T> (float for float16/bfloat16) through the INFERD_FLOAT_UNARY helper below.
#pragma once

#include <tuple>

#include "kernels/cpu/elementwise/elementwise_util.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {

struct UnaryOpBase {
  Status Init(const Node&) { return Status::Ok(); }
  template <typename T>
  using Out = T;
};

template <typename Op>
class UnaryKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override { return op_.Init(info.node()); }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr) return InvalidArgument("{} needs an input", Op::kName);
    if constexpr (requires { op_.Dnnl(); }) {
      if (x->dtype() == DataType::kFloat32 && x->NumElements() >= kDnnlEltwiseMin) {
        auto [alg, alpha, beta] = op_.Dnnl();
        Tensor* out = ctx.AllocateOutput(0, DataType::kFloat32, x->shape());
        if (DnnlEltwise(alg, alpha, beta, x->data<float>(), out->data<float>(), x->NumElements())) {
          return Status::Ok();
        }
      }
    }
    return DispatchClass<Op::kTypes>(x->dtype(), Op::kName, [&](auto tag) -> Status {
      using T = decltype(tag);
      using O = typename Op::template Out<T>;
      Tensor* out = ctx.AllocateOutput(0, DataTypeOf<O>::value, x->shape());
      const Op op = op_;
      UnaryMap(x->data<T>(), out->data<O>(), x->NumElements(),
               [op](T v) -> O { return op.template Apply<T>(v); });
      return Status::Ok();
    });
  }

 private:
  Op op_;
};

template <typename Op>
void AddUnary(KernelRegistry& r, int since, int until = kOpsetMax) {
  r.Add(Op::kName, since, until, TypesOf(Op::kTypes), MakeKernel<UnaryKernel<Op>>());
}

}  // namespace inferd::cpu

// Declares an attribute-free op computing `expr` on `a` (of type C = ComputeT<T>).
#define INFERD_SIMPLE_UNARY(Name, Types, expr) INFERD_SIMPLE_UNARY_EXTRA(Name, Types, expr, )

// As INFERD_SIMPLE_UNARY, with extra member declarations (e.g. a Dnnl() fast path).
#define INFERD_SIMPLE_UNARY_EXTRA(Name, Types, expr, extra) \
  struct Name##Op : ::inferd::cpu::UnaryOpBase {            \
    extra static constexpr const char* kName = #Name;       \
    static constexpr TypeClass kTypes = Types;              \
    template <typename T>                                   \
    T Apply(T x) const {                                    \
      using C = ComputeT<T>;                                \
      C a = Up(x);                                          \
      (void)sizeof(C);                                      \
      return Down<T>(expr);                                 \
    }                                                       \
  };

// The Dnnl() member for INFERD_SIMPLE_UNARY_EXTRA: `INFERD_DNNL_ALG(EltwiseAlg::kExp)`.
#define INFERD_DNNL_ALG(alg) \
  std::tuple<::inferd::cpu::EltwiseAlg, float, float> Dnnl() const { return {alg, 0.f, 0.f}; }
