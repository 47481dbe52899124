// Decoding of encoded images into 8-bit RGB for the image pre-processor (decode_resize_crop.cc):
// JPEG through libjpeg-turbo's libjpeg API, PNG through libpng (Debian's libjpeg62-turbo and
// libpng16; this folder is the only one that includes their headers, tests/layering checks it).
//
//   DecodeOptions o{.min_shorter_side = 256};
//   ASSIGN_OR_RETURN(RgbImage img, DecodeImage(bytes, o));  // img.pixels: height × width × RGB
//
// Conversions: grayscale, grayscale + alpha, palette and RGBA become RGB (alpha is dropped, as
// PIL's convert("RGB") does); 16-bit PNG samples keep their high byte; CMYK and YCCK JPEGs are
// converted as PIL converts them (Adobe-marked files store inverted CMYK, as Photoshop writes it).
//
// Errors are INVALID_ARGUMENT with the reason, for the client: "not a JPEG or PNG image (first
// bytes 47 49 46 38)", "empty input (0 bytes)", "truncated PNG: ...", "corrupt JPEG: ...",
// "image of 20000x20000 pixels exceeds max_pixels (67108864)". The pixel limit is checked from
// the header, before any pixel buffer is allocated, so a small file declaring a huge image (a
// decompression bomb) costs nothing. A JPEG whose data ends early fails ("truncated JPEG")
// instead of being completed with grey as libjpeg would; libjpeg's other, recoverable warnings
// (extraneous bytes before a marker) are ignored, as PIL ignores them.
//
// Thread-safety: DecodeImage is reentrant (one decoder object per call); libjpeg's and libpng's
// error longjmps stay inside frames that own no C++ objects with destructors.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd::cpu {

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3, row-major, R G B per pixel
};

struct DecodeOptions {
  // JPEG only: decode with libjpeg's DCT-domain downscaling (scale_num / 8, num in 1..8) at the
  // smallest scale whose shorter side is still >= this; 0 decodes at full size. PNG ignores it.
  int64_t min_shorter_side = 0;
  // Largest width * height accepted, from the header, before decoding.
  int64_t max_pixels = int64_t{64} << 20;
};

enum class ImageFormat { kUnknown, kJpeg, kPng };

// The format `bytes` start like (magic numbers only).
ImageFormat SniffImageFormat(std::string_view bytes);

// Decodes a JPEG or PNG image to RGB. See the header comment for conversions and errors.
StatusOr<RgbImage> DecodeImage(std::string_view bytes, const DecodeOptions& options = {});

// The libjpeg scale numerator (over 8) DecodeImage uses for a width × height JPEG: the smallest
// n in 1..8 with ceil(min(width, height) * n / 8) >= min_shorter_side (8 when none is smaller).
int JpegScaleNumerator(int64_t width, int64_t height, int64_t min_shorter_side);

}  // namespace inferd::cpu
