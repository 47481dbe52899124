// Index-driven kernels: Gather, GatherElements, GatherND, ScatterElements (and its opset 9-10
// alias Scatter), ScatterND, OneHot, NonZero. Every index is validated before any element moves.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/tensor/register.h"
#include "kernels/cpu/tensor/tensor_util.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/string_index.h"

namespace inferd::cpu {
namespace {

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

class GatherKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axis_ = info.node().GetInt("axis", 0);
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& data = *ctx.Input(0);
    const Tensor& idx_t = *ctx.Input(1);
    if (data.rank() == 0) return InvalidArgument("Gather data must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, data.rank()));
    const int64_t dim = data.dim(axis);
    ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(idx_t, dim, "Gather index"));
    Shape out_shape(data.shape().begin(), data.shape().begin() + axis);
    out_shape.insert(out_shape.end(), idx_t.shape().begin(), idx_t.shape().end());
    out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
    Tensor* out = ctx.AllocateOutput(0, data.dtype(), out_shape);
    const int64_t outer = Product(data.shape(), 0, axis);
    const int64_t inner = Product(data.shape(), axis + 1, data.shape().size()) *
                          static_cast<int64_t>(SizeOf(data.dtype()));
    const int64_t n = static_cast<int64_t>(idx.size());
    const uint8_t* src = static_cast<const uint8_t*>(data.raw_data());
    uint8_t* dst = static_cast<uint8_t*>(out->raw_data());
    if (inner == 0) return Status::Ok();
    ParallelFor(outer * n, std::max<int64_t>(1, 16384 / inner), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t o = i / n, j = i % n;
        std::memcpy(dst + i * inner, src + (o * dim + idx[j]) * inner, inner);
      }
    });
    return Status::Ok();
  }

 private:
  int64_t axis_ = 0;
};

// Offsets into `data` for every element of an indices tensor used along `axis` (GatherElements,
// ScatterElements): indices has data's rank and no larger dims off the axis.
StatusOr<std::vector<int64_t>> ElementOffsets(const Tensor& data, const Tensor& indices,
                                              int64_t axis, const char* op) {
  if (indices.rank() != data.rank()) {
    return InvalidArgument("{} indices rank {} differs from data rank {}", op, indices.rank(),
                           data.rank());
  }
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.dim(d) > data.dim(d)) {
      return InvalidArgument("{} indices shape {} exceeds data shape {} on axis {}", op,
                             ShapeToString(indices.shape()), ShapeToString(data.shape()), d);
    }
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(indices, data.dim(axis), op));
  const std::vector<int64_t> ds = StridesOf(data.shape());
  const int64_t r = data.rank();
  std::vector<int64_t> pos(r, 0);
  for (size_t i = 0; i < idx.size(); ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d) off += (d == axis ? idx[i] : pos[d]) * ds[d];
    idx[i] = off;
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++pos[d] < indices.dim(d)) break;
      pos[d] = 0;
    }
  }
  return idx;
}

class GatherElementsKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axis_ = info.node().GetInt("axis", 0);
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& data = *ctx.Input(0);
    const Tensor& indices = *ctx.Input(1);
    if (data.rank() == 0) return InvalidArgument("GatherElements data must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, data.rank()));
    ASSIGN_OR_RETURN(std::vector<int64_t> offs,
                     ElementOffsets(data, indices, axis, "GatherElements"));
    Tensor* out = ctx.AllocateOutput(0, data.dtype(), indices.shape());
    DispatchBySize(
        data.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          const T* src = static_cast<const T*>(data.raw_data());
          T* dst = static_cast<T*>(out->raw_data());
          for (size_t i = 0; i < offs.size(); ++i) dst[i] = src[offs[i]];
        },
        [] {});
    return Status::Ok();
  }

 private:
  int64_t axis_ = 0;
};

// Offsets (in elements) of the slices that an ND index tensor [..., k] selects in `data` of which
// the first `batch_dims` dims are batch dims shared with the indices.
StatusOr<std::vector<int64_t>> NdOffsets(const Tensor& data, const Tensor& indices,
                                         int64_t batch_dims, const char* op) {
  RETURN_IF_ERROR(CheckIndexType(indices, op));
  if (indices.rank() < 1) return InvalidArgument("{} indices must have rank >= 1", op);
  const int64_t k = indices.dim(indices.rank() - 1);
  if (batch_dims < 0 || batch_dims >= std::min(data.rank(), indices.rank())) {
    return InvalidArgument("{} batch_dims {} is invalid for ranks {} and {}", op, batch_dims,
                           data.rank(), indices.rank());
  }
  if (k < 1 || k > data.rank() - batch_dims) {
    return InvalidArgument("{} index tuples of length {} don't fit data rank {}", op, k,
                           data.rank());
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (data.dim(d) != indices.dim(d)) {
      return InvalidArgument("{} batch dim {} differs: data {} vs indices {}", op, d,
                             ShapeToString(data.shape()), ShapeToString(indices.shape()));
    }
  }
  const std::vector<int64_t> ds = StridesOf(data.shape());
  const int64_t tuples = indices.NumElements() / std::max<int64_t>(k, 1);
  const int64_t per_batch = Product(indices.shape(), batch_dims, indices.rank() - 1);
  const int64_t batch_stride = batch_dims > 0 ? ds[batch_dims - 1] : 0;
  std::vector<int64_t> offs(tuples);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = per_batch > 0 ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = indices.GetAsInt64(t * k + j);
      const int64_t dim = data.dim(batch_dims + j);
      if (v < -dim || v >= dim) {
        return InvalidArgument("{} index {} is out of range for dim {} of size {}", op, v,
                               batch_dims + j, dim);
      }
      off += (v < 0 ? v + dim : v) * ds[batch_dims + j];
    }
    offs[t] = off;
  }
  return offs;
}

class GatherNDKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    batch_dims_ = info.node().GetInt("batch_dims", 0);
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& data = *ctx.Input(0);
    const Tensor& indices = *ctx.Input(1);
    ASSIGN_OR_RETURN(std::vector<int64_t> offs, NdOffsets(data, indices, batch_dims_, "GatherND"));
    const int64_t k = indices.dim(indices.rank() - 1);
    Shape out_shape(indices.shape().begin(), indices.shape().end() - 1);
    out_shape.insert(out_shape.end(), data.shape().begin() + batch_dims_ + k, data.shape().end());
    Tensor* out = ctx.AllocateOutput(0, data.dtype(), out_shape);
    const int64_t slice = Product(data.shape(), batch_dims_ + k, data.shape().size()) *
                          static_cast<int64_t>(SizeOf(data.dtype()));
    const int64_t elem = static_cast<int64_t>(SizeOf(data.dtype()));
    const uint8_t* src = static_cast<const uint8_t*>(data.raw_data());
    uint8_t* dst = static_cast<uint8_t*>(out->raw_data());
    for (size_t t = 0; t < offs.size(); ++t) {
      std::memcpy(dst + t * slice, src + offs[t] * elem, slice);
    }
    return Status::Ok();
  }

 private:
  int64_t batch_dims_ = 0;
};

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> ParseReduction(const std::string& s) {
  if (s == "none") return Reduction::kNone;
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  return InvalidArgument("unknown reduction '{}'", s);
}

template <typename T>
T Combine(T a, T b, Reduction red) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(Combine<float>(static_cast<float>(a), static_cast<float>(b), red));
  } else if constexpr (std::is_same_v<T, bool>) {
    return red == Reduction::kAdd || red == Reduction::kMax ? (a || b) : (a && b);
  } else {
    switch (red) {
      case Reduction::kNone:
        return b;
      case Reduction::kAdd:
        return static_cast<T>(a + b);
      case Reduction::kMul:
        return static_cast<T>(a * b);
      case Reduction::kMax:
        return std::max(a, b);
      case Reduction::kMin:
        return std::min(a, b);
    }
    return b;
  }
}

// Writes `updates` slices of `slice` elements at element offsets `offs` into a copy of `data`.
Status ScatterInto(const Tensor& data, const Tensor& updates, const std::vector<int64_t>& offs,
                   int64_t slice, Reduction red, KernelContext& ctx) {
  if (updates.dtype() != data.dtype()) {
    return InvalidArgument("updates type {} differs from data type {}",
                           DataTypeName(updates.dtype()), DataTypeName(data.dtype()));
  }
  Tensor* out = ctx.AllocateOutput(0, data.dtype(), data.shape());
  std::memcpy(out->raw_data(), data.raw_data(), data.ByteSize());
  return DispatchAll(
      data.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        const T* u = updates.data<T>();
        T* o = out->data<T>();
        for (size_t t = 0; t < offs.size(); ++t) {
          T* dst = o + offs[t];
          const T* src = u + t * slice;
          if (red == Reduction::kNone) {
            std::memcpy(dst, src, sizeof(T) * slice);
          } else {
            for (int64_t i = 0; i < slice; ++i) dst[i] = Combine<T>(dst[i], src[i], red);
          }
        }
        return Status::Ok();
      },
      [&] { return InvalidArgument("unsupported type {}", DataTypeName(data.dtype())); });
}

class ScatterElementsKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axis_ = info.node().GetInt("axis", 0);
    ASSIGN_OR_RETURN(red_, ParseReduction(info.node().GetString("reduction", "none")));
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& data = *ctx.Input(0);
    const Tensor& indices = *ctx.Input(1);
    const Tensor& updates = *ctx.Input(2);
    if (data.rank() == 0) return InvalidArgument("ScatterElements data must have rank >= 1");
    if (updates.shape() != indices.shape()) {
      return InvalidArgument("ScatterElements updates shape {} differs from indices shape {}",
                             ShapeToString(updates.shape()), ShapeToString(indices.shape()));
    }
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, data.rank()));
    ASSIGN_OR_RETURN(std::vector<int64_t> offs,
                     ElementOffsets(data, indices, axis, "ScatterElements"));
    return ScatterInto(data, updates, offs, 1, red_, ctx);
  }

 private:
  int64_t axis_ = 0;
  Reduction red_ = Reduction::kNone;
};

class ScatterNDKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    ASSIGN_OR_RETURN(red_, ParseReduction(info.node().GetString("reduction", "none")));
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& data = *ctx.Input(0);
    const Tensor& indices = *ctx.Input(1);
    const Tensor& updates = *ctx.Input(2);
    ASSIGN_OR_RETURN(std::vector<int64_t> offs, NdOffsets(data, indices, 0, "ScatterND"));
    const int64_t k = indices.dim(indices.rank() - 1);
    Shape expected(indices.shape().begin(), indices.shape().end() - 1);
    expected.insert(expected.end(), data.shape().begin() + k, data.shape().end());
    if (updates.shape() != expected) {
      return InvalidArgument("ScatterND updates shape {} should be {}",
                             ShapeToString(updates.shape()), ShapeToString(expected));
    }
    return ScatterInto(data, updates, offs, Product(data.shape(), k, data.shape().size()), red_,
                       ctx);
  }

 private:
  Reduction red_ = Reduction::kNone;
};

class OneHotKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axis_ = info.node().GetInt("axis", -1);
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& indices = *ctx.Input(0);
    const Tensor& depth_t = *ctx.Input(1);
    const Tensor& values = *ctx.Input(2);
    if (depth_t.NumElements() != 1) return InvalidArgument("OneHot depth must be a scalar");
    if (values.NumElements() != 2) {
      return InvalidArgument("OneHot values must hold [off, on], got {}", values.DebugString());
    }
    const int64_t depth = static_cast<int64_t>(depth_t.GetAsDouble(0));
    if (depth < 1) return InvalidArgument("OneHot depth must be positive, got {}", depth);
    const int64_t out_rank = indices.rank() + 1;
    int64_t axis = axis_ < 0 ? axis_ + out_rank : axis_;
    if (axis < 0 || axis >= out_rank) {
      return InvalidArgument("OneHot axis {} is out of range for output rank {}", axis_, out_rank);
    }
    Shape out_shape = indices.shape();
    out_shape.insert(out_shape.begin() + axis, depth);
    Tensor* out = ctx.AllocateOutput(0, values.dtype(), out_shape);
    const int64_t inner = Product(indices.shape(), axis, indices.shape().size());
    const int64_t n = indices.NumElements();
    DispatchBySize(
        values.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          const T off = values.data<T>()[0], on = values.data<T>()[1];
          T* o = out->data<T>();
          std::fill(o, o + out->NumElements(), off);
          for (int64_t i = 0; i < n; ++i) {
            int64_t v = static_cast<int64_t>(indices.GetAsDouble(i));
            if (v < 0) v += depth;
            if (v < 0 || v >= depth) continue;
            o[((i / inner) * depth + v) * inner + i % inner] = on;
          }
        },
        [] {});
    return Status::Ok();
  }

 private:
  int64_t axis_ = -1;
};

class NonZeroKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in0 = *ctx.Input(0);
    Tensor in = in0;
    if (in0.rank() == 0) {
      ASSIGN_OR_RETURN(in, in0.Reshaped({1}));
    }
    std::vector<int64_t> hits;
    DispatchAll(
        in.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          const T* p = in.data<T>();
          for (int64_t i = 0; i < in.NumElements(); ++i) {
            bool nonzero;
            if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
              nonzero = static_cast<float>(p[i]) != 0.f;
            } else {
              nonzero = p[i] != T{};
            }
            if (nonzero) hits.push_back(i);
          }
        },
        [] {});
    const int64_t r = in.rank(), n = static_cast<int64_t>(hits.size());
    Tensor* out = ctx.AllocateOutput(0, DataType::kInt64, {r, n});
    int64_t* o = out->data<int64_t>();
    for (int64_t j = 0; j < n; ++j) {
      int64_t rem = hits[j];
      for (int64_t d = r - 1; d >= 0; --d) {
        o[d * n + j] = rem % in.dim(d);
        rem /= in.dim(d);
      }
    }
    return Status::Ok();
  }
};

}  // namespace

void RegisterGatherKernels(KernelRegistry& r) {
  r.Add("Gather", 1, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<GatherKernel>(), {0}));
  r.Add("GatherElements", 11, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<GatherElementsKernel>(), {0}));
  r.Add("GatherND", 11, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<GatherNDKernel>(), {0}));
  r.Add("ScatterElements", 11, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<ScatterElementsKernel>(), {0, 2}));
  r.Add("ScatterND", 11, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<ScatterNDKernel>(), {0, 2}));
  r.Add("Gather", 1, kOpsetMax, AllTypes(), MakeKernel<GatherKernel>());
  r.Add("GatherElements", 11, kOpsetMax, AllTypes(), MakeKernel<GatherElementsKernel>());
  r.Add("GatherND", 11, kOpsetMax, AllTypes(), MakeKernel<GatherNDKernel>());
  r.Add("Scatter", 9, 10, AllTypes(), MakeKernel<ScatterElementsKernel>());
  r.Add("ScatterElements", 11, kOpsetMax, AllTypes(), MakeKernel<ScatterElementsKernel>());
  r.Add("ScatterND", 11, kOpsetMax, AllTypes(), MakeKernel<ScatterNDKernel>());
  r.Add("OneHot", 9, kOpsetMax, {}, MakeKernel<OneHotKernel>());
  r.Add("NonZero", 9, kOpsetMax, AllTypes(), MakeKernel<NonZeroKernel>());
}

}  // namespace inferd::cpu
