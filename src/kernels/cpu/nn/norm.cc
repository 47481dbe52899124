// Normalization kernels: BatchNormalization (inference), InstanceNormalization,
// LayerNormalization, LRN and MeanVarianceNormalization.
//
// These are memory-bound; they run as plain loops parallel over independent slices (channels,
// rows), computing in float32 (float16/bfloat16/float64 are staged through float32) with
// two-pass mean/variance for accuracy.
#include <cmath>

#include "kernels/cpu/nn/register.h"
#include "kernels/cpu/util/broadcast.h"
#include "kernels/cpu/util/float32.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

// Output for a float32 result: the allocated output itself when dtype is float32.
Tensor FloatOutput(KernelContext& ctx, size_t i, DataType dtype, const Shape& shape) {
  return dtype == DataType::kFloat32 ? *ctx.AllocateOutput(i, dtype, shape)
                                     : Tensor::Allocate(DataType::kFloat32, shape);
}

// ---------------------------------------------------------------------------------------------

class BatchNormKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    epsilon_ = node.GetFloat("epsilon", 1e-5f);
    momentum_ = node.GetFloat("momentum", 0.9f);
    training_ = node.GetInt("training_mode", 0) != 0;
    if (info.opset() < 9 && node.GetInt("spatial", 1) == 0) {
      return Unimplemented("{}: spatial=0 is not supported", node.Describe());
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    for (size_t i = 0; i < 5; ++i) {
      if (!ctx.Input(i)) return InvalidArgument("{}: input {} is required", node.Describe(), i);
    }
    if (x->rank() < 2) {
      return InvalidArgument("{}: X must have rank >= 2, got {}", node.Describe(), ShapeToString(x->shape()));
    }
    const int64_t c = x->dim(1);
    for (size_t i = 1; i < 5; ++i) {
      if (ctx.Input(i)->NumElements() != c) {
        return InvalidArgument("{}: input {} must have {} elements, got {}", node.Describe(), i, c,
                               ShapeToString(ctx.Input(i)->shape()));
      }
    }
    std::vector<float> a(c), b(c);
    Tensor scale = ToFloat32(*ctx.Input(1)), bias = ToFloat32(*ctx.Input(2)),
           mean = ToFloat32(*ctx.Input(3)), var = ToFloat32(*ctx.Input(4));
    if (training_) return ComputeTraining(ctx, scale, bias, mean, var);
    for (int64_t i = 0; i < c; ++i) {
      a[i] = scale.data<float>()[i] / std::sqrt(var.data<float>()[i] + epsilon_);
      b[i] = bias.data<float>()[i] - mean.data<float>()[i] * a[i];
    }
    const DataType dtype = x->dtype();
    Tensor xf = ToFloat32(*x);
    Tensor y = FloatOutput(ctx, 0, dtype, x->shape());
    const int64_t n = x->dim(0), plane = c > 0 && n > 0 ? x->NumElements() / (n * c) : 0;
    const float* xd = xf.data<float>();
    float* yd = y.data<float>();
    ParallelFor(n * c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const float av = a[p % c], bv = b[p % c];
        const float* xp = xd + p * plane;
        float* yp = yd + p * plane;
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i) yp[i] = av * xp[i] + bv;
      }
    });
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    // Inference mode: optional running statistics pass through unchanged.
    if (ctx.OutputRequested(1)) ctx.SetOutput(1, ctx.Input(3)->Clone());
    if (ctx.OutputRequested(2)) ctx.SetOutput(2, ctx.Input(4)->Clone());
    return Status::Ok();
  }

 private:
  // training_mode=1 (opset 14+): normalize with the batch statistics (population variance) and
  // output the updated running mean and variance.
  Status ComputeTraining(KernelContext& ctx, const Tensor& scale, const Tensor& bias,
                         const Tensor& run_mean, const Tensor& run_var) const {
    const Tensor* x = ctx.Input(0);
    const int64_t n = x->dim(0), c = x->dim(1);
    const int64_t plane = n * c > 0 ? x->NumElements() / (n * c) : 0;
    const DataType dtype = x->dtype();
    Tensor xf = ToFloat32(*x);
    const float* xd = xf.data<float>();
    Tensor bm = Tensor::Allocate(DataType::kFloat32, {c}), bv = Tensor::Allocate(DataType::kFloat32, {c});
    for (int64_t ch = 0; ch < c; ++ch) {
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < plane; ++i) sum += xd[(b * c + ch) * plane + i];
      }
      const double cnt = std::max<double>(1.0, static_cast<double>(n * plane));
      const double m = sum / cnt;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < plane; ++i) {
          const double d = xd[(b * c + ch) * plane + i] - m;
          sq += d * d;
        }
      }
      bm.data<float>()[ch] = static_cast<float>(m);
      bv.data<float>()[ch] = static_cast<float>(sq / cnt);
    }
    Tensor y = FloatOutput(ctx, 0, dtype, x->shape());
    for (int64_t p = 0; p < n * c; ++p) {
      const int64_t ch = p % c;
      const float a = scale.data<float>()[ch] / std::sqrt(bv.data<float>()[ch] + epsilon_);
      const float b = bias.data<float>()[ch] - bm.data<float>()[ch] * a;
      for (int64_t i = 0; i < plane; ++i) y.data<float>()[p * plane + i] = a * xd[p * plane + i] + b;
    }
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    for (size_t out = 1; out <= 2; ++out) {
      if (!ctx.OutputRequested(out)) continue;
      const Tensor& running = out == 1 ? run_mean : run_var;
      const Tensor& batch = out == 1 ? bm : bv;
      Tensor r = Tensor::Allocate(DataType::kFloat32, ctx.Input(2 + out)->shape());
      for (int64_t ch = 0; ch < c; ++ch) {
        r.data<float>()[ch] = running.data<float>()[ch] * momentum_ + batch.data<float>()[ch] * (1 - momentum_);
      }
      SetOutputFromFloat32(ctx, out, ctx.Input(2 + out)->dtype(), r);
    }
    return Status::Ok();
  }

  float epsilon_ = 1e-5f;
  float momentum_ = 0.9f;
  bool training_ = false;
};

// ---------------------------------------------------------------------------------------------

// Normalizes `rows` rows of `len` contiguous floats: y = (x - mean) * inv_std * scale + bias, with
// scale/bias indexed by element within the row (null: 1 / 0) or by row (`per_row`).
void NormalizeRows(const float* x, float* y, int64_t rows, int64_t len, float epsilon,
                   const float* scale, const float* bias, bool per_row, int64_t channels,
                   float* mean_out, float* inv_std_out) {
  ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * len;
      float* yr = y + r * len;
      double sum = 0;
      for (int64_t i = 0; i < len; ++i) sum += xr[i];
      const double mean = len > 0 ? sum / static_cast<double>(len) : 0.0;
      double sq = 0;
      for (int64_t i = 0; i < len; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
      const double var = len > 0 ? sq / static_cast<double>(len) : 0.0;
      const float inv_std = static_cast<float>(1.0 / std::sqrt(var + epsilon));
      const float m = static_cast<float>(mean);
      if (mean_out) mean_out[r] = m;
      if (inv_std_out) inv_std_out[r] = inv_std;
      if (per_row) {
        const float s = scale[r % channels] * inv_std, b = bias[r % channels];
        for (int64_t i = 0; i < len; ++i) yr[i] = (xr[i] - m) * s + b;
      } else {
        for (int64_t i = 0; i < len; ++i) {
          yr[i] = (xr[i] - m) * inv_std * (scale ? scale[i] : 1.f) + (bias ? bias[i] : 0.f);
        }
      }
    }
  });
}

class InstanceNormKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    epsilon_ = info.node().GetFloat("epsilon", 1e-5f);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    if (!x || !ctx.Input(1) || !ctx.Input(2)) {
      return InvalidArgument("{}: input, scale and B are required", node.Describe());
    }
    if (x->rank() < 3) {
      return InvalidArgument("{}: input must have rank >= 3, got {}", node.Describe(), ShapeToString(x->shape()));
    }
    const int64_t n = x->dim(0), c = x->dim(1);
    if (ctx.Input(1)->NumElements() != c || ctx.Input(2)->NumElements() != c) {
      return InvalidArgument("{}: scale and B must have {} elements", node.Describe(), c);
    }
    const DataType dtype = x->dtype();
    Tensor xf = ToFloat32(*x), scale = ToFloat32(*ctx.Input(1)), bias = ToFloat32(*ctx.Input(2));
    Tensor y = FloatOutput(ctx, 0, dtype, x->shape());
    const int64_t plane = n * c > 0 ? x->NumElements() / (n * c) : 0;
    NormalizeRows(xf.data<float>(), y.data<float>(), n * c, plane, epsilon_, scale.data<float>(),
                  bias.data<float>(), /*per_row=*/true, c, nullptr, nullptr);
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

 private:
  float epsilon_ = 1e-5f;
};

class LayerNormKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axis_ = info.node().GetInt("axis", -1);
    epsilon_ = info.node().GetFloat("epsilon", 1e-5f);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    if (!x || !ctx.Input(1)) return InvalidArgument("{}: X and Scale are required", node.Describe());
    auto axis_or = NormalizeAxis(axis_, x->rank());
    if (!axis_or.ok()) return axis_or.status().WithContext(node.Describe());
    const Shape& xs = x->shape();
    const Shape norm_shape(xs.begin() + *axis_or, xs.end());
    const int64_t len = NumElements(norm_shape);
    const int64_t rows = NumElements(Shape(xs.begin(), xs.begin() + *axis_or));
    // Scale and B broadcast to the normalized shape; expand them to one value per element.
    auto expand = [&](const Tensor* t, std::vector<float>* out) -> Status {
      auto b = BroadcastShapes({t->shape(), norm_shape});
      if (!b.ok() || *b != norm_shape) {
        return InvalidArgument("{}: {} does not broadcast to the normalized shape {}",
                               node.Describe(), ShapeToString(t->shape()), ShapeToString(norm_shape));
      }
      Tensor f = ToFloat32(*t);
      out->resize(len);
      BroadcastIterator it(PlanBroadcast(norm_shape, {t->shape()}));
      for (int64_t i = 0; i < len; ++i, it.Next()) (*out)[i] = f.data<float>()[it.offset(0)];
      return Status::Ok();
    };
    std::vector<float> scale, bias;
    RETURN_IF_ERROR(expand(ctx.Input(1), &scale));
    if (ctx.Input(2)) RETURN_IF_ERROR(expand(ctx.Input(2), &bias));
    const DataType dtype = x->dtype();
    Tensor xf = ToFloat32(*x);
    Tensor y = FloatOutput(ctx, 0, dtype, xs);
    Shape stat_shape = xs;
    for (size_t i = *axis_or; i < stat_shape.size(); ++i) stat_shape[i] = 1;
    Tensor mean = Tensor::Allocate(DataType::kFloat32, stat_shape);
    Tensor inv_std = Tensor::Allocate(DataType::kFloat32, stat_shape);
    NormalizeRows(xf.data<float>(), y.data<float>(), rows, len, epsilon_, scale.data(),
                  bias.empty() ? nullptr : bias.data(), /*per_row=*/false, 1,
                  mean.data<float>(), inv_std.data<float>());
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    // Mean and InvStdDev are float32 (stash_type's default).
    if (ctx.OutputRequested(1)) ctx.SetOutput(1, mean);
    if (ctx.OutputRequested(2)) ctx.SetOutput(2, inv_std);
    return Status::Ok();
  }

 private:
  int64_t axis_ = -1;
  float epsilon_ = 1e-5f;
};

// ---------------------------------------------------------------------------------------------

class LrnKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    alpha_ = node.GetFloat("alpha", 1e-4f);
    beta_ = node.GetFloat("beta", 0.75f);
    bias_ = node.GetFloat("bias", 1.f);
    size_ = node.GetInt("size", 0);
    if (size_ <= 0) return InvalidArgument("{}: size must be > 0", node.Describe());
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    if (!x) return InvalidArgument("{}: X is required", node.Describe());
    if (x->rank() < 3) {
      return InvalidArgument("{}: X must have rank >= 3, got {}", node.Describe(), ShapeToString(x->shape()));
    }
    const int64_t n = x->dim(0), c = x->dim(1);
    const int64_t plane = n * c > 0 ? x->NumElements() / (n * c) : 0;
    const int64_t lo = (size_ - 1) / 2, hi = size_ - 1 - lo;
    const DataType dtype = x->dtype();
    Tensor xf = ToFloat32(*x);
    Tensor y = FloatOutput(ctx, 0, dtype, x->shape());
    const float* xd = xf.data<float>();
    float* yd = y.data<float>();
    const float a = alpha_ / static_cast<float>(size_);
    ParallelFor(n * c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t b = p / c, ch = p % c;
        const int64_t c0 = std::max<int64_t>(0, ch - lo), c1 = std::min<int64_t>(c - 1, ch + hi);
        for (int64_t i = 0; i < plane; ++i) {
          float sq = 0;
          for (int64_t q = c0; q <= c1; ++q) {
            const float v = xd[(b * c + q) * plane + i];
            sq += v * v;
          }
          yd[p * plane + i] = xd[p * plane + i] / std::pow(bias_ + a * sq, beta_);
        }
      }
    });
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

 private:
  float alpha_ = 1e-4f, beta_ = 0.75f, bias_ = 1.f;
  int64_t size_ = 0;
};

class MvnKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    axes_ = info.node().GetInts("axes", {0, 2, 3});
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    if (!x) return InvalidArgument("{}: X is required", node.Describe());
    const Shape& xs = x->shape();
    Shape reduced = xs;
    for (int64_t a : axes_) {
      auto ax = NormalizeAxis(a, x->rank());
      if (!ax.ok()) return ax.status().WithContext(node.Describe());
      reduced[*ax] = 1;
    }
    const DataType dtype = x->dtype();
    Tensor xf = ToFloat32(*x);
    Tensor y = FloatOutput(ctx, 0, dtype, xs);
    const int64_t n = xf.NumElements(), groups = NumElements(reduced);
    const double count = groups > 0 ? static_cast<double>(n) / static_cast<double>(groups) : 1.0;
    std::vector<double> mean(groups, 0.0), sq(groups, 0.0);
    const BroadcastPlan plan = PlanBroadcast(xs, {reduced});
    const float* xd = xf.data<float>();
    {
      BroadcastIterator it(plan);
      for (int64_t i = 0; i < n; ++i, it.Next()) mean[it.offset(0)] += xd[i];
    }
    for (double& m : mean) m /= count;
    {
      BroadcastIterator it(plan);
      for (int64_t i = 0; i < n; ++i, it.Next()) {
        const double d = xd[i] - mean[it.offset(0)];
        sq[it.offset(0)] += d * d;
      }
    }
    // As the ONNX function body: (X - E[X]) / (sqrt(Var[X]) + 1e-9).
    std::vector<double> denom(groups);
    for (int64_t g = 0; g < groups; ++g) denom[g] = std::sqrt(sq[g] / count) + 1e-9;
    BroadcastIterator it(plan);
    float* yd = y.data<float>();
    for (int64_t i = 0; i < n; ++i, it.Next()) {
      yd[i] = static_cast<float>((xd[i] - mean[it.offset(0)]) / denom[it.offset(0)]);
    }
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

 private:
  std::vector<int64_t> axes_;
};

}  // namespace

void RegisterNormKernels(KernelRegistry& r) {
  r.Add("BatchNormalization", 1, kOpsetMax, FloatTypes(), MakeKernel<BatchNormKernel>());
  r.Add("InstanceNormalization", 1, kOpsetMax, FloatTypes(), MakeKernel<InstanceNormKernel>());
  r.Add("LayerNormalization", 17, kOpsetMax, FloatTypes(), MakeKernel<LayerNormKernel>());
  r.Add("LRN", 1, kOpsetMax, FloatTypes(), MakeKernel<LrnKernel>());
  r.Add("MeanVarianceNormalization", 1, kOpsetMax, FloatTypes(), MakeKernel<MvnKernel>());
}

}  // namespace inferd::cpu
