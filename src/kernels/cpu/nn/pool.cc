// MaxPool, AveragePool, LpPool and their global forms.
//
// The common float32 cases run on oneDNN pooling_v2 (plain layouts, per-shape primitive cache).
// Everything else (MaxPool's Indices output, integer and float64 types, LpPool, AveragePool with
// count_include_pad where ceil_mode adds windows past the explicit padding) runs a plain loop.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cpu/nn/register.h"
#include "kernels/cpu/nn/window.h"
#include "kernels/cpu/onednn/dnnl_kernel.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

using dnnl::memory;

enum class PoolKind { kMax, kAverage, kLp };

// Buffers of one PlainPool call; `T` is the element type (accumulation is in double).
template <typename T>
struct PoolLoopArgs {
  const T* x;
  T* y;
  int64_t* indices;  // MaxPool only, may be null
  bool column_major_indices;
};

// Plain N-d pooling over planes [0, N*C).
template <typename T>
void PlainPool(PoolKind kind, const WindowGeometry& g, const Shape& xs, bool count_include_pad,
               float p, const PoolLoopArgs<T>& a) {
  const int64_t r = g.rank();
  const Shape in(xs.begin() + 2, xs.end());
  const int64_t planes = xs[0] * xs[1];
  const int64_t in_plane = NumElements(in), out_plane = NumElements(g.out);
  const std::vector<int64_t> in_strides = StridesOf(in);
  std::vector<int64_t> cm_strides(r, 1);  // column-major strides for storage_order=1
  for (int64_t d = 1; d < r; ++d) cm_strides[d] = cm_strides[d - 1] * in[d - 1];
  ParallelFor(planes, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> o(r), kk(r), pos(r);
    for (int64_t pl = begin; pl < end; ++pl) {
      const T* xp = a.x + pl * in_plane;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t oi = 0; oi < out_plane; ++oi) {
        double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
        T best = std::numeric_limits<T>::lowest();
        int64_t best_idx = -1, count = 0, padded_count = 0;
        std::fill(kk.begin(), kk.end(), 0);
        while (true) {
          bool inside = true, in_padded = true;
          int64_t off = 0;
          for (int64_t d = 0; d < r; ++d) {
            pos[d] = o[d] * g.strides[d] - g.pad_begin[d] + kk[d] * g.dilations[d];
            if (pos[d] < 0 || pos[d] >= in[d]) inside = false;
            if (pos[d] >= in[d] + g.pad_end_given[d]) in_padded = false;
            off += pos[d] * in_strides[d];
          }
          if (in_padded) ++padded_count;
          if (inside) {
            ++count;
            const T v = xp[off];
            if (kind == PoolKind::kMax) {
              if (best_idx < 0 || v > best) {
                best = v;
                best_idx = off;
                if (a.column_major_indices) {
                  best_idx = 0;
                  for (int64_t d = 0; d < r; ++d) best_idx += pos[d] * cm_strides[d];
                }
              }
            } else if (kind == PoolKind::kAverage) {
              acc += static_cast<double>(v);
            } else {
              acc += std::pow(std::fabs(static_cast<double>(v)), static_cast<double>(p));
            }
          }
          int64_t d = r - 1;
          for (; d >= 0; --d) {
            if (++kk[d] < g.kernel[d]) break;
            kk[d] = 0;
          }
          if (d < 0) break;
        }
        T out;
        if (kind == PoolKind::kMax) {
          out = best;
          if (a.indices) a.indices[pl * out_plane + oi] = best_idx < 0 ? -1 : pl * in_plane + best_idx;
        } else if (kind == PoolKind::kAverage) {
          const int64_t div = count_include_pad ? padded_count : count;
          out = FromFloat<T>(div > 0 ? acc / static_cast<double>(div) : 0.0);
        } else {
          out = FromFloat<T>(std::pow(acc, 1.0 / static_cast<double>(p)));
        }
        a.y[pl * out_plane + oi] = out;
        for (int64_t d = r - 1; d >= 0; --d) {
          if (++o[d] < g.out[d]) break;
          o[d] = 0;
        }
      }
    }
  });
}

template <typename T>
void GlobalPool(PoolKind kind, int64_t planes, int64_t plane, float p, const T* x, T* y) {
  ParallelFor(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t pl = begin; pl < end; ++pl) {
      const T* xp = x + pl * plane;
      if (kind == PoolKind::kMax) {
        T best = plane > 0 ? xp[0] : T{};
        for (int64_t i = 1; i < plane; ++i) best = xp[i] > best ? xp[i] : best;
        y[pl] = best;
      } else if (kind == PoolKind::kAverage) {
        if constexpr (std::is_same_v<T, float>) {
          float acc = 0.f;  // vectorizes; float accumulation is what every framework does here
#pragma omp simd reduction(+ : acc)
          for (int64_t i = 0; i < plane; ++i) acc += xp[i];
          y[pl] = plane > 0 ? acc / static_cast<float>(plane) : 0.f;
        } else {
          double acc = 0;
          for (int64_t i = 0; i < plane; ++i) acc += static_cast<double>(xp[i]);
          y[pl] = FromFloat<T>(plane > 0 ? acc / static_cast<double>(plane) : 0.0);
        }
      } else {
        double acc = 0;
        for (int64_t i = 0; i < plane; ++i) acc += std::pow(std::fabs(static_cast<double>(xp[i])), p);
        y[pl] = FromFloat<T>(std::pow(acc, 1.0 / p));
      }
    }
  });
}

class PoolKernel final : public DnnlKernel {
 public:
  PoolKernel(PoolKind kind, bool global) : kind_(kind), global_(global) {}

  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    p_ = static_cast<float>(node.GetInt("p", 2));
    if (global_) return Status::Ok();
    RETURN_IF_ERROR(attrs_.Parse(node, /*with_ceil_mode=*/true));
    if (attrs_.kernel_shape.empty()) {
      return InvalidArgument("{}: kernel_shape is required", node.Describe());
    }
    count_include_pad_ = node.GetInt("count_include_pad", 0) != 0;
    storage_order_ = node.GetInt("storage_order", 0);
    if (storage_order_ != 0 && storage_order_ != 1) {
      return InvalidArgument("{}: storage_order must be 0 or 1", node.Describe());
    }
    return Status::Ok();
  }

 private:
  struct Plan {
    dnnl::pooling_v2_forward prim;
    memory::desc src_md, dst_md;
  };

  Status Run(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    if (!x) return InvalidArgument("{}: X is required", node.Describe());
    const Shape& xs = x->shape();
    if (xs.size() < 3) {
      return InvalidArgument("{}: X must have rank >= 3 (N, C, spatial...), got {}",
                             node.Describe(), ShapeToString(xs));
    }
    const DataType dtype = x->dtype();
    const std::vector<int64_t> in(xs.begin() + 2, xs.end());
    if (global_) {
      Shape ys = {xs[0], xs[1]};
      ys.resize(xs.size(), 1);
      Tensor* y = ctx.AllocateOutput(0, dtype, ys);
      return Dispatch(dtype, node, [&](auto tag) {
        using T = decltype(tag);
        GlobalPool<T>(kind_, xs[0] * xs[1], NumElements(in), p_, x->data<T>(), y->data<T>());
      });
    }
    ASSIGN_OR_RETURN(WindowGeometry g, ResolveWindow(attrs_, in, attrs_.kernel_shape, node.Describe()));
    Shape ys = {xs[0], xs[1]};
    ys.insert(ys.end(), g.out.begin(), g.out.end());
    const bool want_indices = kind_ == PoolKind::kMax && ctx.OutputRequested(1);
    bool overhang = false;
    for (int64_t d = 0; d < g.rank(); ++d) overhang |= g.pad_end[d] != g.pad_end_given[d];
    const bool use_dnnl = dtype == DataType::kFloat32 && !want_indices && kind_ != PoolKind::kLp &&
                          xs.size() <= 5 && NumElements(ys) > 0 &&
                          !(kind_ == PoolKind::kAverage && count_include_pad_ && overhang);
    Tensor* y = ctx.AllocateOutputUninitialized(0, dtype, ys);  // every window writes its element
    if (NumElements(ys) == 0) return Status::Ok();
    if (use_dnnl) {
      ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, GetPlan(xs, ys, g));
      dnnl::engine& eng = DnnlEngine();
      dnnl::stream s(eng);
      memory src(plan->src_md, eng, const_cast<void*>(x->raw_data()));
      memory dst(plan->dst_md, eng, y->raw_data());
      ExecutePrimitive(plan->prim, s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
      s.wait();
      return Status::Ok();
    }
    int64_t* indices = want_indices ? ctx.AllocateOutput(1, DataType::kInt64, ys)->data<int64_t>() : nullptr;
    if (kind_ != PoolKind::kMax && !IsFloatingPoint(dtype)) {
      return InvalidArgument("{}: unsupported type {}", node.Describe(), DataTypeName(dtype));
    }
    return Dispatch(dtype, node, [&](auto tag) {
      using T = decltype(tag);
      PlainPool<T>(kind_, g, xs, count_include_pad_, p_,
                   {x->data<T>(), y->data<T>(), indices, storage_order_ == 1});
    });
  }

  template <typename Fn>
  static Status Dispatch(DataType dtype, const Node& node, Fn&& fn) {
    auto bad = [&] { return InvalidArgument("{}: unsupported type {}", node.Describe(), DataTypeName(dtype)); };
    switch (dtype) {
      case DataType::kFloat32: fn(float{}); return Status::Ok();
      case DataType::kFloat64: fn(double{}); return Status::Ok();
      case DataType::kFloat16: fn(Float16{}); return Status::Ok();
      case DataType::kBFloat16: fn(BFloat16{}); return Status::Ok();
      case DataType::kInt8: fn(int8_t{}); return Status::Ok();
      case DataType::kUInt8: fn(uint8_t{}); return Status::Ok();
      default: return bad();
    }
  }

  StatusOr<std::shared_ptr<const Plan>> GetPlan(const Shape& xs, const Shape& ys,
                                                const WindowGeometry& g) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(xs);
      if (it != cache_.end()) return it->second;
    }
    auto plan = std::make_shared<Plan>();
    plan->src_md = PlainDesc(ToDims(xs));
    plan->dst_md = PlainDesc(ToDims(ys));
    dnnl::algorithm alg = kind_ == PoolKind::kMax ? dnnl::algorithm::pooling_max
                          : count_include_pad_    ? dnnl::algorithm::pooling_avg_include_padding
                                                  : dnnl::algorithm::pooling_avg_exclude_padding;
    dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, plan->src_md,
                                        plan->dst_md, ToDims(g.strides), ToDims(g.kernel),
                                        DnnlDilations(g.dilations), ToDims(g.pad_begin),
                                        ToDims(g.pad_end));
    dnnl::pooling_v2_forward::primitive_desc pd(desc, UserScratchpad(), DnnlEngine());
    plan->prim = dnnl::pooling_v2_forward(pd);
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.emplace(xs, std::move(plan)).first->second;
  }

  PoolKind kind_;
  bool global_;
  WindowAttrs attrs_;
  bool count_include_pad_ = false;
  int64_t storage_order_ = 0;
  float p_ = 2.f;
  mutable std::mutex mu_;
  mutable std::map<Shape, std::shared_ptr<const Plan>> cache_;  // guarded by mu_
};

template <PoolKind kKind, bool kGlobal>
KernelFactory MakePool() {
  return [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<PoolKernel>(kKind, kGlobal);
    RETURN_IF_ERROR(k->Init(info));
    return std::unique_ptr<OpKernel>(std::move(k));
  };
}

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  const std::vector<DataType> floats = FloatTypes();
  std::vector<DataType> max_types = floats;
  max_types.push_back(DataType::kInt8);
  max_types.push_back(DataType::kUInt8);
  r.Add("MaxPool", 1, kOpsetMax, max_types, MakePool<PoolKind::kMax, false>());
  r.Add("AveragePool", 1, kOpsetMax, floats, MakePool<PoolKind::kAverage, false>());
  r.Add("LpPool", 1, kOpsetMax, floats, MakePool<PoolKind::kLp, false>());
  r.Add("GlobalMaxPool", 1, kOpsetMax, floats, MakePool<PoolKind::kMax, true>());
  r.Add("GlobalAveragePool", 1, kOpsetMax, floats, MakePool<PoolKind::kAverage, true>());
  r.Add("GlobalLpPool", 1, kOpsetMax, floats, MakePool<PoolKind::kLp, true>());
}

}  // namespace inferd::cpu
