// ai.inferd.DecodeResizeCrop: the image pre-processor's one node (serving/processing_models.h
// builds it from a config.pbtxt with backend "inferd_image").
//
// Input: string [N] or [N, 1], one encoded JPEG or PNG image per row. Output: [N, 3, crop_h,
// crop_w] ("NCHW") or [N, crop_h, crop_w, 3] ("NHWC"), float ((pixel * scale - mean[c]) / std[c])
// or uint8 (the pixels). Each row: decode (image_codec.h; JPEGs with DCT-domain downscaling
// unless dct_scaling = 0) → shorter side to `resize` and centre crop (resize_crop.h).
//
// Attributes: resize (int, 0: none), crop (ints [h, w], required), mean, std (floats [3]),
// scale (float, 1/255), layout ("NCHW"), output_type ("FP32" | "UINT8"), channel_order ("RGB" |
// "BGR"), max_pixels (int, 64 Mi), dct_scaling (int, 1).
//
// A row that fails (not an image, corrupt, too large) fails the run with INVALID_ARGUMENT naming
// the row; the serving layer then re-runs each request of a merged batch alone, so only the
// request holding that image fails. Rows decode in parallel on the node's threads.
#include <algorithm>
#include <array>
#include <new>
#include <string>
#include <vector>

#include "kernels/cpu/image/image_codec.h"
#include "kernels/cpu/image/register.h"
#include "kernels/cpu/image/resize_crop.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {
namespace {

class DecodeResizeCropKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    resize_ = n.GetInt("resize", 0);
    const std::vector<int64_t> crop = n.GetInts("crop");
    if (crop.size() != 2 || crop[0] < 1 || crop[1] < 1) {
      return InvalidArgument("DecodeResizeCrop: crop must be [height, width] >= 1");
    }
    crop_h_ = crop[0];
    crop_w_ = crop[1];
    if (resize_ < 0) return InvalidArgument("DecodeResizeCrop: resize must be >= 0");
    const std::vector<float> mean = n.GetFloats("mean", {0, 0, 0});
    const std::vector<float> stdv = n.GetFloats("std", {1, 1, 1});
    if (mean.size() != 3 || stdv.size() != 3) {
      return InvalidArgument("DecodeResizeCrop: mean and std need 3 values (R, G, B)");
    }
    const std::string layout = n.GetString("layout", "NCHW");
    const std::string type = n.GetString("output_type", "FP32");
    const std::string order = n.GetString("channel_order", "RGB");
    if ((layout != "NCHW" && layout != "NHWC") || (type != "FP32" && type != "UINT8") ||
        (order != "RGB" && order != "BGR")) {
      return InvalidArgument("DecodeResizeCrop: layout, output_type or channel_order is invalid");
    }
    nchw_ = layout == "NCHW";
    uint8_ = type == "UINT8";
    bgr_ = order == "BGR";
    options_.max_pixels = n.GetInt("max_pixels", int64_t{64} << 20);
    if (options_.max_pixels < 1) return InvalidArgument("DecodeResizeCrop: max_pixels < 1");
    dct_scaling_ = n.GetInt("dct_scaling", 1) != 0;
    const float scale = n.GetFloat("scale", 1.0f / 255.0f);
    for (int c = 0; c < 3; ++c) {
      if (stdv[c] == 0) return InvalidArgument("DecodeResizeCrop: std must not be 0");
      for (int v = 0; v < 256; ++v) {
        // (v * scale - mean) / std in float, as torchvision's ToTensor + Normalize.
        lut_[c][v] = (static_cast<float>(v) * scale - mean[c]) / stdv[c];
      }
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr || !x->is_string() || x->rank() < 1 || x->rank() > 2 ||
        (x->rank() == 2 && x->dim(1) != 1)) {
      return InvalidArgument("DecodeResizeCrop needs a string input of shape [N] or [N, 1]");
    }
    const int64_t n = x->dim(0);
    const Shape shape = nchw_ ? Shape{n, 3, crop_h_, crop_w_} : Shape{n, crop_h_, crop_w_, 3};
    Tensor* out = ctx.AllocateOutputUninitialized(
        0, uint8_ ? DataType::kUInt8 : DataType::kFloat32, shape);
    std::vector<std::string> errors(static_cast<size_t>(n));
    const std::string* images = x->data<std::string>();
    const int threads = std::max(1, std::min<int>(ctx.num_threads(), static_cast<int>(n)));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (threads > 1)
    for (int64_t i = 0; i < n; ++i) {
      Status s = Row(images[i], i, out);
      if (!s.ok()) errors[i] = s.message();
    }
    for (int64_t i = 0; i < n; ++i) {
      if (errors[i].empty()) continue;
      const int64_t failed = std::count_if(errors.begin(), errors.end(),
                                           [](const std::string& e) { return !e.empty(); });
      return InvalidArgument("batch row {}{}: {}", i,
                             failed > 1 ? fmt::format(" (and {} more)", failed - 1) : "",
                             errors[i]);
    }
    return Status::Ok();
  }

 private:
  // One image into row `i` of `out`. Never throws (it runs inside an OpenMP loop).
  Status Row(const std::string& bytes, int64_t i, Tensor* out) const noexcept {
    try {
      DecodeOptions o = options_;
      o.min_shorter_side = dct_scaling_ ? (resize_ > 0 ? resize_ : std::max(crop_h_, crop_w_)) : 0;
      ASSIGN_OR_RETURN(RgbImage image, DecodeImage(bytes, o));
      ASSIGN_OR_RETURN(ResizeCropPlan plan,
                       PlanResizeCrop(image.width, image.height, resize_, crop_h_, crop_w_));
      const std::vector<uint8_t> window = ResizeAndCrop(image, plan);
      Write(window, i, out);
      return Status::Ok();
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("out of memory while decoding the image");
    }
  }

  // The crop window (HWC, RGB) into row `i` in the output's layout, type and channel order.
  void Write(const std::vector<uint8_t>& hwc, int64_t i, Tensor* out) const {
    const int64_t plane = crop_h_ * crop_w_;
    const int64_t row = i * plane * 3;
    for (int64_t p = 0; p < plane; ++p) {
      for (int c = 0; c < 3; ++c) {
        const int src = bgr_ ? 2 - c : c;
        const uint8_t v = hwc[p * 3 + src];
        const int64_t at = row + (nchw_ ? c * plane + p : p * 3 + c);
        if (uint8_) {
          out->data<uint8_t>()[at] = v;
        } else {
          out->data<float>()[at] = lut_[src][v];
        }
      }
    }
  }

  int64_t resize_ = 0, crop_h_ = 0, crop_w_ = 0;
  bool nchw_ = true, uint8_ = false, bgr_ = false, dct_scaling_ = true;
  DecodeOptions options_;
  std::array<std::array<float, 256>, 3> lut_{};
};

}  // namespace

void RegisterDecodeResizeCropKernels(KernelRegistry& r) {
  KernelDef def;
  def.domain = kImageDomain;
  def.op_type = "DecodeResizeCrop";
  def.types = {DataType::kString};
  def.factory = MakeKernel<DecodeResizeCropKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
