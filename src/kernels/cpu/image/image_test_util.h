// Test-only encoders (libjpeg, libpng) that make the images the image kernels' tests decode
// (header-only: a .cc here would be linked into the production library).
//
// EncodeJpeg: `pixels` height × width × components (1: gray, 3: RGB, 4: CMYK, which libjpeg
// writes with the Adobe marker, i.e. inverted as Photoshop stores CMYK).
// EncodePng: `pixels` in the layout of a PNG colour type (PNG_COLOR_TYPE_*) and bit depth 8 or 16
// (16-bit samples big-endian); `palette`: RGB triples for PNG_COLOR_TYPE_PALETTE.
// TestPicture: a smooth RGB picture (gradients and a diagonal edge).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// clang-format off
#include <jpeglib.h>
#include <png.h>
// clang-format on

namespace inferd::cpu::image_testing {

inline std::string EncodeJpeg(const std::vector<uint8_t>& pixels, int width, int height,
                              int components, int quality = 95) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) +
                   static_cast<size_t>(cinfo.next_scanline) * width * components;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buf), size);
  std::free(buf);
  return out;
}

namespace detail {
inline void Append(png_structp png, png_bytep data, size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), n);
}
}  // namespace detail

inline std::string EncodePng(const std::vector<uint8_t>& pixels, int width, int height,
                             int color_type, int bit_depth = 8,
                             const std::vector<uint8_t>& palette = {}, bool interlaced = false) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, detail::Append, nullptr);
  png_set_IHDR(png, info, width, height, bit_depth, color_type,
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> colors;
  for (size_t i = 0; i + 2 < palette.size(); i += 3) {
    colors.push_back({palette[i], palette[i + 1], palette[i + 2]});
  }
  if (!colors.empty()) png_set_PLTE(png, info, colors.data(), static_cast<int>(colors.size()));
  png_write_info(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  std::vector<png_bytep> rows(height);
  for (int y = 0; y < height; ++y) {
    rows[y] = const_cast<uint8_t*>(pixels.data()) + y * row_bytes;
  }
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

inline std::vector<uint8_t> TestPicture(int width, int height) {
  std::vector<uint8_t> p(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* q = &p[(static_cast<size_t>(y) * width + x) * 3];
      q[0] = static_cast<uint8_t>(255 * x / std::max(1, width - 1));
      q[1] = static_cast<uint8_t>(255 * y / std::max(1, height - 1));
      q[2] = x > y ? 200 : 40;
    }
  }
  return p;
}

}  // namespace inferd::cpu::image_testing
