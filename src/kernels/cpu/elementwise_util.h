// Building blocks of the element-wise CPU kernels (elementwise_*.cc) and reductions (reduce.cc):
// type classes and dispatch, float16/bfloat16 widening, and a broadcast engine whose inner loops
// are plain contiguous or scalar loops the compiler vectorizes.
//
// Broadcasting: PlanBroadcast() right-aligns the input shapes against the output, drops size-1
// output dims and merges adjacent dims where every input either steps contiguously or stays put.
// After that, the innermost dim has stride 1 or 0 for each input, so the common patterns all end
// in one tight loop:
//   same shape         [N,C] + [N,C]     → one dim, strides (1, 1)
//   scalar             [N,C] + []        → one dim, strides (1, 0)
//   row (bias)         [N,C] + [C]       → dims [N, C], inner strides (1, 1)
//   column / channel   [N,C,HW] + [C,1]  → dims [N, C, HW], inner strides (1, 0)
// ForEachSegment() splits the flat output range across OpenMP threads (also inside a single long
// row) and calls the segment function with each input's offset and the segment length.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"
#include "common/tensor.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/kernel_registry.h"

namespace inferd::cpu {

// ---- types ----------------------------------------------------------------------------------

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// The type arithmetic on T is done in: float for float16/bfloat16, T otherwise.
template <typename T>
using ComputeT = std::conditional_t<kIsHalf<T>, float, T>;

template <typename T>
inline ComputeT<T> Up(T v) {
  return static_cast<ComputeT<T>>(v);
}
template <typename T, typename C>
inline T Down(C v) {
  if constexpr (kIsHalf<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Value conversion between any two supported element types (Cast semantics: to bool is != 0,
// float to integer truncates, halves go through float).
template <typename Dst, typename Src>
inline Dst Convert(Src v) {
  if constexpr (std::is_same_v<Dst, Src>) {
    return v;
  } else if constexpr (kIsHalf<Src>) {
    return Convert<Dst>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<Dst, bool>) {
    return v != Src(0);
  } else if constexpr (kIsHalf<Dst>) {
    return Dst(static_cast<float>(v));
  } else {
    return static_cast<Dst>(v);
  }
}

// Which element types an op accepts; dispatch instantiates the op only for those.
enum class TypeClass {
  kFloat,          // float32/64, float16, bfloat16
  kSignedNumeric,  // kFloat + signed integers
  kNumeric,        // kFloat + all integers
  kInteger,        // all integers
  kUnsigned,       // unsigned integers
  kBool,           // bool only
  kAll,            // kNumeric + bool
};

template <TypeClass C, typename T>
constexpr bool InClass() {
  constexpr bool is_float = std::is_floating_point_v<T> || kIsHalf<T>;
  constexpr bool is_bool = std::is_same_v<T, bool>;
  constexpr bool is_int = std::is_integral_v<T> && !is_bool;
  switch (C) {
    case TypeClass::kFloat:
      return is_float;
    case TypeClass::kSignedNumeric:
      return is_float || (is_int && std::is_signed_v<T>);
    case TypeClass::kNumeric:
      return is_float || is_int;
    case TypeClass::kInteger:
      return is_int;
    case TypeClass::kUnsigned:
      return is_int && std::is_unsigned_v<T>;
    case TypeClass::kBool:
      return is_bool;
    case TypeClass::kAll:
      return true;
  }
  return false;
}

// The registry's type list for a class.
std::vector<DataType> TypesOf(TypeClass c);

// Calls fn(T{}) (which returns Status) for dtype `t` if it is in class C, else InvalidArgument
// naming `op`.
template <TypeClass C, typename Fn>
Status DispatchClass(DataType t, const char* op, Fn&& fn) {
  return DispatchAll(
      t,
      [&](auto tag) -> Status {
        using T = decltype(tag);
        if constexpr (InClass<C, T>()) {
          return fn(tag);
        } else {
          return InvalidArgument("{}: element type {} is not supported", op, DataTypeName(t));
        }
      },
      [&]() -> Status {
        return InvalidArgument("{}: element type {} is not supported", op, DataTypeName(t));
      });
}

// ---- broadcasting ---------------------------------------------------------------------------

struct BroadcastPlan {
  Shape dims;                                 // collapsed output dims; never empty
  std::vector<std::vector<int64_t>> strides;  // per input, per collapsed dim (innermost 0 or 1)
  int64_t total = 0;                          // output element count
};

// `out` must be the broadcast of `inputs` (see BroadcastShapes).
BroadcastPlan PlanBroadcast(const Shape& out, const std::vector<Shape>& inputs);

// Minimum elements per thread for cheap element-wise loops.
inline constexpr int64_t kElementwiseGrain = 16384;

// Calls seg(offsets, out_offset, len) over the whole output, in parallel; offsets[k] is input k's
// element offset of the segment's first element and inner_stride(k) (0 or 1) its step.
template <size_t N, typename Seg>
void ForEachSegment(const BroadcastPlan& plan, int64_t grain, Seg&& seg) {
  const int64_t inner = plan.dims.back();
  const int64_t rank = static_cast<int64_t>(plan.dims.size());
  ParallelFor(plan.total, grain, [&](int64_t begin, int64_t end) {
    // Position the multi-index (without the inner dim) at begin's row.
    int64_t row = begin / inner, col = begin % inner;
    std::vector<int64_t> index(rank, 0);
    std::array<int64_t, N> base{};
    int64_t r = row;
    for (int64_t d = rank - 2; d >= 0; --d) {
      index[d] = r % plan.dims[d];
      r /= plan.dims[d];
      for (size_t k = 0; k < N; ++k) base[k] += index[d] * plan.strides[k][d];
    }
    int64_t pos = begin;
    while (pos < end) {
      int64_t len = std::min(inner - col, end - pos);
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = base[k] + col * plan.strides[k][rank - 1];
      seg(off, pos, len);
      pos += len;
      col = 0;
      // Next row: odometer over the outer dims.
      for (int64_t d = rank - 2; d >= 0; --d) {
        ++index[d];
        for (size_t k = 0; k < N; ++k) base[k] += plan.strides[k][d];
        if (index[d] < plan.dims[d]) break;
        for (size_t k = 0; k < N; ++k) base[k] -= index[d] * plan.strides[k][d];
        index[d] = 0;
      }
    }
  });
}

// out[i] = f(a[ia], b[ib]) over the broadcast of a and b. `out` may alias `a` when a has the
// output's shape (used to fold variadic ops in place).
template <typename A, typename B, typename O, typename F>
void BinaryBroadcast(const A* a, const B* b, O* out, const BroadcastPlan& plan, F f) {
  const bool va = plan.strides[0].back() != 0;
  const bool vb = plan.strides[1].back() != 0;
  ForEachSegment<2>(plan, kElementwiseGrain,
                    [&](const std::array<int64_t, 2>& off, int64_t o, int64_t n) {
                      const A* x = a + off[0];
                      const B* y = b + off[1];
                      O* z = out + o;
                      if (va && vb) {
                        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
                      } else if (va) {
                        const B y0 = *y;
                        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y0);
                      } else if (vb) {
                        const A x0 = *x;
                        for (int64_t i = 0; i < n; ++i) z[i] = f(x0, y[i]);
                      } else {
                        const O v = f(*x, *y);
                        for (int64_t i = 0; i < n; ++i) z[i] = v;
                      }
                    });
}

// out[i] = f(in[i]) over n elements, in parallel.
template <typename I, typename O, typename F>
void UnaryMap(const I* in, O* out, int64_t n, F f) {
  ParallelFor(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
}

// Broadcast output shape of the given tensors, with the op name in the error.
StatusOr<Shape> BroadcastOutputShape(const char* op, const std::vector<const Tensor*>& inputs);

// Reads a scalar (or one-element) tensor as T; InvalidArgument if it has more than one element.
template <typename T>
StatusOr<T> ReadScalar(const Tensor& t, const char* what) {
  if (t.NumElements() != 1) {
    return InvalidArgument("{} must be a scalar, got shape {}", what, ShapeToString(t.shape()));
  }
  if (t.dtype() != DataTypeOf<T>::value) {
    return InvalidArgument("{} has type {}, expected {}", what, DataTypeName(t.dtype()),
                           DataTypeName(DataTypeOf<T>::value));
  }
  return *t.data<T>();
}

// Transcendental float32 ops run on oneDNN's JIT eltwise kernels (vectorized exp/tanh/log) when
// the tensor is large enough to amortize primitive lookup.
enum class EltwiseAlg { kExp, kLogistic, kTanh, kLog, kSqrt, kMish, kElu };
inline constexpr int64_t kDnnlEltwiseMin = 4096;
// out[i] = alg(in[i]) for n floats; false if oneDNN refused (the caller then loops itself).
bool DnnlEltwise(EltwiseAlg alg, float alpha, float beta, const float* in, float* out, int64_t n);

// Registration of the element-wise families (called by RegisterElementwiseKernels).
void RegisterBinaryKernels(KernelRegistry& r);      // elementwise_binary.cc
void RegisterVariadicKernels(KernelRegistry& r);    // elementwise_variadic.cc (+ Where, PRelu)
void RegisterUnaryKernels(KernelRegistry& r);       // elementwise_unary.cc
void RegisterActivationKernels(KernelRegistry& r);  // elementwise_activation.cc
void RegisterCastKernels(KernelRegistry& r);        // elementwise_cast.cc

}  // namespace inferd::cpu
