// Building blocks of the element-wise CPU kernels (elementwise/*.cc) and reductions
// (reduction/reduce.cc): type classes and dispatch, float16/bfloat16 widening, and the binary and
// unary loops over a broadcast plan (util/broadcast.h), whose inner loops are plain contiguous or
// scalar loops the compiler vectorizes.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"
#include "common/tensor.h"
#include "kernels/cpu/util/broadcast.h"
#include "kernels/cpu/util/kernel_util.h"
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

// ---- broadcast loops (plans: util/broadcast.h) ---------------------------------------------

// Minimum elements per thread for cheap element-wise loops.
inline constexpr int64_t kElementwiseGrain = 16384;

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

}  // namespace inferd::cpu
