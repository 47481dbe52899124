#include "kernels/cpu/image/image_codec.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <new>

// clang-format off: jpeglib.h needs <cstdio> (FILE) first
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
// clang-format on

#include <fmt/format.h>

namespace inferd::cpu {
namespace {

constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr size_t kMessageSize = 320;

// The outcome of a C-style decoder below: no std::string or Status lives in the frames that
// libjpeg and libpng longjmp across, so the message is a fixed buffer.
struct DecodeResult {
  bool ok = false;
  bool truncated = false;
  bool too_large = false;  // the pixel limit (or no pixels): the message stands alone
  char message[kMessageSize] = {};
};

// False (with the message) when the declared size is empty or above the limit.
bool WithinPixelLimit(int64_t width, int64_t height, int64_t max_pixels, DecodeResult* result) {
  if (width > 0 && height > 0 && width <= max_pixels / height) return true;
  result->too_large = true;
  std::snprintf(result->message, kMessageSize,
                "image of %lldx%lld pixels exceeds max_pixels (%lld)",
                static_cast<long long>(width), static_cast<long long>(height),
                static_cast<long long>(max_pixels));
  return false;
}

// ---- JPEG ----

struct JpegError {
  jpeg_error_mgr mgr;  // first: libjpeg hands back cinfo->err, which we cast to JpegError
  jmp_buf jump;
  DecodeResult* result;
};

[[noreturn]] void JpegErrorExit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  char text[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, text);
  std::snprintf(e->result->message, kMessageSize, "%s", text);
  longjmp(e->jump, 1);
}

// libjpeg completes a JPEG whose data ends early with grey and only warns (JWRN_JPEG_EOF): that
// image is not the one the client sent, so it fails. Other warnings are recoverable corruption
// that PIL accepts too.
void JpegEmitMessage(j_common_ptr cinfo, int level) {
  if (level >= 0 || cinfo->err->msg_code != JWRN_JPEG_EOF) return;
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  e->result->truncated = true;
  std::snprintf(e->result->message, kMessageSize, "the data ends before the image does");
  longjmp(e->jump, 1);
}

// CMYK → RGB as PIL converts it: R = (255 - C)(255 - K) / 255. Adobe files hold inverted values.
void CmykRowToRgb(const uint8_t* cmyk, int64_t width, bool inverted, uint8_t* rgb) {
  for (int64_t x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    const int k = inverted ? cmyk[3] : 255 - cmyk[3];
    for (int c = 0; c < 3; ++c) {
      const int v = inverted ? cmyk[c] : 255 - cmyk[c];
      rgb[c] = static_cast<uint8_t>((v * k + 127) / 255);
    }
  }
}

// Header, limits and the scale, then the scanlines into `out` (allocated here once the size is
// known). Returns false with result->message set. Between setjmp and every longjmp this frame owns
// only C objects: `out` belongs to the caller, and its resize cannot longjmp.
bool DecodeJpegInto(const uint8_t* data, size_t size, const DecodeOptions& options,
                    RgbImage* out, DecodeResult* result) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  err.result = result;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  err.mgr.emit_message = JpegEmitMessage;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  const int64_t w = cinfo.image_width, h = cinfo.image_height;
  if (!WithinPixelLimit(w, h, options.max_pixels, result)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo.scale_num = static_cast<unsigned>(JpegScaleNumerator(w, h, options.min_shorter_side));
  cinfo.scale_denom = 8;
  jpeg_start_decompress(&cinfo);
  out->width = cinfo.output_width;
  out->height = cinfo.output_height;
  try {
    out->pixels.resize(static_cast<size_t>(out->width * out->height * 3));
  } catch (const std::bad_alloc&) {
    std::snprintf(result->message, kMessageSize, "out of memory for the decoded image");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  JSAMPARRAY cmyk_row =
      cmyk ? (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE,
                                        cinfo.output_width * 4, 1)
           : nullptr;
  const size_t stride = static_cast<size_t>(out->width) * 3;
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t* dst = out->pixels.data() + cinfo.output_scanline * stride;
    JSAMPROW row = cmyk ? cmyk_row[0] : dst;
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (cmyk) CmykRowToRgb(cmyk_row[0], out->width, cinfo.saw_Adobe_marker, dst);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  result->ok = true;
  return true;
}

// ---- PNG ----

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  DecodeResult* result;
};

[[noreturn]] void PngError(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  if (!src->result->truncated) std::snprintf(src->result->message, kMessageSize, "%s", message);
  png_longjmp(png, 1);
}

void PngWarning(png_structp, png_const_charp) {}  // ancillary-chunk trouble; the pixels are fine

void PngRead(png_structp png, png_bytep dst, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) {
    src->result->truncated = true;
    std::snprintf(src->result->message, kMessageSize,
                  "the data ends at byte %zu of the file while %zu more were needed", src->size,
                  n - (src->size - src->pos));
    png_error(png, src->result->message);
  }
  std::memcpy(dst, src->data + src->pos, n);
  src->pos += n;
}

// Every supported layout to 8-bit RGB (see the header for what becomes of alpha and 16 bits).
void PngToRgb8(png_structp png, png_infop info) {
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (depth == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_gray_to_rgb(png);
  }
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
}

// As DecodeJpegInto: the frame between setjmp and png_longjmp owns only C objects.
bool DecodePngInto(const uint8_t* data, size_t size, const DecodeOptions& options, RgbImage* out,
                   DecodeResult* result) {
  PngSource src{data, size, 0, result};
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, PngError, PngWarning);
  png_infop info = png != nullptr ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    std::snprintf(result->message, kMessageSize, "libpng could not start");
    png_destroy_read_struct(&png, nullptr, nullptr);
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &src, PngRead);
  png_read_info(png, info);
  const int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (!WithinPixelLimit(w, h, options.max_pixels, result)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  PngToRgb8(png, info);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(w) * 3) {
    std::snprintf(result->message, kMessageSize, "unsupported PNG layout");
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  out->width = w;
  out->height = h;
  try {
    out->pixels.resize(static_cast<size_t>(w * h * 3));
  } catch (const std::bad_alloc&) {
    std::snprintf(result->message, kMessageSize, "out of memory for the decoded image");
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  for (int pass = 0; pass < passes; ++pass) {
    for (int64_t y = 0; y < h; ++y) {
      png_read_row(png, out->pixels.data() + y * w * 3, nullptr);
    }
  }
  png_destroy_read_struct(&png, &info, nullptr);
  result->ok = true;
  return true;
}

}  // namespace

ImageFormat SniffImageFormat(std::string_view bytes) {
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::kJpeg;
  if (bytes.size() >= 8 && std::memcmp(b, kPngMagic, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

int JpegScaleNumerator(int64_t width, int64_t height, int64_t min_shorter_side) {
  const int64_t shorter = std::min(width, height);
  if (min_shorter_side <= 0 || shorter <= min_shorter_side) return 8;
  for (int n = 1; n < 8; ++n) {
    if ((shorter * n + 7) / 8 >= min_shorter_side) return n;
  }
  return 8;
}

StatusOr<RgbImage> DecodeImage(std::string_view bytes, const DecodeOptions& options) {
  if (bytes.empty()) return InvalidArgument("empty input (0 bytes), not a JPEG or PNG image");
  const ImageFormat format = SniffImageFormat(bytes);
  if (format == ImageFormat::kUnknown) {
    std::string head;
    for (size_t i = 0; i < std::min<size_t>(bytes.size(), 4); ++i) {
      head += fmt::format("{}{:02x}", i == 0 ? "" : " ", static_cast<uint8_t>(bytes[i]));
    }
    return InvalidArgument("not a JPEG or PNG image (first bytes {})", head);
  }
  RgbImage image;
  DecodeResult result;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const bool jpeg = format == ImageFormat::kJpeg;
  if (jpeg ? DecodeJpegInto(data, bytes.size(), options, &image, &result)
           : DecodePngInto(data, bytes.size(), options, &image, &result)) {
    return image;
  }
  if (result.too_large) return InvalidArgument("{}", result.message);
  return InvalidArgument("{} {}: {}", result.truncated ? "truncated" : "corrupt",
                         jpeg ? "JPEG" : "PNG", result.message);
}

}  // namespace inferd::cpu
