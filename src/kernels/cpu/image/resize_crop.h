// Shorter-side resize and centre crop of an RGB image, as torchvision's
// Resize(resize) + CenterCrop((crop_h, crop_w)) do on a PIL image.
//
//   ASSIGN_OR_RETURN(ResizeCropPlan plan, PlanResizeCrop(img.width, img.height, 256, 224, 224));
//   std::vector<uint8_t> window = ResizeAndCrop(img, plan);  // 224 × 224 × RGB
//
// The filter is PIL's antialiased bilinear (Image.resize(size, BILINEAR), which torchvision's
// Resize calls for PIL images): a triangle whose support widens with the reduction factor, so a
// large reduction averages every input pixel (as an area filter would) instead of aliasing, and
// an enlargement is plain bilinear interpolation. It is computed as PIL computes it — coefficients
// in double, 22-bit fixed point, horizontal pass first with an 8-bit intermediate — so the pixels
// equal PIL's for the same decoded image, which is what keeps a classifier's top-1 the same as in
// its PyTorch pipeline. Only the pixels inside the crop window are computed.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/image/image_codec.h"

namespace inferd::cpu {

struct ResizeCropPlan {
  int64_t resized_width = 0, resized_height = 0;  // the whole resized image
  int64_t top = 0, left = 0;                      // the crop window inside it
  int64_t crop_height = 0, crop_width = 0;
};

// torchvision's geometry: the shorter side becomes `resize` (the longer one
// int(resize * longer / shorter)); the window is centred with top = round((H - crop_h) / 2)
// (round half to even, as Python's round). resize == 0 keeps the size. INVALID_ARGUMENT when the
// window does not fit.
StatusOr<ResizeCropPlan> PlanResizeCrop(int64_t width, int64_t height, int64_t resize,
                                        int64_t crop_height, int64_t crop_width);

// The crop window of the resized image, crop_height × crop_width × 3.
std::vector<uint8_t> ResizeAndCrop(const RgbImage& image, const ResizeCropPlan& plan);

}  // namespace inferd::cpu
