// Detection-model ops: NonMaxSuppression and RoiAlign, following the ONNX spec (and ONNX Runtime
// where the spec leaves details open: tie order, out-of-range samples, max-mode pooling).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

struct Box {
  float y1, x1, y2, x2;
};

class NonMaxSuppressionKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    center_point_box_ = info.node().GetInt("center_point_box", 0);
    if (center_point_box_ != 0 && center_point_box_ != 1) {
      return InvalidArgument("NonMaxSuppression center_point_box must be 0 or 1");
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* boxes = ctx.Input(0);
    const Tensor* scores = ctx.Input(1);
    if (boxes == nullptr || scores == nullptr || boxes->rank() != 3 || boxes->dim(2) != 4 ||
        scores->rank() != 3 || scores->dim(0) != boxes->dim(0) || scores->dim(2) != boxes->dim(1)) {
      return InvalidArgument("NonMaxSuppression needs boxes [B, N, 4] and scores [B, C, N]");
    }
    int64_t max_out = ctx.Input(2) && ctx.Input(2)->NumElements() > 0 ? ctx.Input(2)->GetAsInt64(0) : 0;
    float iou_th = ctx.Input(3) && ctx.Input(3)->NumElements() > 0
                       ? static_cast<float>(ctx.Input(3)->GetAsDouble(0)) : 0.f;
    bool has_score_th = ctx.Input(4) && ctx.Input(4)->NumElements() > 0;
    float score_th = has_score_th ? static_cast<float>(ctx.Input(4)->GetAsDouble(0)) : 0.f;
    if (iou_th < 0.f || iou_th > 1.f) {
      return InvalidArgument("NonMaxSuppression iou_threshold {} must be in [0, 1]", iou_th);
    }
    int64_t nb = boxes->dim(0), nc = scores->dim(1), n = boxes->dim(1);
    std::vector<int64_t> selected;  // triples
    std::vector<Box> bx(n);
    std::vector<float> sc(n);
    for (int64_t b = 0; b < nb && max_out > 0; ++b) {
      for (int64_t i = 0; i < n; ++i) {
        float v[4];
        for (int j = 0; j < 4; ++j) v[j] = static_cast<float>(boxes->GetAsDouble((b * n + i) * 4 + j));
        if (center_point_box_ == 1) {
          bx[i] = {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
        } else {
          bx[i] = {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]),
                   std::max(v[1], v[3])};
        }
      }
      for (int64_t c = 0; c < nc; ++c) {
        std::vector<int64_t> order;
        for (int64_t i = 0; i < n; ++i) {
          sc[i] = static_cast<float>(scores->GetAsDouble((b * nc + c) * n + i));
          if (!has_score_th || sc[i] > score_th) order.push_back(i);
        }
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t i, int64_t j) { return sc[i] > sc[j]; });
        std::vector<int64_t> kept;
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          bool keep = true;
          for (int64_t j : kept) {
            if (Iou(bx[i], bx[j]) > iou_th) {
              keep = false;
              break;
            }
          }
          if (keep) {
            kept.push_back(i);
            selected.insert(selected.end(), {b, c, i});
          }
        }
      }
    }
    int64_t count = static_cast<int64_t>(selected.size()) / 3;
    Tensor* out = ctx.AllocateOutput(0, DataType::kInt64, {count, 3});
    std::copy(selected.begin(), selected.end(), out->data<int64_t>());
    return Status::Ok();
  }

 private:
  static float Iou(const Box& a, const Box& b) {
    float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
    if (area_a <= 0.f || area_b <= 0.f) return 0.f;
    float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
    float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
    if (ih <= 0.f || iw <= 0.f) return 0.f;
    float inter = ih * iw;
    return inter / (area_a + area_b - inter);
  }

  int64_t center_point_box_ = 0;
};

class RoiAlignKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    std::string mode = n.GetString("mode", "avg");
    if (mode != "avg" && mode != "max") return InvalidArgument("RoiAlign mode '{}' is unknown", mode);
    max_mode_ = mode == "max";
    out_h_ = n.GetInt("output_height", 1);
    out_w_ = n.GetInt("output_width", 1);
    sampling_ratio_ = n.GetInt("sampling_ratio", 0);
    spatial_scale_ = n.GetFloat("spatial_scale", 1.f);
    std::string ctm = n.GetString("coordinate_transformation_mode", "half_pixel");
    if (ctm != "half_pixel" && ctm != "output_half_pixel") {
      return InvalidArgument("RoiAlign coordinate_transformation_mode '{}' is unknown", ctm);
    }
    half_pixel_ = info.opset() >= 16 && ctm == "half_pixel";
    if (out_h_ < 1 || out_w_ < 1 || sampling_ratio_ < 0) {
      return InvalidArgument("RoiAlign output sizes must be >= 1 and sampling_ratio >= 0");
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* rois = ctx.Input(1);
    const Tensor* bidx = ctx.Input(2);
    if (x == nullptr || rois == nullptr || bidx == nullptr || x->rank() != 4 || rois->rank() != 2 ||
        rois->dim(1) != 4 || bidx->rank() != 1 || bidx->dim(0) != rois->dim(0)) {
      return InvalidArgument("RoiAlign needs X [N, C, H, W], rois [R, 4], batch_indices [R]");
    }
    if (x->dtype() != DataType::kFloat32) return InvalidArgument("RoiAlign supports float32");
    int64_t nr = rois->dim(0), C = x->dim(1), H = x->dim(2), W = x->dim(3);
    Tensor* y = ctx.AllocateOutput(0, DataType::kFloat32, {nr, C, out_h_, out_w_});
    for (int64_t r = 0; r < nr; ++r) {
      int64_t b = bidx->GetAsInt64(r);
      if (b < 0 || b >= x->dim(0)) {
        return InvalidArgument("RoiAlign batch index {} is out of range [0, {})", b, x->dim(0));
      }
    }
    const float* xd = x->data<float>();
    float* yd = y->data<float>();
    ParallelFor(nr, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) PoolRoi(*rois, r, bidx->GetAsInt64(r), xd, C, H, W, yd);
    });
    return Status::Ok();
  }

 private:
  struct Sample {
    int64_t p1, p2, p3, p4;
    float w1, w2, w3, w4;
  };

  void PoolRoi(const Tensor& rois, int64_t r, int64_t b, const float* xd, int64_t C, int64_t H,
               int64_t W, float* yd) const {
    float offset = half_pixel_ ? 0.5f : 0.f;
    float sx = static_cast<float>(rois.GetAsDouble(r * 4 + 0)) * spatial_scale_ - offset;
    float sy = static_cast<float>(rois.GetAsDouble(r * 4 + 1)) * spatial_scale_ - offset;
    float ex = static_cast<float>(rois.GetAsDouble(r * 4 + 2)) * spatial_scale_ - offset;
    float ey = static_cast<float>(rois.GetAsDouble(r * 4 + 3)) * spatial_scale_ - offset;
    float rw = ex - sx, rh = ey - sy;
    if (!half_pixel_) {
      rw = std::max(rw, 1.f);
      rh = std::max(rh, 1.f);
    }
    float bin_h = rh / out_h_, bin_w = rw / out_w_;
    int64_t gh = sampling_ratio_ > 0 ? sampling_ratio_ : static_cast<int64_t>(std::ceil(rh / out_h_));
    int64_t gw = sampling_ratio_ > 0 ? sampling_ratio_ : static_cast<int64_t>(std::ceil(rw / out_w_));
    float count = static_cast<float>(std::max<int64_t>(gh * gw, 1));
    std::vector<Sample> samples;
    for (int64_t ph = 0; ph < out_h_; ++ph) {
      for (int64_t pw = 0; pw < out_w_; ++pw) {
        samples.clear();
        for (int64_t iy = 0; iy < gh; ++iy) {
          float yy = sy + ph * bin_h + (iy + 0.5f) * bin_h / gh;
          for (int64_t ix = 0; ix < gw; ++ix) {
            float xx = sx + pw * bin_w + (ix + 0.5f) * bin_w / gw;
            samples.push_back(Bilinear(yy, xx, H, W));
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          const float* plane = xd + (b * C + c) * H * W;
          float acc = 0.f;
          bool first = true;
          for (const Sample& s : samples) {
            float v1 = s.w1 * plane[s.p1], v2 = s.w2 * plane[s.p2];
            float v3 = s.w3 * plane[s.p3], v4 = s.w4 * plane[s.p4];
            if (max_mode_) {
              float v = std::max(std::max(std::max(v1, v2), v3), v4);
              acc = first ? v : std::max(acc, v);
              first = false;
            } else {
              acc += v1 + v2 + v3 + v4;
            }
          }
          yd[((r * C + c) * out_h_ + ph) * out_w_ + pw] = max_mode_ ? acc : acc / count;
        }
      }
    }
  }

  static Sample Bilinear(float y, float x, int64_t H, int64_t W) {
    if (y < -1.f || y > H || x < -1.f || x > W) return {0, 0, 0, 0, 0.f, 0.f, 0.f, 0.f};
    y = std::max(y, 0.f);
    x = std::max(x, 0.f);
    int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x), yh, xh;
    if (yl >= H - 1) {
      yh = yl = H - 1;
      y = static_cast<float>(yl);
    } else {
      yh = yl + 1;
    }
    if (xl >= W - 1) {
      xh = xl = W - 1;
      x = static_cast<float>(xl);
    } else {
      xh = xl + 1;
    }
    float ly = y - yl, lx = x - xl, hy = 1.f - ly, hx = 1.f - lx;
    return {yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh, hy * hx, hy * lx, ly * hx, ly * lx};
  }

  bool max_mode_ = false;
  bool half_pixel_ = true;
  int64_t out_h_ = 1, out_w_ = 1, sampling_ratio_ = 0;
  float spatial_scale_ = 1.f;
};

}  // namespace

void RegisterObjectDetectionKernels(KernelRegistry& r) {
  r.Add("NonMaxSuppression", 10, kOpsetMax, {DataType::kFloat32},
        MakeKernel<NonMaxSuppressionKernel>());
  r.Add("RoiAlign", 10, kOpsetMax, {DataType::kFloat32}, MakeKernel<RoiAlignKernel>());
}

}  // namespace inferd::cpu
