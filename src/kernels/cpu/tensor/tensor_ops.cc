// Shape-only kernels (views of their input: Reshape, Squeeze, Unsqueeze, Flatten, Identity,
// Dropout) and small tensor producers (Shape, Size, Constant, ConstantOfShape, Range, EyeLike).
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/tensor/register.h"
#include "kernels/cpu/tensor/tensor_util.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/string_index.h"

namespace inferd::cpu {
namespace {

class ReshapeKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    allow_zero_ = info.node().GetInt("allowzero", 0) != 0;
    if (info.opset() < 5) shape_attr_ = info.node().GetInts("shape");
    opset_ = info.opset();
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    std::vector<int64_t> spec = shape_attr_;
    if (opset_ >= 5) {
      if (ctx.Input(1) == nullptr) return InvalidArgument("Reshape needs a shape input");
      ASSIGN_OR_RETURN(spec, ReadIntList(*ctx.Input(1), "shape"));
    }
    Shape out(spec.size());
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < spec.size(); ++i) {
      int64_t d = spec[i];
      if (d == -1) {
        if (infer >= 0) return InvalidArgument("Reshape shape has more than one -1");
        infer = static_cast<int64_t>(i);
        continue;
      }
      if (d == 0 && !allow_zero_) {
        if (i >= in.shape().size()) {
          return InvalidArgument("Reshape shape[{}] = 0 copies a dim the input (rank {}) lacks", i,
                                 in.rank());
        }
        d = in.dim(static_cast<int64_t>(i));
      }
      if (d < 0) return InvalidArgument("Reshape shape[{}] = {} is invalid", i, d);
      out[i] = d;
      known *= d;
    }
    if (infer >= 0) {
      if (known == 0 || in.NumElements() % known != 0) {
        return InvalidArgument("cannot reshape {} to {}: -1 cannot be inferred",
                               ShapeToString(in.shape()), fmt::format("{}", fmt::join(spec, ",")));
      }
      out[infer] = in.NumElements() / known;
    }
    ASSIGN_OR_RETURN(Tensor t, in.Reshaped(std::move(out)));
    ctx.SetOutput(0, std::move(t));
    return Status::Ok();
  }

 private:
  bool allow_zero_ = false;
  int64_t opset_ = 0;
  std::vector<int64_t> shape_attr_;
};

// Squeeze and Unsqueeze: axes attribute before opset 13, optional input from 13.
class SqueezeKernel final : public OpKernel {
 public:
  explicit SqueezeKernel(bool unsqueeze) : unsqueeze_(unsqueeze) {}
  Status Init(const KernelInfo& info) override {
    opset_ = info.opset();
    has_axes_attr_ = info.node().HasAttribute("axes");
    axes_attr_ = info.node().GetInts("axes");
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    std::vector<int64_t> axes = axes_attr_;
    bool has_axes = has_axes_attr_;
    if (opset_ >= 13) {
      has_axes = ctx.Input(1) != nullptr;
      if (has_axes) {
        ASSIGN_OR_RETURN(axes, ReadIntList(*ctx.Input(1), "axes"));
      }
    }
    Shape out;
    if (unsqueeze_) {
      if (!has_axes) return InvalidArgument("Unsqueeze needs axes");
      int64_t out_rank = in.rank() + static_cast<int64_t>(axes.size());
      ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(axes, out_rank));
      std::vector<bool> is_new(out_rank, false);
      for (int64_t a : norm) is_new[a] = true;
      size_t j = 0;
      for (int64_t d = 0; d < out_rank; ++d) out.push_back(is_new[d] ? 1 : in.shape()[j++]);
    } else {
      std::vector<bool> drop(in.rank(), false);
      if (has_axes) {
        ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(axes, in.rank()));
        for (int64_t a : norm) {
          if (in.dim(a) != 1) {
            return InvalidArgument("cannot squeeze axis {} of size {} (shape {})", a, in.dim(a),
                                   ShapeToString(in.shape()));
          }
          drop[a] = true;
        }
      } else {
        for (int64_t d = 0; d < in.rank(); ++d) drop[d] = in.dim(d) == 1;
      }
      for (int64_t d = 0; d < in.rank(); ++d) {
        if (!drop[d]) out.push_back(in.dim(d));
      }
    }
    ASSIGN_OR_RETURN(Tensor t, in.Reshaped(std::move(out)));
    ctx.SetOutput(0, std::move(t));
    return Status::Ok();
  }

 private:
  bool unsqueeze_;
  int64_t opset_ = 0;
  bool has_axes_attr_ = false;
  std::vector<int64_t> axes_attr_;
};

class FlattenKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axis_ = info.node().GetInt("axis", 1);
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    int64_t axis = axis_ < 0 ? axis_ + in.rank() : axis_;
    if (axis < 0 || axis > in.rank()) {
      return InvalidArgument("Flatten axis {} is out of range for rank {}", axis_, in.rank());
    }
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= in.dim(d);
    int64_t inner = 1;
    for (int64_t d = axis; d < in.rank(); ++d) inner *= in.dim(d);
    ASSIGN_OR_RETURN(Tensor t, in.Reshaped({outer, inner}));
    ctx.SetOutput(0, std::move(t));
    return Status::Ok();
  }

 private:
  int64_t axis_ = 1;
};

class IdentityKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    ctx.SetOutput(0, *ctx.Input(0));
    return Status::Ok();
  }
};

// Inference-mode Dropout: the output is the input; the optional mask is all true (bool from opset
// 10, the input's type before). Training mode with a non-zero ratio is not supported.
class DropoutKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    opset_ = info.opset();
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    if (opset_ >= 12 && ctx.Input(2) != nullptr && ctx.Input(2)->NumElements() > 0 &&
        ctx.Input(2)->GetAsInt64(0) != 0) {
      double ratio = ctx.Input(1) != nullptr && ctx.Input(1)->NumElements() > 0
                         ? ctx.Input(1)->GetAsDouble(0)
                         : 0.5;
      if (ratio != 0) return Unimplemented("Dropout in training mode is not supported");
    }
    ctx.SetOutput(0, in);
    if (ctx.OutputRequested(1)) {
      DataType mask_type = opset_ >= 10 ? DataType::kBool : in.dtype();
      Tensor* mask = ctx.AllocateOutput(1, mask_type, in.shape());
      DispatchAll(
          mask_type,
          [&](auto tag) {
            using T = decltype(tag);
            T one;
            if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
              one = T(1.0f);
            } else {
              one = static_cast<T>(1);
            }
            std::fill(mask->data<T>(), mask->data<T>() + mask->NumElements(), one);
          },
          [] {});
    }
    return Status::Ok();
  }

 private:
  int64_t opset_ = 0;
};

class ShapeKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    start_ = info.node().GetInt("start", 0);
    end_ = info.node().GetInt("end", INT64_MAX);
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    const int64_t r = in.rank();
    auto clamp = [r](int64_t v) {
      if (v < 0) v += r;
      return std::clamp<int64_t>(v, 0, r);
    };
    int64_t s = clamp(start_), e = clamp(end_);
    int64_t n = std::max<int64_t>(e - s, 0);
    Tensor* out = ctx.AllocateOutput(0, DataType::kInt64, {n});
    for (int64_t i = 0; i < n; ++i) out->data<int64_t>()[i] = in.dim(s + i);
    return Status::Ok();
  }

 private:
  int64_t start_ = 0, end_ = INT64_MAX;
};

class SizeKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    ctx.SetOutput(0, Tensor::Scalar<int64_t>(ctx.Input(0)->NumElements()));
    return Status::Ok();
  }
};

class ConstantKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    if (const Tensor* t = n.GetTensor("value")) {
      value_ = *t;
    } else if (const Attribute* a = n.FindAttribute("value_float")) {
      value_ = Tensor::Scalar<float>(a->f);
    } else if (const Attribute* a = n.FindAttribute("value_int")) {
      value_ = Tensor::Scalar<int64_t>(a->i);
    } else if (const Attribute* a = n.FindAttribute("value_floats")) {
      value_ = Tensor::FromVector<float>(a->floats, {static_cast<int64_t>(a->floats.size())});
    } else if (const Attribute* a = n.FindAttribute("value_ints")) {
      value_ = Tensor::FromVector<int64_t>(a->ints, {static_cast<int64_t>(a->ints.size())});
    } else if (const Attribute* a = n.FindAttribute("value_string")) {
      value_ = Tensor::Scalar<std::string>(a->s);
    } else if (const Attribute* a = n.FindAttribute("value_strings")) {
      value_ = *Tensor::FromStrings(a->strings, {static_cast<int64_t>(a->strings.size())});
    } else {
      return Unimplemented(
          "Constant {} has no supported value attribute (sparse values are not supported)",
          n.Describe());
    }
    if (!value_.defined()) return InvalidArgument("Constant {} has an empty value", n.Describe());
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    ctx.SetOutput(0, value_);
    return Status::Ok();
  }

 private:
  Tensor value_;
};

class ConstantOfShapeKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    if (const Tensor* t = info.node().GetTensor("value")) {
      if (t->NumElements() != 1) {
        return InvalidArgument("ConstantOfShape value must hold one element, got {}",
                               t->DebugString());
      }
      value_ = *t;
    } else {
      value_ = Tensor::Scalar<float>(0.f);
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadIntList(*ctx.Input(0), "shape"));
    for (int64_t d : shape) {
      if (d < 0) return InvalidArgument("ConstantOfShape: negative dim {}", d);
    }
    Tensor* out = ctx.AllocateOutput(0, value_.dtype(), shape);
    StridedCopy(value_, 0, std::vector<int64_t>(shape.size(), 0), out);
    return Status::Ok();
  }

 private:
  Tensor value_;
};

class RangeKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor& start = *ctx.Input(0);
    const Tensor& limit = *ctx.Input(1);
    const Tensor& delta = *ctx.Input(2);
    if (start.NumElements() != 1 || limit.NumElements() != 1 || delta.NumElements() != 1) {
      return InvalidArgument("Range inputs must be scalars");
    }
    if (start.dtype() != limit.dtype() || start.dtype() != delta.dtype()) {
      return InvalidArgument("Range inputs must have the same type");
    }
    return DispatchNumeric(
        start.dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          T s = start.data<T>()[0], l = limit.data<T>()[0], d = delta.data<T>()[0];
          if (d == T(0)) return InvalidArgument("Range delta must not be zero");
          double count =
              std::ceil((static_cast<double>(l) - static_cast<double>(s)) / static_cast<double>(d));
          int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
          if (n > (int64_t{1} << 40)) return InvalidArgument("Range is too large ({})", n);
          Tensor* out = ctx.AllocateOutput(0, start.dtype(), {n});
          T* o = out->data<T>();
          T v = s;
          for (int64_t i = 0; i < n; ++i, v = static_cast<T>(v + d)) o[i] = v;
          return Status::Ok();
        },
        [&] { return InvalidArgument("Range does not support {}", DataTypeName(start.dtype())); });
  }
};

class EyeLikeKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    k_ = info.node().GetInt("k", 0);
    int64_t dt = info.node().GetInt("dtype", 0);
    dtype_ = static_cast<DataType>(dt);
    if (dt != 0 && !IsSupportedDataType(dtype_)) {
      return InvalidArgument("EyeLike dtype {} is not supported", dt);
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    if (in.rank() != 2) return InvalidArgument("EyeLike input must be 2-D, got {}", in.rank());
    DataType dt = dtype_ == DataType::kUndefined ? in.dtype() : dtype_;
    Tensor* out = ctx.AllocateOutput(0, dt, in.shape());
    const int64_t rows = in.dim(0), cols = in.dim(1);
    const int64_t k = std::clamp<int64_t>(k_, -(rows + 1), cols + 1);
    DispatchAll(
        dt,
        [&](auto tag) {
          using T = decltype(tag);
          T* o = out->data<T>();
          for (int64_t i = 0; i < rows; ++i) {
            int64_t j = i + k;
            if (j >= 0 && j < cols) o[i * cols + j] = FromFloat<T>(1.0);
          }
        },
        [] {});
    return Status::Ok();
  }

 private:
  int64_t k_ = 0;
  DataType dtype_ = DataType::kUndefined;
};

template <bool kUnsqueeze>
StatusOr<std::unique_ptr<OpKernel>> MakeSqueeze(const KernelInfo& info) {
  auto k = std::make_unique<SqueezeKernel>(kUnsqueeze);
  RETURN_IF_ERROR(k->Init(info));
  return std::unique_ptr<OpKernel>(std::move(k));
}

}  // namespace

void RegisterShapeKernels(KernelRegistry& r) {
  r.Add("Reshape", 1, kOpsetMax, WithString(AllTypes()), MakeKernel<ReshapeKernel>());
  r.Add("Squeeze", 1, kOpsetMax, WithString(AllTypes()), MakeSqueeze<false>);
  r.Add("Unsqueeze", 1, kOpsetMax, WithString(AllTypes()), MakeSqueeze<true>);
  r.Add("Flatten", 1, kOpsetMax, WithString(AllTypes()), MakeKernel<FlattenKernel>());
  r.Add("Identity", 1, kOpsetMax, WithString(AllTypes()), MakeKernel<IdentityKernel>());
  r.Add("Dropout", 1, kOpsetMax, AllTypes(), MakeKernel<DropoutKernel>());
  r.Add("Shape", 1, kOpsetMax, {}, MakeKernel<ShapeKernel>());
  r.Add("Size", 1, kOpsetMax, {}, MakeKernel<SizeKernel>());
  r.Add("Constant", 1, kOpsetMax, {}, MakeKernel<ConstantKernel>());
  r.Add("ConstantOfShape", 9, kOpsetMax, {}, MakeKernel<ConstantOfShapeKernel>());
  r.Add("Range", 11, kOpsetMax, NumericTypes(), MakeKernel<RangeKernel>());
  r.Add("EyeLike", 9, kOpsetMax, AllTypes(), MakeKernel<EyeLikeKernel>());
}

}  // namespace inferd::cpu
