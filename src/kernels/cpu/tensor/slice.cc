// Kernels that copy regular blocks of their input: Slice, Concat, Split, Pad, Expand, Tile,
// Compress.
#include <algorithm>
#include <climits>
#include <cstring>

#include "kernels/cpu/tensor/register.h"
#include "kernels/cpu/tensor/tensor_util.h"
#include "kernels/cpu/util/broadcast.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/string_index.h"

namespace inferd::cpu {
namespace {

class SliceKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    opset_ = info.opset();
    if (opset_ < 10) {
      starts_ = info.node().GetInts("starts");
      ends_ = info.node().GetInts("ends");
      axes_ = info.node().GetInts("axes");
      if (starts_.size() != ends_.size()) {
        return InvalidArgument("Slice starts and ends have different lengths");
      }
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    const int64_t r = in.rank();
    std::vector<int64_t> starts = starts_, ends = ends_, axes = axes_, steps;
    if (opset_ >= 10) {
      if (ctx.Input(1) == nullptr || ctx.Input(2) == nullptr) {
        return InvalidArgument("Slice needs starts and ends inputs");
      }
      ASSIGN_OR_RETURN(starts, ReadIntList(*ctx.Input(1), "starts"));
      ASSIGN_OR_RETURN(ends, ReadIntList(*ctx.Input(2), "ends"));
      if (ctx.Input(3) != nullptr) {
        ASSIGN_OR_RETURN(axes, ReadIntList(*ctx.Input(3), "axes"));
      }
      if (ctx.Input(4) != nullptr) {
        ASSIGN_OR_RETURN(steps, ReadIntList(*ctx.Input(4), "steps"));
      }
    }
    const size_t n = starts.size();
    if (ends.size() != n) return InvalidArgument("Slice starts and ends have different lengths");
    if (axes.empty()) {
      for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (steps.empty()) steps.assign(n, 1);
    if (axes.size() != n || steps.size() != n) {
      return InvalidArgument("Slice starts, ends, axes and steps must have the same length");
    }
    ASSIGN_OR_RETURN(axes, NormalizeAxes(axes, r));

    std::vector<int64_t> in_strides = StridesOf(in.shape());
    Shape out_shape = in.shape();
    std::vector<int64_t> strides = in_strides;
    int64_t offset = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t a = axes[i], dim = in.dim(a);
      if (steps[i] == 0) return InvalidArgument("Slice step must not be zero (axis {})", a);
      // Steps longer than the axis select one element at most; clamping avoids overflow.
      const int64_t step = std::clamp<int64_t>(steps[i], -(dim + 1), dim + 1);
      int64_t s = starts[i], e = ends[i];
      if (s < 0) s += dim;
      if (e < 0) e += dim;
      int64_t count;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        count = e > s ? (e - s + step - 1) / step : 0;
      } else if (dim == 0) {
        count = 0;
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        count = s > e ? (s - e + (-step) - 1) / (-step) : 0;
      }
      out_shape[a] = count;
      strides[a] = count > 1 ? in_strides[a] * step : 0;
      if (count > 0) offset += s * in_strides[a];
    }
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), out_shape);
    if (out->NumElements() > 0) StridedCopy(in, offset, strides, out);
    return Status::Ok();
  }

 private:
  int64_t opset_ = 0;
  std::vector<int64_t> starts_, ends_, axes_;
};

// Copies `block` bytes of each of `outer` rows of `src` (row pitch `src_pitch`) into `dst`
// (row pitch `dst_pitch`).
void CopyRows(const uint8_t* src, int64_t src_pitch, uint8_t* dst, int64_t dst_pitch, int64_t outer,
              int64_t block) {
  if (block == 0) return;
  ParallelFor(outer, std::max<int64_t>(1, (1 << 16) / block), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) std::memcpy(dst + o * dst_pitch, src + o * src_pitch, block);
  });
}

class ConcatKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    if (!info.node().HasAttribute("axis") && info.opset() >= 4) {
      return InvalidArgument("Concat needs an axis attribute");
    }
    axis_ = info.node().GetInt("axis", 1);
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor* first = nullptr;
    for (size_t i = 0; i < ctx.NumInputs(); ++i) {
      if (ctx.Input(i) != nullptr) {
        first = ctx.Input(i);
        break;
      }
    }
    if (first == nullptr) return InvalidArgument("Concat needs at least one input");
    const int64_t r = first->rank();
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, r));
    if (r == 0) return InvalidArgument("Concat inputs must have rank >= 1");
    Shape out_shape = first->shape();
    out_shape[axis] = 0;
    for (size_t i = 0; i < ctx.NumInputs(); ++i) {
      const Tensor* t = ctx.Input(i);
      if (t == nullptr) continue;
      if (t->dtype() != first->dtype() || t->rank() != r) {
        return InvalidArgument("Concat input {} is {}, expected {} of rank {}", i, t->DebugString(),
                               DataTypeName(first->dtype()), r);
      }
      for (int64_t d = 0; d < r; ++d) {
        if (d != axis && t->dim(d) != first->dim(d)) {
          return InvalidArgument("Concat input {} has shape {}, incompatible with {}", i,
                                 ShapeToString(t->shape()), ShapeToString(first->shape()));
        }
      }
      out_shape[axis] += t->dim(axis);
    }
    Tensor* out = ctx.AllocateOutput(0, first->dtype(), out_shape);
    int64_t outer = 1, inner = static_cast<int64_t>(SizeOf(first->dtype()));
    for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
    for (int64_t d = axis + 1; d < r; ++d) inner *= out_shape[d];
    const int64_t dst_pitch = out_shape[axis] * inner;
    int64_t col = 0;
    for (size_t i = 0; i < ctx.NumInputs(); ++i) {
      const Tensor* t = ctx.Input(i);
      if (t == nullptr) continue;
      const int64_t block = t->dim(axis) * inner;
      CopyRows(static_cast<const uint8_t*>(t->raw_data()), block,
               static_cast<uint8_t*>(out->raw_data()) + col, dst_pitch, outer, block);
      col += block;
    }
    return Status::Ok();
  }

 private:
  int64_t axis_ = 1;
};

// Split: sizes from the `split` attribute before opset 13, from input 1 from 13 on; equal parts
// when absent.
class SplitKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    opset_ = info.opset();
    axis_ = info.node().GetInt("axis", 0);
    split_attr_ = info.node().GetInts("split");
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, in.rank()));
    if (in.rank() == 0) return InvalidArgument("Split input must have rank >= 1");
    std::vector<int64_t> split = split_attr_;
    if ((opset_ >= 13 || opset_ == 1) && ctx.Input(1) != nullptr) {
      ASSIGN_OR_RETURN(split, ReadIntList(*ctx.Input(1), "split"));
    }
    const int64_t num = static_cast<int64_t>(ctx.NumOutputs());
    const int64_t dim = in.dim(axis);
    if (split.empty()) {
      if (num == 0 || dim % num != 0) {
        return InvalidArgument("Split: dim {} of size {} cannot be split into {} equal parts", axis,
                               dim, num);
      }
      split.assign(num, dim / num);
    }
    if (static_cast<int64_t>(split.size()) != num) {
      return InvalidArgument("Split has {} sizes for {} outputs", split.size(), num);
    }
    int64_t total = 0;
    for (int64_t s : split) {
      if (s < 0) return InvalidArgument("Split size {} is negative", s);
      total += s;
    }
    if (total != dim) {
      return InvalidArgument("Split sizes sum to {}, but dim {} has size {}", total, axis, dim);
    }
    int64_t outer = 1, inner = static_cast<int64_t>(SizeOf(in.dtype()));
    for (int64_t d = 0; d < axis; ++d) outer *= in.dim(d);
    for (int64_t d = axis + 1; d < in.rank(); ++d) inner *= in.dim(d);
    int64_t col = 0;
    for (int64_t i = 0; i < num; ++i) {
      Shape s = in.shape();
      s[axis] = split[i];
      Tensor* out = ctx.AllocateOutput(i, in.dtype(), s);
      const int64_t block = split[i] * inner;
      CopyRows(static_cast<const uint8_t*>(in.raw_data()) + col, dim * inner,
               static_cast<uint8_t*>(out->raw_data()), block, outer, block);
      col += block;
    }
    return Status::Ok();
  }

 private:
  int64_t opset_ = 0;
  int64_t axis_ = 0;
  std::vector<int64_t> split_attr_;
};

enum class PadMode { kConstant, kReflect, kEdge };

class PadKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    opset_ = info.opset();
    std::string mode = info.node().GetString("mode", "constant");
    if (mode == "constant") {
      mode_ = PadMode::kConstant;
    } else if (mode == "reflect") {
      mode_ = PadMode::kReflect;
    } else if (mode == "edge") {
      mode_ = PadMode::kEdge;
    } else {
      return InvalidArgument("Pad mode '{}' is not supported", mode);
    }
    pads_attr_ = info.node().GetInts(opset_ < 2 ? "paddings" : "pads");
    value_attr_ = info.node().GetFloat("value", 0.f);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    const int64_t r = in.rank();
    std::vector<int64_t> pads = pads_attr_;
    Tensor value = Tensor::Allocate(in.dtype(), {});
    if (opset_ >= 11) {
      if (ctx.Input(1) == nullptr) return InvalidArgument("Pad needs a pads input");
      ASSIGN_OR_RETURN(pads, ReadIntList(*ctx.Input(1), "pads"));
      const Tensor* cv = ctx.Input(2);
      if (cv != nullptr && cv->NumElements() > 0) {
        if (cv->dtype() != in.dtype()) {
          return InvalidArgument("Pad constant_value is {}, data is {}", cv->DebugString(),
                                 in.DebugString());
        }
        std::memcpy(value.raw_data(), cv->raw_data(), SizeOf(in.dtype()));
      }
    } else {
      DispatchAll(
          in.dtype(),
          [&](auto tag) { *value.data<decltype(tag)>() = FromFloat<decltype(tag)>(value_attr_); },
          [] {});
    }
    if (static_cast<int64_t>(pads.size()) != 2 * r) {
      return InvalidArgument("Pad needs {} pads for rank {}, got {}", 2 * r, r, pads.size());
    }
    Shape out_shape(r);
    std::vector<std::vector<int64_t>> maps(r);  // output index → input index, -1 for the constant
    for (int64_t d = 0; d < r; ++d) {
      const int64_t dim = in.dim(d), pb = pads[d], pe = pads[d + r];
      out_shape[d] = dim + pb + pe;
      if (out_shape[d] < 0) {
        return InvalidArgument("Pad: pads {} and {} on axis {} of size {} are invalid", pb, pe, d,
                               dim);
      }
      if (mode_ != PadMode::kConstant && dim == 0 && out_shape[d] > 0) {
        return InvalidArgument("Pad: cannot {}-pad the empty axis {}",
                               mode_ == PadMode::kEdge ? "edge" : "reflect", d);
      }
      maps[d].resize(out_shape[d]);
      for (int64_t o = 0; o < out_shape[d]; ++o) {
        int64_t i = o - pb;
        if (i < 0 || i >= dim) {
          if (mode_ == PadMode::kConstant) {
            i = -1;
          } else if (mode_ == PadMode::kEdge || dim == 1) {
            i = std::clamp<int64_t>(i, 0, dim - 1);
          } else {
            const int64_t period = 2 * (dim - 1);
            i = ((i % period) + period) % period;
            if (i >= dim) i = period - i;
          }
        }
        maps[d][o] = i;
      }
    }
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), out_shape);
    if (out->NumElements() == 0) return Status::Ok();
    if (r == 0) {
      std::memcpy(out->raw_data(), in.raw_data(), in.ByteSize());
      return Status::Ok();
    }
    DispatchBySize(
        in.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          const T* src = static_cast<const T*>(in.raw_data());
          T* dst = static_cast<T*>(out->raw_data());
          const T v = *static_cast<const T*>(value.raw_data());
          const std::vector<int64_t> is = StridesOf(in.shape());
          const int64_t inner = out_shape[r - 1];
          const std::vector<int64_t>& last = maps[r - 1];
          int64_t rows = out->NumElements() / inner;
          ParallelFor(rows, std::max<int64_t>(1, 8192 / inner), [&](int64_t b, int64_t e) {
            for (int64_t row = b; row < e; ++row) {
              int64_t rem = row, off = 0;
              bool constant_row = false;
              for (int64_t d = r - 2; d >= 0; --d) {
                int64_t idx = rem % out_shape[d];
                rem /= out_shape[d];
                int64_t m = maps[d][idx];
                if (m < 0) constant_row = true;
                off += m * is[d];
              }
              T* o = dst + row * inner;
              if (constant_row) {
                std::fill(o, o + inner, v);
                continue;
              }
              const T* s = src + off;
              for (int64_t i = 0; i < inner; ++i) o[i] = last[i] < 0 ? v : s[last[i]];
            }
          });
        },
        [] {});
    return Status::Ok();
  }

 private:
  int64_t opset_ = 0;
  PadMode mode_ = PadMode::kConstant;
  std::vector<int64_t> pads_attr_;
  float value_attr_ = 0;
};

class ExpandKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadIntList(*ctx.Input(1), "shape"));
    for (int64_t d : shape) {
      if (d < 0) return InvalidArgument("Expand shape has a negative dim {}", d);
    }
    ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes({in.shape(), shape}));
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), out_shape);
    StridedCopy(in, 0, BroadcastStrides(in.shape(), out_shape), out);
    return Status::Ok();
  }
};

// Tile: the output viewed as [r0, d0, r1, d1, ...] reads the input with strides [0, s0, 0, s1,
// ...].
class TileKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> reps, ReadIntList(*ctx.Input(1), "repeats"));
    if (static_cast<int64_t>(reps.size()) != in.rank()) {
      return InvalidArgument("Tile repeats has {} entries for rank {}", reps.size(), in.rank());
    }
    Shape out_shape(in.rank()), view;
    std::vector<int64_t> strides;
    std::vector<int64_t> is = StridesOf(in.shape());
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (reps[d] < 0) return InvalidArgument("Tile repeat {} is negative", reps[d]);
      out_shape[d] = in.dim(d) * reps[d];
      view.push_back(reps[d]);
      view.push_back(in.dim(d));
      strides.push_back(0);
      strides.push_back(is[d]);
    }
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), out_shape);
    if (out->NumElements() == 0) return Status::Ok();
    ASSIGN_OR_RETURN(Tensor v, out->Reshaped(view));
    StridedCopy(in, 0, strides, &v);
    return Status::Ok();
  }
};

class CompressKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    has_axis_ = info.node().HasAttribute("axis");
    axis_ = info.node().GetInt("axis", 0);
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in0 = *ctx.Input(0);
    const Tensor& cond = *ctx.Input(1);
    if (cond.dtype() != DataType::kBool || cond.rank() != 1) {
      return InvalidArgument("Compress condition must be a 1-D bool tensor, got {}",
                             cond.DebugString());
    }
    Tensor in = in0;
    int64_t axis = 0;
    if (has_axis_) {
      ASSIGN_OR_RETURN(axis, NormalizeAxis(axis_, in0.rank()));
      if (in0.rank() == 0) return InvalidArgument("Compress with an axis needs rank >= 1");
    } else {
      ASSIGN_OR_RETURN(in, in0.Reshaped({in0.NumElements()}));
    }
    const int64_t dim = in.dim(axis);
    const int64_t n = std::min(dim, cond.NumElements());
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < n; ++i) {
      if (cond.data<bool>()[i]) keep.push_back(i);
    }
    Shape out_shape = in.shape();
    out_shape[axis] = static_cast<int64_t>(keep.size());
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), out_shape);
    int64_t outer = 1, inner = static_cast<int64_t>(SizeOf(in.dtype()));
    for (int64_t d = 0; d < axis; ++d) outer *= in.dim(d);
    for (int64_t d = axis + 1; d < in.rank(); ++d) inner *= in.dim(d);
    const uint8_t* src = static_cast<const uint8_t*>(in.raw_data());
    uint8_t* dst = static_cast<uint8_t*>(out->raw_data());
    const int64_t k = static_cast<int64_t>(keep.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < k; ++j) {
        std::memcpy(dst + (o * k + j) * inner, src + (o * dim + keep[j]) * inner, inner);
      }
    }
    return Status::Ok();
  }

 private:
  bool has_axis_ = false;
  int64_t axis_ = 0;
};

}  // namespace

void RegisterSliceKernels(KernelRegistry& r) {
  r.Add("Slice", 1, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<SliceKernel>(), {0}));
  r.Add("Concat", 1, kOpsetMax, {DataType::kString}, OnStringIndices(MakeKernel<ConcatKernel>()));
  r.Add("Split", 1, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<SplitKernel>(), {0}));
  r.Add("Expand", 8, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<ExpandKernel>(), {0}));
  r.Add("Tile", 6, kOpsetMax, {DataType::kString}, OnStringIndices(MakeKernel<TileKernel>(), {0}));
  r.Add("Compress", 9, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<CompressKernel>(), {0}));
  r.Add("Slice", 1, kOpsetMax, AllTypes(), MakeKernel<SliceKernel>());
  r.Add("Concat", 1, kOpsetMax, AllTypes(), MakeKernel<ConcatKernel>());
  r.Add("Split", 1, kOpsetMax, AllTypes(), MakeKernel<SplitKernel>());
  r.Add("Pad", 1, kOpsetMax, AllTypes(), MakeKernel<PadKernel>());
  r.Add("Expand", 8, kOpsetMax, AllTypes(), MakeKernel<ExpandKernel>());
  r.Add("Tile", 6, kOpsetMax, AllTypes(), MakeKernel<TileKernel>());
  r.Add("Compress", 9, kOpsetMax, AllTypes(), MakeKernel<CompressKernel>());
}

}  // namespace inferd::cpu
