#include "kernels/cpu/image/resize_crop.h"

#include <algorithm>
#include <cmath>

namespace inferd::cpu {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's fixed point (Resample.c)

// The taps of output pixels [first, first + count) along one axis: input start and count per
// output pixel, and ksize fixed-point coefficients each (PIL's precompute_coeffs and
// normalize_coeffs_8bpc).
struct CropTaps {
  int ksize = 0;
  std::vector<int64_t> start, count;
  std::vector<int32_t> coeffs;
};

CropTaps BilinearTaps(int64_t in_size, int64_t out_size, int64_t first, int64_t n) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;  // the triangle's support is 1
  CropTaps t;
  t.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.start.resize(n);
  t.count.resize(n);
  t.coeffs.assign(static_cast<size_t>(n * t.ksize), 0);
  std::vector<double> k(t.ksize);
  const double ss = 1.0 / filterscale;  // multiplied, not divided by filterscale: PIL's rounding
  for (int64_t i = 0; i < n; ++i) {
    const double center = (static_cast<double>(first + i) + 0.5) * scale;
    // (int) truncation as in PIL; a negative start is clamped to 0 either way.
    int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    int64_t xmax = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size);
    xmax -= xmin;
    double ww = 0;
    for (int64_t x = 0; x < xmax; ++x) {
      const double d = std::abs((static_cast<double>(x + xmin) - center + 0.5) * ss);
      k[x] = d < 1.0 ? 1.0 - d : 0.0;
      ww += k[x];
    }
    int32_t* c = t.coeffs.data() + i * t.ksize;
    for (int64_t x = 0; x < xmax; ++x) {
      const double v = (ww != 0.0 ? k[x] / ww : k[x]) * (1 << kPrecisionBits);
      c[x] = static_cast<int32_t>(v < 0 ? -0.5 + v : 0.5 + v);
    }
    t.start[i] = xmin;
    t.count[i] = xmax;
  }
  return t;
}

uint8_t Clip8(int64_t acc) {
  return static_cast<uint8_t>(std::clamp<int64_t>(acc >> kPrecisionBits, 0, 255));
}

// Rows [row0, row0 + rows) of `src` (width src_w) resampled horizontally at `taps` into `dst`
// (rows × taps.start.size() × 3).
void Horizontal(const uint8_t* src, int64_t src_w, int64_t row0, int64_t rows, const CropTaps& taps,
                uint8_t* dst) {
  const int64_t out_w = static_cast<int64_t>(taps.start.size());
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* in = src + (row0 + y) * src_w * 3;
    uint8_t* out = dst + y * out_w * 3;
    for (int64_t x = 0; x < out_w; ++x) {
      const int32_t* k = taps.coeffs.data() + x * taps.ksize;
      const uint8_t* p = in + taps.start[x] * 3;
      int64_t r = 1 << (kPrecisionBits - 1), g = r, b = r;
      for (int64_t j = 0; j < taps.count[x]; ++j, p += 3) {
        r += p[0] * k[j];
        g += p[1] * k[j];
        b += p[2] * k[j];
      }
      out[x * 3] = Clip8(r);
      out[x * 3 + 1] = Clip8(g);
      out[x * 3 + 2] = Clip8(b);
    }
  }
}

// `src` (rows starting at input row `row0`, width w) resampled vertically at `taps` into `dst`.
void Vertical(const uint8_t* src, int64_t w, int64_t row0, const CropTaps& taps, uint8_t* dst) {
  const int64_t out_h = static_cast<int64_t>(taps.start.size());
  const int64_t stride = w * 3;
  for (int64_t y = 0; y < out_h; ++y) {
    const int32_t* k = taps.coeffs.data() + y * taps.ksize;
    const uint8_t* base = src + (taps.start[y] - row0) * stride;
    uint8_t* out = dst + y * stride;
    for (int64_t x = 0; x < stride; ++x) {
      int64_t acc = 1 << (kPrecisionBits - 1);
      for (int64_t j = 0; j < taps.count[y]; ++j) acc += base[j * stride + x] * k[j];
      out[x] = Clip8(acc);
    }
  }
}

// Rows [row0, row0 + rows), columns [col0, col0 + cols) of `src` (width w).
std::vector<uint8_t> Window(const uint8_t* src, int64_t w, int64_t row0, int64_t rows,
                            int64_t col0, int64_t cols) {
  std::vector<uint8_t> out(static_cast<size_t>(rows * cols * 3));
  for (int64_t y = 0; y < rows; ++y) {
    std::copy_n(src + ((row0 + y) * w + col0) * 3, cols * 3, out.data() + y * cols * 3);
  }
  return out;
}

}  // namespace

StatusOr<ResizeCropPlan> PlanResizeCrop(int64_t width, int64_t height, int64_t resize,
                                        int64_t crop_height, int64_t crop_width) {
  ResizeCropPlan p;
  p.resized_width = width;
  p.resized_height = height;
  if (resize > 0) {
    const bool portrait = width <= height;
    const int64_t shorter = portrait ? width : height, longer = portrait ? height : width;
    const auto other = static_cast<int64_t>(static_cast<double>(resize) *
                                            static_cast<double>(longer) /
                                            static_cast<double>(shorter));
    p.resized_width = portrait ? resize : other;
    p.resized_height = portrait ? other : resize;
  }
  if (crop_height > p.resized_height || crop_width > p.resized_width) {
    return InvalidArgument("image of {}x{} pixels, resized to {}x{}, is smaller than the crop {}x{}",
                           width, height, p.resized_width, p.resized_height, crop_width,
                           crop_height);
  }
  p.crop_height = crop_height;
  p.crop_width = crop_width;
  p.top = static_cast<int64_t>(std::nearbyint((p.resized_height - crop_height) / 2.0));
  p.left = static_cast<int64_t>(std::nearbyint((p.resized_width - crop_width) / 2.0));
  return p;
}

std::vector<uint8_t> ResizeAndCrop(const RgbImage& image, const ResizeCropPlan& p) {
  const bool horizontal = p.resized_width != image.width;
  const bool vertical = p.resized_height != image.height;
  // Input rows the vertical pass reads (all the window's rows when there is none).
  int64_t row0 = p.top, rows = p.crop_height;
  CropTaps vtaps;
  if (vertical) {
    vtaps = BilinearTaps(image.height, p.resized_height, p.top, p.crop_height);
    row0 = vtaps.start.front();
    int64_t end = row0;
    for (size_t i = 0; i < vtaps.start.size(); ++i) {
      row0 = std::min(row0, vtaps.start[i]);
      end = std::max(end, vtaps.start[i] + vtaps.count[i]);
    }
    rows = end - row0;
  }
  std::vector<uint8_t> columns;  // rows × crop_width × 3
  if (horizontal) {
    columns.resize(static_cast<size_t>(rows * p.crop_width * 3));
    Horizontal(image.pixels.data(), image.width,
               row0, rows, BilinearTaps(image.width, p.resized_width, p.left, p.crop_width),
               columns.data());
  } else {
    columns = Window(image.pixels.data(), image.width, row0, rows, p.left, p.crop_width);
  }
  if (!vertical) return columns;
  std::vector<uint8_t> out(static_cast<size_t>(p.crop_height * p.crop_width * 3));
  Vertical(columns.data(), p.crop_width, row0, vtaps, out.data());
  return out;
}

}  // namespace inferd::cpu
