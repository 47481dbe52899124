// Resize (opsets 10, 11, 13) and Upsample (opsets 7-9).
//
// Every output coordinate of every axis is mapped to up to four input taps with weights (one for
// nearest, two for linear, four for cubic); an output element is the weighted sum over the tensor
// product of its axes' taps. The mapping follows the ONNX reference implementation
// (onnx/backend/test/case/node/resize.py); opset 10 Resize and Upsample follow onnxruntime
// (asymmetric coordinates; nearest rounds down when upsampling, up when downsampling).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/tensor/register.h"
#include "kernels/cpu/tensor/tensor_util.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct Taps {
  int n = 0;
  bool extrapolate = false;
  int64_t idx[4] = {0, 0, 0, 0};
  float w[4] = {0, 0, 0, 0};
};

struct ResizeParams {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation = 0.f;
};

void CubicCoeffs(double t, double a, double c[4]) {
  c[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
  c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  c[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((a * ((1 - t) + 1) - 5 * a) * ((1 - t) + 1) + 8 * a) * ((1 - t) + 1) - 4 * a;
}

// Taps of each output coordinate along one axis. `scale` is output/input; `roi_start/end` are the
// normalized crop box (tf_crop_and_resize only).
std::vector<Taps> AxisTaps(const ResizeParams& p, int64_t in, int64_t out, double scale,
                           double roi_start, double roi_end) {
  std::vector<Taps> taps(out);
  const double out_len = scale * static_cast<double>(in);  // as the reference: not rounded
  for (int64_t o = 0; o < out; ++o) {
    Taps& t = taps[o];
    const double x = static_cast<double>(o);
    double xo = 0;
    switch (p.coord) {
      case Coord::kHalfPixel:
        xo = (x + 0.5) / scale - 0.5;
        break;
      case Coord::kPytorchHalfPixel:
        xo = out_len > 1 ? (x + 0.5) / scale - 0.5 : -0.5;
        break;
      case Coord::kAlignCorners:
        xo = out_len == 1 ? 0 : x * static_cast<double>(in - 1) / (out_len - 1);
        break;
      case Coord::kAsymmetric:
        xo = x / scale;
        break;
      case Coord::kTfHalfPixelForNn:
        xo = (x + 0.5) / scale;
        break;
      case Coord::kTfCropAndResize:
        xo = out_len > 1
                 ? roi_start * static_cast<double>(in - 1) +
                       x * (roi_end - roi_start) * static_cast<double>(in - 1) / (out_len - 1)
                 : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
        if (xo < 0 || xo > static_cast<double>(in - 1)) t.extrapolate = true;
        break;
    }
    const double fl = std::floor(xo);
    const double ratio = xo - fl;
    auto clamp = [in](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
    if (p.mode == Mode::kNearest) {
      int64_t i;
      switch (p.nearest) {
        case NearestMode::kRoundPreferFloor:
          i = ratio <= 0.5 ? fl : fl + 1;
          break;
        case NearestMode::kRoundPreferCeil:
          i = ratio < 0.5 ? fl : fl + 1;
          break;
        case NearestMode::kFloor:
          i = fl;
          break;
        case NearestMode::kCeil:
          i = std::ceil(xo);
          break;
        default:
          i = scale < 1 ? std::ceil(xo) : fl;
          break;  // kSimple
      }
      t.n = 1;
      t.idx[0] = clamp(i);
      t.w[0] = 1;
    } else if (p.mode == Mode::kLinear) {
      const int64_t i0 = static_cast<int64_t>(fl);
      t.idx[0] = clamp(i0);
      t.w[0] = static_cast<float>(1 - ratio);
      t.n = 1;
      if (ratio != 0) {
        t.idx[1] = clamp(i0 + 1);
        t.w[1] = static_cast<float>(ratio);
        t.n = 2;
      }
    } else {
      double c[4];
      CubicCoeffs(ratio, p.cubic_a, c);
      const int64_t i0 = static_cast<int64_t>(fl) - 1;
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t i = i0 + k;
        if (p.exclude_outside && (i < 0 || i >= in)) c[k] = 0;
        sum += c[k];
      }
      if (p.exclude_outside && sum != 0) {
        for (double& v : c) v /= sum;
      }
      t.n = 0;
      for (int k = 0; k < 4; ++k) {
        if (c[k] == 0) continue;
        t.idx[t.n] = clamp(i0 + k);
        t.w[t.n++] = static_cast<float>(c[k]);
      }
    }
  }
  return taps;
}

template <typename T>
void Interpolate(const Tensor& in, const std::vector<std::vector<Taps>>& taps, float extrapolation,
                 Tensor* out) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t r = in.rank();
  const Shape& os = out->shape();
  const std::vector<int64_t> is = StridesOf(in.shape());
  const T* src = in.data<T>();
  T* dst = out->data<T>();
  auto convert = [](Acc v) -> T {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(std::nearbyint(v));
    } else {
      return static_cast<T>(v);
    }
  };
  const T extra = convert(static_cast<Acc>(extrapolation));
  ParallelFor(out->NumElements(), 1024, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> pos(r);
    std::vector<const Taps*> t(r);
    std::vector<int> k(r);
    for (int64_t e = begin; e < end; ++e) {
      int64_t rem = e;
      bool extrapolate = false;
      for (int64_t d = r - 1; d >= 0; --d) {
        pos[d] = rem % os[d];
        rem /= os[d];
        t[d] = &taps[d][pos[d]];
        extrapolate |= t[d]->extrapolate;
      }
      if (extrapolate) {
        dst[e] = extra;
        continue;
      }
      Acc acc = 0;
      std::fill(k.begin(), k.end(), 0);
      while (true) {
        Acc w = 1;
        int64_t off = 0;
        for (int64_t d = 0; d < r; ++d) {
          w *= t[d]->w[k[d]];
          off += t[d]->idx[k[d]] * is[d];
        }
        acc += w * static_cast<Acc>(src[off]);
        int64_t d = r - 1;
        for (; d >= 0; --d) {
          if (++k[d] < t[d]->n) break;
          k[d] = 0;
        }
        if (d < 0) break;
      }
      dst[e] = convert(acc);
    }
  });
}

// Nearest neighbour as pure data movement (exact for every type).
template <typename T>
void NearestCopy(const Tensor& in, const std::vector<std::vector<Taps>>& taps, const T extra,
                 Tensor* out) {
  const int64_t r = in.rank();
  const Shape& os = out->shape();
  const std::vector<int64_t> is = StridesOf(in.shape());
  const T* src = static_cast<const T*>(in.raw_data());
  T* dst = static_cast<T*>(out->raw_data());
  const int64_t inner = os[r - 1];
  const int64_t rows = out->NumElements() / inner;
  const std::vector<Taps>& last = taps[r - 1];
  ParallelFor(rows, std::max<int64_t>(1, 4096 / inner), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t rem = row, off = 0;
      bool extrapolate = false;
      for (int64_t d = r - 2; d >= 0; --d) {
        const Taps& t = taps[d][rem % os[d]];
        rem /= os[d];
        off += t.idx[0] * is[d];
        extrapolate |= t.extrapolate;
      }
      T* o = dst + row * inner;
      for (int64_t i = 0; i < inner; ++i) {
        o[i] = extrapolate || last[i].extrapolate ? extra : src[off + last[i].idx[0]];
      }
    }
  });
}

class ResizeKernel final : public OpKernel {
 public:
  explicit ResizeKernel(bool upsample) : upsample_(upsample) {}

  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    opset_ = info.opset();
    std::string mode = n.GetString("mode", "nearest");
    if (mode == "nearest") {
      p_.mode = Mode::kNearest;
    } else if (mode == "linear" || mode == "bilinear") {
      p_.mode = Mode::kLinear;
    } else if (mode == "cubic" && !upsample_ && opset_ >= 11) {
      p_.mode = Mode::kCubic;
    } else {
      return InvalidArgument("{}: unsupported mode '{}'", n.Describe(), mode);
    }
    if (upsample_ || opset_ < 11) {
      p_.coord = Coord::kAsymmetric;
      p_.nearest = NearestMode::kSimple;
      scales_attr_ = n.GetFloats("scales");
      return Status::Ok();
    }
    std::string coord = n.GetString("coordinate_transformation_mode", "half_pixel");
    if (coord == "half_pixel") {
      p_.coord = Coord::kHalfPixel;
    } else if (coord == "pytorch_half_pixel") {
      p_.coord = Coord::kPytorchHalfPixel;
    } else if (coord == "align_corners") {
      p_.coord = Coord::kAlignCorners;
    } else if (coord == "asymmetric") {
      p_.coord = Coord::kAsymmetric;
    } else if (coord == "tf_half_pixel_for_nn") {
      p_.coord = Coord::kTfHalfPixelForNn;
    } else if (coord == "tf_crop_and_resize") {
      p_.coord = Coord::kTfCropAndResize;
    } else {
      return InvalidArgument("{}: unknown coordinate_transformation_mode '{}'", n.Describe(),
                             coord);
    }
    std::string nearest = n.GetString("nearest_mode", "round_prefer_floor");
    if (nearest == "round_prefer_floor") {
      p_.nearest = NearestMode::kRoundPreferFloor;
    } else if (nearest == "round_prefer_ceil") {
      p_.nearest = NearestMode::kRoundPreferCeil;
    } else if (nearest == "floor") {
      p_.nearest = NearestMode::kFloor;
    } else if (nearest == "ceil") {
      p_.nearest = NearestMode::kCeil;
    } else {
      return InvalidArgument("{}: unknown nearest_mode '{}'", n.Describe(), nearest);
    }
    p_.cubic_a = n.GetFloat("cubic_coeff_a", -0.75f);
    p_.exclude_outside = n.GetInt("exclude_outside", 0) != 0;
    p_.extrapolation = n.GetFloat("extrapolation_value", 0.f);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    const int64_t r = in.rank();
    if (r == 0) return InvalidArgument("Resize input must have rank >= 1");
    std::vector<double> scales(scales_attr_.begin(), scales_attr_.end());
    std::vector<int64_t> sizes;
    std::vector<double> roi;
    const bool new_form = !upsample_ && opset_ >= 11;
    const size_t scales_input = new_form ? 2 : 1;
    if ((upsample_ && opset_ >= 9) || !upsample_) {
      if (const Tensor* s = ctx.Input(scales_input); s != nullptr && s->NumElements() > 0) {
        if (!IsFloatingPoint(s->dtype())) return InvalidArgument("scales must be floating point");
        scales.resize(s->NumElements());
        for (int64_t i = 0; i < s->NumElements(); ++i) scales[i] = s->GetAsDouble(i);
      }
    }
    if (new_form) {
      if (const Tensor* s = ctx.Input(3); s != nullptr && s->NumElements() > 0) {
        if (!scales.empty()) return InvalidArgument("Resize takes scales or sizes, not both");
        ASSIGN_OR_RETURN(sizes, ReadIntList(*s, "sizes"));
      }
      if (p_.coord == Coord::kTfCropAndResize) {
        const Tensor* roi_t = ctx.Input(1);
        if (roi_t == nullptr || roi_t->NumElements() != 2 * r) {
          return InvalidArgument("tf_crop_and_resize needs a roi of {} values", 2 * r);
        }
        for (int64_t i = 0; i < 2 * r; ++i) roi.push_back(roi_t->GetAsDouble(i));
      }
    }
    Shape out_shape(r);
    if (!sizes.empty()) {
      if (static_cast<int64_t>(sizes.size()) != r) {
        return InvalidArgument("Resize sizes has {} values for rank {}", sizes.size(), r);
      }
      scales.resize(r);
      for (int64_t d = 0; d < r; ++d) {
        if (sizes[d] < 0) return InvalidArgument("Resize size {} is negative", sizes[d]);
        out_shape[d] = sizes[d];
        scales[d] = in.dim(d) == 0 ? 1.0 : static_cast<double>(sizes[d]) / in.dim(d);
      }
    } else {
      if (static_cast<int64_t>(scales.size()) != r) {
        return InvalidArgument("Resize needs {} scales (or sizes), got {}", r, scales.size());
      }
      for (int64_t d = 0; d < r; ++d) {
        const double size = std::floor(in.dim(d) * scales[d]);
        if (!(scales[d] > 0) || !(size < 1e12)) {
          return InvalidArgument("Resize scale {} is invalid for dim {}", scales[d], in.dim(d));
        }
        out_shape[d] = static_cast<int64_t>(size);
      }
    }
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), out_shape);
    if (out->NumElements() == 0) return Status::Ok();
    if (in.NumElements() == 0) return InvalidArgument("cannot resize an empty tensor to non-empty");
    std::vector<std::vector<Taps>> taps(r);
    for (int64_t d = 0; d < r; ++d) {
      double rs = roi.empty() ? 0 : roi[d], re = roi.empty() ? 1 : roi[d + r];
      taps[d] = AxisTaps(p_, in.dim(d), out_shape[d], scales[d], rs, re);
    }
    if (p_.mode == Mode::kNearest) {
      Tensor extra = Tensor::Allocate(in.dtype(), {});
      DispatchAll(
          in.dtype(),
          [&](auto tag) {
            *extra.data<decltype(tag)>() = FromFloat<decltype(tag)>(p_.extrapolation);
          },
          [] {});
      DispatchBySize(
          in.dtype(),
          [&](auto tag) {
            using T = decltype(tag);
            NearestCopy<T>(in, taps, *static_cast<const T*>(extra.raw_data()), out);
          },
          [] {});
      return Status::Ok();
    }
    switch (in.dtype()) {
      case DataType::kFloat32:
        Interpolate<float>(in, taps, p_.extrapolation, out);
        break;
      case DataType::kFloat64:
        Interpolate<double>(in, taps, p_.extrapolation, out);
        break;
      case DataType::kFloat16:
        Interpolate<Float16>(in, taps, p_.extrapolation, out);
        break;
      case DataType::kBFloat16:
        Interpolate<BFloat16>(in, taps, p_.extrapolation, out);
        break;
      case DataType::kInt8:
        Interpolate<int8_t>(in, taps, p_.extrapolation, out);
        break;
      case DataType::kUInt8:
        Interpolate<uint8_t>(in, taps, p_.extrapolation, out);
        break;
      case DataType::kInt32:
        Interpolate<int32_t>(in, taps, p_.extrapolation, out);
        break;
      case DataType::kInt64:
        Interpolate<int64_t>(in, taps, p_.extrapolation, out);
        break;
      default:
        return InvalidArgument("Resize {} does not support {}", "linear/cubic",
                               DataTypeName(in.dtype()));
    }
    return Status::Ok();
  }

 private:
  bool upsample_;
  int64_t opset_ = 0;
  ResizeParams p_;
  std::vector<float> scales_attr_;
};

template <bool kUpsample>
StatusOr<std::unique_ptr<OpKernel>> MakeResize(const KernelInfo& info) {
  auto k = std::make_unique<ResizeKernel>(kUpsample);
  RETURN_IF_ERROR(k->Init(info));
  return std::unique_ptr<OpKernel>(std::move(k));
}

}  // namespace

void RegisterResizeKernels(KernelRegistry& r) {
  r.Add("Resize", 10, kOpsetMax, AllTypes(), MakeResize<false>);
  r.Add("Upsample", 7, 9, AllTypes(), MakeResize<true>);
}

}  // namespace inferd::cpu
