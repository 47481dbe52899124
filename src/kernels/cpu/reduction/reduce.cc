// Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax/ArgMin.
//
// The input's dims are collapsed into groups of adjacent kept or reduced dims (size-1 dims drop
// out), which leaves three loop shapes:
//   inner   [K, R]      reduce contiguous rows (LayerNorm-style means, global sums)
//   middle  [K, R, K2]  accumulate whole rows of K2 outputs at a time (channel/batch reductions)
//   general anything else: per output, gather over precomputed reduced offsets
// Accumulation is in double for floating-point inputs and in 64-bit integers for integer inputs.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/elementwise/elementwise_util.h"
#include "kernels/cpu/register.h"
#include "kernels/cpu/util/kernel_util.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {
namespace {

template <typename T>
using AccOf =
    std::conditional_t<std::is_integral_v<T>,
                       std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>, double>;

// Reduction policies: Acc<T> accumulator type, Init, Map (applied to each element; `s` is the
// per-output shift of LogSumExp, 0 otherwise), Combine (associative), Finalize (n = count).
struct SumP {
  static constexpr const char* kName = "ReduceSum";
  template <class T>
  using Acc = AccOf<T>;
  template <class A>
  static A Init() {
    return A(0);
  }
  template <class A>
  static A Map(A x, double) {
    return x;
  }
  template <class A>
  static A Combine(A a, A b) {
    return a + b;
  }
  template <class A>
  static A Finalize(A a, int64_t) {
    return a;
  }
};
struct SumSquareP : SumP {
  static constexpr const char* kName = "ReduceSumSquare";
  template <class A>
  static A Map(A x, double) {
    return x * x;
  }
};
struct L1P : SumP {
  static constexpr const char* kName = "ReduceL1";
  template <class A>
  static A Map(A x, double) {
    if constexpr (std::is_unsigned_v<A>) {
      return x;
    } else {
      return x < A(0) ? A(0) - x : x;
    }
  }
};
struct MeanP : SumP {
  static constexpr const char* kName = "ReduceMean";
  template <class T>
  using Acc = double;
  template <class A>
  static A Finalize(A a, int64_t n) {
    return a / static_cast<A>(n);
  }
};
struct L2P : SumP {
  static constexpr const char* kName = "ReduceL2";
  template <class T>
  using Acc = double;
  template <class A>
  static A Map(A x, double) {
    return x * x;
  }
  template <class A>
  static A Finalize(A a, int64_t) {
    return std::sqrt(a);
  }
};
struct LogSumP : SumP {
  static constexpr const char* kName = "ReduceLogSum";
  template <class T>
  using Acc = double;
  template <class A>
  static A Finalize(A a, int64_t) {
    return std::log(a);
  }
};
// log(sum(exp(x - s))) + s with s = max over the reduced elements (computed in a first pass).
struct LogSumExpP : SumP {
  static constexpr const char* kName = "ReduceLogSumExp";
  template <class T>
  using Acc = double;
  template <class A>
  static A Map(A x, double s) {
    return std::exp(x - s);
  }
};
struct ProdP : SumP {
  static constexpr const char* kName = "ReduceProd";
  template <class A>
  static A Init() {
    return A(1);
  }
  template <class A>
  static A Combine(A a, A b) {
    return a * b;
  }
};
// Max/Min propagate NaN (numpy semantics).
struct MaxP : SumP {
  static constexpr const char* kName = "ReduceMax";
  template <class A>
  static A Init() {
    if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
    return std::numeric_limits<A>::lowest();
  }
  template <class A>
  static A Combine(A a, A b) {
    if constexpr (std::is_floating_point_v<A>) {
      if (std::isnan(a)) return a;
    }
    return a >= b ? a : b;
  }
};
struct MinP : SumP {
  static constexpr const char* kName = "ReduceMin";
  template <class A>
  static A Init() {
    if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
    return std::numeric_limits<A>::max();
  }
  template <class A>
  static A Combine(A a, A b) {
    if constexpr (std::is_floating_point_v<A>) {
      if (std::isnan(a)) return a;
    }
    return a <= b ? a : b;
  }
};

struct ReduceLayout {
  enum class Kind { kInner, kMiddle, kGeneral } kind = Kind::kInner;
  int64_t k = 1, r = 1, k2 = 1;  // inner/middle
  // general: kept groups (row-major output order) and reduced groups, with input strides.
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  int64_t out_count = 1, red_count = 1;
};

ReduceLayout MakeLayout(const Shape& shape, const std::vector<bool>& reduced) {
  std::vector<int64_t> dims;
  std::vector<bool> flags;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && flags.back() == reduced[d]) {
      dims.back() *= shape[d];
    } else {
      dims.push_back(shape[d]);
      flags.push_back(reduced[d]);
    }
  }
  ReduceLayout l;
  int num_red = 0;
  for (size_t g = 0; g < dims.size(); ++g) {
    if (flags[g]) {
      ++num_red;
      l.red_count *= dims[g];
    } else {
      l.out_count *= dims[g];
    }
  }
  if (num_red == 0) {  // nothing (or only size-1 dims) reduced: each output sees one element
    l.k = l.out_count;
    return l;
  }
  if (num_red == 1) {
    size_t g = std::find(flags.begin(), flags.end(), true) - flags.begin();
    for (size_t i = 0; i < g; ++i) l.k *= dims[i];
    l.r = dims[g];
    for (size_t i = g + 1; i < dims.size(); ++i) l.k2 *= dims[i];
    l.kind = l.k2 == 1 ? ReduceLayout::Kind::kInner : ReduceLayout::Kind::kMiddle;
    return l;
  }
  l.kind = ReduceLayout::Kind::kGeneral;
  std::vector<int64_t> strides = StridesOf(dims);
  for (size_t g = 0; g < dims.size(); ++g) {
    (flags[g] ? l.red_dims : l.kept_dims).push_back(dims[g]);
    (flags[g] ? l.red_strides : l.kept_strides).push_back(strides[g]);
  }
  return l;
}

// Reduces n contiguous elements with several independent accumulators (lets the compiler
// vectorize without reassociating a single chain).
template <typename T, typename P, typename A>
A ReduceContiguous(const T* x, int64_t n, double s) {
  constexpr int kLanes = 8;
  A part[kLanes];
  for (A& p : part) p = P::template Init<A>();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      part[j] = P::Combine(part[j], P::Map(static_cast<A>(Up(x[i + j])), s));
    }
  }
  A acc = P::template Init<A>();
  for (int j = 0; j < kLanes; ++j) acc = P::Combine(acc, part[j]);
  for (; i < n; ++i) acc = P::Combine(acc, P::Map(static_cast<A>(Up(x[i])), s));
  return acc;
}

// Runs policy P over x with layout l, calling emit(output_index, finalized accumulator).
// `shift` (per output, may be null) is passed to P::Map.
template <typename T, typename P, typename Emit>
void RunReduce(const T* x, const ReduceLayout& l, const double* shift, Emit&& emit) {
  using A = typename P::template Acc<T>;
  auto sh = [shift](int64_t o) { return shift ? shift[o] : 0.0; };
  constexpr int64_t kGrain = 32768;
  switch (l.kind) {
    case ReduceLayout::Kind::kInner: {
      const int64_t r = l.r;
      int threads = omp_get_max_threads();
      if (l.k < threads && r >= 2 * kGrain && !omp_in_parallel()) {
        // Few long rows: split each row across threads.
        for (int64_t k = 0; k < l.k; ++k) {
          int chunks = static_cast<int>(std::min<int64_t>(threads, r / kGrain));
          std::vector<A> parts(chunks);
          const T* row = x + k * r;
#pragma omp parallel for num_threads(chunks) schedule(static)
          for (int c = 0; c < chunks; ++c) {
            int64_t b = r * c / chunks, e = r * (c + 1) / chunks;
            parts[c] = ReduceContiguous<T, P, A>(row + b, e - b, sh(k));
          }
          A acc = P::template Init<A>();
          for (A p : parts) acc = P::Combine(acc, p);
          emit(k, P::Finalize(acc, r));
        }
        return;
      }
      ParallelFor(l.k, std::max<int64_t>(1, kGrain / std::max<int64_t>(r, 1)),
                  [&](int64_t b, int64_t e) {
                    for (int64_t k = b; k < e; ++k) {
                      emit(k, P::Finalize(ReduceContiguous<T, P, A>(x + k * r, r, sh(k)), r));
                    }
                  });
      return;
    }
    case ReduceLayout::Kind::kMiddle: {
      constexpr int64_t kBlock = 256;
      const int64_t blocks = (l.k2 + kBlock - 1) / kBlock;
      ParallelFor(
          l.k * blocks, std::max<int64_t>(1, kGrain / (l.r * kBlock)), [&](int64_t b, int64_t e) {
            A acc[kBlock];
            for (int64_t t = b; t < e; ++t) {
              const int64_t k = t / blocks, j0 = (t % blocks) * kBlock;
              const int64_t n = std::min(kBlock, l.k2 - j0);
              const int64_t o0 = k * l.k2 + j0;
              for (int64_t j = 0; j < n; ++j) acc[j] = P::template Init<A>();
              for (int64_t r = 0; r < l.r; ++r) {
                const T* row = x + (k * l.r + r) * l.k2 + j0;
                if (shift == nullptr) {
                  for (int64_t j = 0; j < n; ++j) {
                    acc[j] = P::Combine(acc[j], P::Map(static_cast<A>(Up(row[j])), 0.0));
                  }
                } else {
                  for (int64_t j = 0; j < n; ++j) {
                    acc[j] = P::Combine(acc[j], P::Map(static_cast<A>(Up(row[j])), shift[o0 + j]));
                  }
                }
              }
              for (int64_t j = 0; j < n; ++j) emit(o0 + j, P::Finalize(acc[j], l.r));
            }
          });
      return;
    }
    case ReduceLayout::Kind::kGeneral: {
      // Offsets of every reduced position relative to an output's base offset.
      std::vector<int64_t> roff(static_cast<size_t>(l.red_count), 0);
      {
        std::vector<int64_t> idx(l.red_dims.size(), 0);
        for (int64_t i = 0; i < l.red_count; ++i) {
          int64_t off = 0;
          for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * l.red_strides[d];
          roff[i] = off;
          for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
            if (++idx[d] < l.red_dims[d]) break;
            idx[d] = 0;
          }
        }
      }
      ParallelFor(l.out_count, std::max<int64_t>(1, kGrain / l.red_count),
                  [&](int64_t b, int64_t e) {
                    for (int64_t o = b; o < e; ++o) {
                      int64_t base = 0, rem = o;
                      for (int64_t d = static_cast<int64_t>(l.kept_dims.size()) - 1; d >= 0; --d) {
                        base += (rem % l.kept_dims[d]) * l.kept_strides[d];
                        rem /= l.kept_dims[d];
                      }
                      A acc = P::template Init<A>();
                      const double s = sh(o);
                      for (int64_t i = 0; i < l.red_count; ++i) {
                        acc = P::Combine(acc, P::Map(static_cast<A>(Up(x[base + roff[i]])), s));
                      }
                      emit(o, P::Finalize(acc, l.red_count));
                    }
                  });
      return;
    }
  }
}

template <typename P>
class ReduceKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    keepdims_ = n.GetInt("keepdims", 1) != 0;
    noop_with_empty_axes_ = n.GetInt("noop_with_empty_axes", 0) != 0;
    has_axes_attr_ = n.HasAttribute("axes");
    axes_attr_ = n.GetInts("axes");
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr) return InvalidArgument("{} needs an input", P::kName);
    std::vector<int64_t> axes = axes_attr_;
    if (!has_axes_attr_ && ctx.Input(1) != nullptr) {
      ASSIGN_OR_RETURN(axes, ctx.Input(1)->ToInt64Vector());
    }
    const int64_t rank = x->rank();
    std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
    if (axes.empty() && noop_with_empty_axes_) {
      Tensor* out = ctx.AllocateOutput(0, x->dtype(), x->shape());
      if (x->ByteSize() > 0) std::memcpy(out->raw_data(), x->raw_data(), x->ByteSize());
      return Status::Ok();
    }
    for (int64_t a : axes) {
      if (a < -rank || a >= rank) {
        return InvalidArgument("{}: axis {} is out of range for rank {}", P::kName, a, rank);
      }
      reduced[a < 0 ? a + rank : a] = true;
    }
    Shape out_shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[d]) {
        out_shape.push_back(x->dim(d));
      } else if (keepdims_) {
        out_shape.push_back(1);
      }
    }
    return DispatchClass<TypeClass::kNumeric>(x->dtype(), P::kName, [&](auto tag) -> Status {
      using T = decltype(tag);
      using A = typename P::template Acc<T>;
      Tensor* out = ctx.AllocateOutput(0, x->dtype(), out_shape);
      T* y = out->data<T>();
      const int64_t out_count = out->NumElements();
      if (out_count == 0) return Status::Ok();
      if (x->NumElements() == 0) {  // reducing an empty set
        A init = P::Finalize(P::template Init<A>(), 0);
        if constexpr (std::is_same_v<P, LogSumExpP>) init = std::log(init);  // log(0) = -inf
        const T v = Down<T>(init);
        std::fill(y, y + out_count, v);
        return Status::Ok();
      }
      ReduceLayout layout = MakeLayout(x->shape(), reduced);
      std::vector<double> shift;
      if constexpr (std::is_same_v<P, LogSumExpP>) {
        shift.resize(static_cast<size_t>(out_count));
        RunReduce<T, MaxP>(x->data<T>(), layout, nullptr, [&](int64_t o, auto m) {
          double s = static_cast<double>(m);
          shift[o] = std::isfinite(s) ? s : 0.0;
        });
      }
      const double* sp = shift.empty() ? nullptr : shift.data();
      RunReduce<T, P>(x->data<T>(), layout, sp, [&](int64_t o, A v) {
        if constexpr (std::is_same_v<P, LogSumExpP>) {
          y[o] = Down<T>(std::log(v) + sp[o]);
        } else {
          y[o] = Down<T>(v);
        }
      });
      return Status::Ok();
    });
  }

 private:
  bool keepdims_ = true;
  bool noop_with_empty_axes_ = false;
  bool has_axes_attr_ = false;
  std::vector<int64_t> axes_attr_;
};

// ArgMax/ArgMin along one axis; ties pick the first index (last with select_last_index=1), NaN
// counts as the extreme value (numpy semantics).
template <bool kMax>
class ArgKernel final : public OpKernel {
 public:
  static constexpr const char* kName = kMax ? "ArgMax" : "ArgMin";
  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    axis_ = n.GetInt("axis", 0);
    keepdims_ = n.GetInt("keepdims", 1) != 0;
    select_last_ = n.GetInt("select_last_index", 0) != 0;
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr) return InvalidArgument("{} needs an input", kName);
    const int64_t rank = x->rank();
    if (rank == 0 || axis_ < -rank || axis_ >= rank) {
      return InvalidArgument("{}: axis {} is out of range for rank {}", kName, axis_, rank);
    }
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    const int64_t r = x->dim(axis);
    if (r == 0) return InvalidArgument("{}: cannot reduce an empty axis {}", kName, axis);
    Shape out_shape;
    int64_t k = 1, k2 = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis) out_shape.push_back(x->dim(d));
      if (d == axis && keepdims_) out_shape.push_back(1);
      if (d < axis) k *= x->dim(d);
      if (d > axis) k2 *= x->dim(d);
    }
    return DispatchClass<TypeClass::kNumeric>(x->dtype(), kName, [&](auto tag) -> Status {
      using T = decltype(tag);
      using C = ComputeT<T>;
      Tensor* out = ctx.AllocateOutput(0, DataType::kInt64, out_shape);
      int64_t* y = out->data<int64_t>();
      const T* xp = x->data<T>();
      const bool last = select_last_;
      ParallelFor(k * k2, std::max<int64_t>(1, 16384 / r), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const int64_t kk = o / k2, j = o % k2;
          const T* p = xp + kk * r * k2 + j;
          C best = Up(p[0]);
          int64_t bi = 0;
          for (int64_t i = 1; i < r; ++i) {
            C v = Up(p[i * k2]);
            bool better;
            if constexpr (std::is_floating_point_v<C>) {
              if (std::isnan(best)) {
                better = last && std::isnan(v);
              } else {
                better = std::isnan(v) || (kMax ? v > best : v < best) || (last && v == best);
              }
            } else {
              better = (kMax ? v > best : v < best) || (last && v == best);
            }
            if (better) {
              best = v;
              bi = i;
            }
          }
          y[o] = bi;
        }
      });
      return Status::Ok();
    });
  }

 private:
  int64_t axis_ = 0;
  bool keepdims_ = true;
  bool select_last_ = false;
};

template <typename P>
void AddReduce(KernelRegistry& r) {
  // Axes come from the attribute, or from input 1 when the attribute is absent (ReduceSum from
  // opset 13, the others from 18), so one registration covers every version.
  r.Add(P::kName, 1, kOpsetMax, NumericTypes(), MakeKernel<ReduceKernel<P>>());
}

}  // namespace

void RegisterReductionKernels(KernelRegistry& r) {
  AddReduce<SumP>(r);
  AddReduce<MeanP>(r);
  AddReduce<MaxP>(r);
  AddReduce<MinP>(r);
  AddReduce<ProdP>(r);
  AddReduce<L1P>(r);
  AddReduce<L2P>(r);
  AddReduce<LogSumP>(r);
  AddReduce<LogSumExpP>(r);
  AddReduce<SumSquareP>(r);
  r.Add("ArgMax", 1, kOpsetMax, NumericTypes(), MakeKernel<ArgKernel<true>>());
  r.Add("ArgMin", 1, kOpsetMax, NumericTypes(), MakeKernel<ArgKernel<false>>());
}

}  // namespace inferd::cpu
