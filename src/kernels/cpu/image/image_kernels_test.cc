// The image family against plain references: the decoders on images encoded in the test (RGB,
// grayscale, CMYK JPEGs; RGB, RGBA, gray, palette, 16-bit, interlaced PNGs) and on bad input
// (empty, not an image, corrupt, truncated, a huge declared size); the resize against a direct
// (double precision, whole image) evaluation of the same filter; the kernels through RunNode.
// tests/server/image_models_test.py checks the pixels against PIL itself.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/image/image_codec.h"
#include "kernels/cpu/image/image_test_util.h"
#include "kernels/cpu/image/resize_crop.h"
#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using image_testing::EncodeJpeg;
using image_testing::EncodePng;
using image_testing::TestPicture;
using ::inferd::testing::AttrFloats;
using ::inferd::testing::AttrInt;
using ::inferd::testing::AttrInts;
using ::inferd::testing::AttrString;
using ::inferd::testing::RunNode;

int MaxDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  int d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

double MeanDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d += std::abs(a[i] - b[i]);
  return a.empty() ? 0 : d / static_cast<double>(a.size());
}

std::string ErrorOf(const std::string& bytes, DecodeOptions o = {}) {
  auto r = DecodeImage(bytes, o);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ImageCodec, JpegRgbGrayAndCmyk) {
  const std::vector<uint8_t> pic = TestPicture(64, 48);
  auto rgb = DecodeImage(EncodeJpeg(pic, 64, 48, 3, 100));
  ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
  EXPECT_EQ(rgb->width, 64);
  EXPECT_EQ(rgb->height, 48);
  EXPECT_LE(MeanDiff(rgb->pixels, pic), 2.0);  // lossy (chroma subsampled at the sharp edge)

  std::vector<uint8_t> gray(64 * 48);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = static_cast<uint8_t>(i % 200);
  auto g = DecodeImage(EncodeJpeg(gray, 64, 48, 1, 100));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (size_t i = 0; i < gray.size(); ++i) {
    ASSERT_EQ(g->pixels[i * 3], g->pixels[i * 3 + 1]);
    ASSERT_EQ(g->pixels[i * 3], g->pixels[i * 3 + 2]);
  }

  // Adobe CMYK (inverted): C=0 M=255 Y=255 K=0, i.e. red, is stored as 255 0 0 255.
  std::vector<uint8_t> cmyk;
  for (int i = 0; i < 16 * 16; ++i) cmyk.insert(cmyk.end(), {255, 0, 0, 255});
  auto c = DecodeImage(EncodeJpeg(cmyk, 16, 16, 4, 100));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(c->pixels[0], 255, 3);
  EXPECT_NEAR(c->pixels[1], 0, 3);
  EXPECT_NEAR(c->pixels[2], 0, 3);
}

TEST(ImageCodec, JpegDctScaling) {
  EXPECT_EQ(JpegScaleNumerator(800, 600, 256), 4);  // 600 * 4 / 8 = 300 >= 256; 3/8 gives 225
  EXPECT_EQ(JpegScaleNumerator(800, 600, 75), 1);
  EXPECT_EQ(JpegScaleNumerator(800, 600, 0), 8);
  EXPECT_EQ(JpegScaleNumerator(200, 300, 256), 8);  // already smaller: full size
  EXPECT_EQ(JpegScaleNumerator(512, 512, 256), 4);
  const std::string jpeg = EncodeJpeg(TestPicture(800, 600), 800, 600, 3);
  auto scaled = DecodeImage(jpeg, {.min_shorter_side = 256});
  ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
  EXPECT_EQ(scaled->width, 400);
  EXPECT_EQ(scaled->height, 300);
  auto full = DecodeImage(jpeg);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->width, 800);
}

TEST(ImageCodec, PngLayoutsBecomeRgb) {
  const std::vector<uint8_t> pic = TestPicture(13, 7);
  auto rgb = DecodeImage(EncodePng(pic, 13, 7, PNG_COLOR_TYPE_RGB));
  ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
  EXPECT_EQ(rgb->pixels, pic);  // lossless
  auto interlaced = DecodeImage(EncodePng(pic, 13, 7, PNG_COLOR_TYPE_RGB, 8, {}, true));
  ASSERT_TRUE(interlaced.ok()) << interlaced.status().ToString();
  EXPECT_EQ(interlaced->pixels, pic);

  std::vector<uint8_t> rgba, gray, gray_alpha, rgb16, indices;
  for (size_t i = 0; i < pic.size(); i += 3) {
    rgba.insert(rgba.end(), {pic[i], pic[i + 1], pic[i + 2], static_cast<uint8_t>(i % 256)});
    gray.push_back(pic[i]);
    gray_alpha.insert(gray_alpha.end(), {pic[i], 7});
    for (int c = 0; c < 3; ++c) rgb16.insert(rgb16.end(), {pic[i + c], 0x99});
    indices.push_back(static_cast<uint8_t>(i % 3));
  }
  auto a = DecodeImage(EncodePng(rgba, 13, 7, PNG_COLOR_TYPE_RGBA));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->pixels, pic);  // alpha dropped, as PIL's convert("RGB")
  auto s16 = DecodeImage(EncodePng(rgb16, 13, 7, PNG_COLOR_TYPE_RGB, 16));
  ASSERT_TRUE(s16.ok()) << s16.status().ToString();
  EXPECT_EQ(s16->pixels, pic);  // high bytes
  for (const auto& [bytes, type] : {std::pair{gray, PNG_COLOR_TYPE_GRAY},
                                    std::pair{gray_alpha, PNG_COLOR_TYPE_GRAY_ALPHA}}) {
    auto g = DecodeImage(EncodePng(bytes, 13, 7, type));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (size_t i = 0; i < gray.size(); ++i) {
      ASSERT_EQ(g->pixels[i * 3], gray[i]);
      ASSERT_EQ(g->pixels[i * 3 + 2], gray[i]);
    }
  }
  const std::vector<uint8_t> palette = {255, 0, 0, 0, 255, 0, 0, 0, 255};
  auto p = DecodeImage(EncodePng(indices, 13, 7, PNG_COLOR_TYPE_PALETTE, 8, palette));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (size_t i = 0; i < indices.size(); ++i) {
    ASSERT_EQ(p->pixels[i * 3 + indices[i]], 255);
    ASSERT_EQ(p->pixels[i * 3 + (indices[i] + 1) % 3], 0);
  }
}

TEST(ImageCodec, BadInputFailsWithTheReason) {
  EXPECT_EQ(ErrorOf(""), "empty input (0 bytes), not a JPEG or PNG image");
  EXPECT_EQ(ErrorOf("GIF89a..."), "not a JPEG or PNG image (first bytes 47 49 46 38)");
  EXPECT_EQ(ErrorOf("0"), "not a JPEG or PNG image (first bytes 30)");
  std::string corrupt = "\xff\xd8\xff" + std::string(100, '\x42');
  EXPECT_EQ(ErrorOf(corrupt).rfind("corrupt JPEG: ", 0), 0u) << ErrorOf(corrupt);

  const std::string jpeg = EncodeJpeg(TestPicture(64, 48), 64, 48, 3);
  EXPECT_EQ(ErrorOf(jpeg.substr(0, jpeg.size() / 2)),
            "truncated JPEG: the data ends before the image does");
  EXPECT_EQ(ErrorOf(jpeg.substr(0, 20)).rfind("truncated JPEG", 0), 0u);
  const std::string png = EncodePng(TestPicture(64, 48), 64, 48, PNG_COLOR_TYPE_RGB);
  EXPECT_EQ(ErrorOf(png.substr(0, png.size() / 2)).rfind("truncated PNG: the data ends at byte", 0),
            0u)
      << ErrorOf(png.substr(0, png.size() / 2));
  std::string flipped = png;
  flipped[png.size() / 2] ^= 0x55;  // inside IDAT: its CRC no longer matches
  EXPECT_EQ(ErrorOf(flipped).rfind("corrupt PNG: ", 0), 0u) << ErrorOf(flipped);

  EXPECT_EQ(ErrorOf(jpeg, {.max_pixels = 1000}),
            "image of 64x48 pixels exceeds max_pixels (1000)");
  EXPECT_EQ(ErrorOf(png, {.max_pixels = 1000}),
            "image of 64x48 pixels exceeds max_pixels (1000)");
}

// A small file that declares a huge image fails from its header, before any allocation.
TEST(ImageCodec, HugeDeclaredSizeFailsFromTheHeader) {
  std::string png = EncodePng(TestPicture(4, 4), 4, 4, PNG_COLOR_TYPE_RGB);
  // IHDR data sits at bytes 16..28 (width, height big-endian), its CRC at 29..32.
  for (int i : {16, 20}) png.replace(i, 4, std::string("\x00\x00\xc3\x50", 4));  // 50000
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<char>((crc >> (24 - 8 * i)) & 0xff);
  EXPECT_EQ(ErrorOf(png), "image of 50000x50000 pixels exceeds max_pixels (67108864)");

  std::string jpeg = EncodeJpeg(TestPicture(16, 16), 16, 16, 3);
  const size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  jpeg.replace(sof + 5, 4, std::string("\xea\x60\xea\x60", 4));  // 60000 x 60000
  EXPECT_EQ(ErrorOf(jpeg), "image of 60000x60000 pixels exceeds max_pixels (67108864)");
}

TEST(ResizeCrop, TorchvisionGeometry) {
  auto p = PlanResizeCrop(500, 375, 256, 224, 224);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->resized_width, 341);  // int(256 * 500 / 375)
  EXPECT_EQ(p->resized_height, 256);
  EXPECT_EQ(p->top, 16);
  EXPECT_EQ(p->left, 58);  // round(58.5) is 58 in Python (half to even)
  auto portrait = PlanResizeCrop(300, 451, 100, 50, 80);
  ASSERT_TRUE(portrait.ok());
  EXPECT_EQ(portrait->resized_width, 100);
  EXPECT_EQ(portrait->resized_height, 150);
  EXPECT_EQ(portrait->top, 50);
  EXPECT_EQ(portrait->left, 10);
  EXPECT_FALSE(PlanResizeCrop(100, 100, 0, 101, 50).ok());
  EXPECT_FALSE(PlanResizeCrop(100, 100, 64, 65, 50).ok());
}

// The same triangle filter evaluated directly in double on the whole image, then cropped.
std::vector<uint8_t> ReferenceResizeCrop(const RgbImage& img, const ResizeCropPlan& p) {
  auto weights = [](int64_t in, int64_t out, int64_t o, std::vector<double>* w) {
    const double scale = static_cast<double>(in) / out, fs = std::max(scale, 1.0);
    const double center = (o + 0.5) * scale;
    w->assign(in, 0.0);
    double sum = 0;
    for (int64_t i = 0; i < in; ++i) {
      const double d = std::abs((i + 0.5 - center) / fs);
      (*w)[i] = d < 1 ? 1 - d : 0;
      sum += (*w)[i];
    }
    for (double& v : *w) v /= sum;
  };
  std::vector<uint8_t> out;
  std::vector<double> wx, wy;
  for (int64_t y = p.top; y < p.top + p.crop_height; ++y) {
    weights(img.height, p.resized_height, y, &wy);
    for (int64_t x = p.left; x < p.left + p.crop_width; ++x) {
      weights(img.width, p.resized_width, x, &wx);
      for (int c = 0; c < 3; ++c) {
        double acc = 0;
        for (int64_t iy = 0; iy < img.height; ++iy) {
          if (wy[iy] == 0) continue;
          for (int64_t ix = 0; ix < img.width; ++ix) {
            acc += wy[iy] * wx[ix] * img.pixels[(iy * img.width + ix) * 3 + c];
          }
        }
        out.push_back(static_cast<uint8_t>(std::clamp(std::lround(acc), 0L, 255L)));
      }
    }
  }
  return out;
}

TEST(ResizeCrop, MatchesTheFilterEvaluatedDirectly) {
  RgbImage img{97, 61, TestPicture(97, 61)};
  for (auto [resize, ch, cw] : {std::tuple{32, 30, 32}, std::tuple{20, 20, 20},
                                std::tuple{150, 100, 120}, std::tuple{61, 50, 60}}) {
    auto p = PlanResizeCrop(img.width, img.height, resize, ch, cw);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    // PIL rounds the horizontal pass to 8 bits before the vertical one: within 1 level.
    EXPECT_LE(MaxDiff(ResizeAndCrop(img, *p), ReferenceResizeCrop(img, *p)), 1)
        << resize << " " << ch << "x" << cw;
  }
  // Only the window is computed, and it equals the same window of the whole resized image.
  auto whole = PlanResizeCrop(img.width, img.height, 40, 40, 63);
  auto part = PlanResizeCrop(img.width, img.height, 40, 20, 30);
  ASSERT_TRUE(whole.ok() && part.ok());
  EXPECT_EQ(whole->resized_width, 63);
  const std::vector<uint8_t> all = ResizeAndCrop(img, *whole), window = ResizeAndCrop(img, *part);
  for (int64_t y = 0; y < 20; ++y) {
    for (int64_t x = 0; x < 30 * 3; ++x) {
      ASSERT_EQ(window[y * 90 + x], all[((y + part->top) * 63 + part->left) * 3 + x]);
    }
  }
}

Tensor Strings(std::vector<std::string> v, Shape shape) {
  auto t = Tensor::FromStrings(std::move(v), std::move(shape));
  EXPECT_TRUE(t.ok());
  return *t;
}

std::map<std::string, Attribute> PreAttrs(int64_t resize, int64_t crop) {
  return {{"resize", AttrInt(resize)},
          {"crop", AttrInts({crop, crop})},
          {"mean", AttrFloats({0.485f, 0.456f, 0.406f})},
          {"std", AttrFloats({0.229f, 0.224f, 0.225f})}};
}

TEST(DecodeResizeCropKernel, BatchOfImagesNchwFloat) {
  const std::vector<std::string> images = {
      EncodeJpeg(TestPicture(80, 60), 80, 60, 3),
      EncodePng(TestPicture(50, 70), 50, 70, PNG_COLOR_TYPE_RGB)};
  auto out = RunNode("DecodeResizeCrop", PreAttrs(40, 32), {Strings(images, {2, 1})}, 1, 17, {},
                     "ai.inferd");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& t = (*out)[0];
  ASSERT_EQ(t.shape(), Shape({2, 3, 32, 32}));
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
  for (int i = 0; i < 2; ++i) {
    auto img = DecodeImage(images[i], {.min_shorter_side = 40});
    ASSERT_TRUE(img.ok());
    auto plan = PlanResizeCrop(img->width, img->height, 40, 32, 32);
    ASSERT_TRUE(plan.ok());
    const std::vector<uint8_t> hwc = ResizeAndCrop(*img, *plan);
    for (int c = 0; c < 3; ++c) {
      for (int p = 0; p < 32 * 32; ++p) {
        const float want = (hwc[p * 3 + c] / 255.0f - mean[c]) / stdv[c];
        ASSERT_NEAR(t.data<float>()[(i * 3 + c) * 1024 + p], want, 1e-5f);
      }
    }
  }
}

TEST(DecodeResizeCropKernel, NhwcUint8Bgr) {
  const std::vector<uint8_t> pic = TestPicture(16, 16);
  auto out = RunNode("DecodeResizeCrop",
                     {{"crop", AttrInts({8, 16})},
                      {"layout", AttrString("NHWC")},
                      {"output_type", AttrString("UINT8")},
                      {"channel_order", AttrString("BGR")}},
                     {Strings({EncodePng(pic, 16, 16, PNG_COLOR_TYPE_RGB)}, {1})}, 1, 17, {},
                     "ai.inferd");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& t = (*out)[0];
  ASSERT_EQ(t.shape(), Shape({1, 8, 16, 3}));
  ASSERT_EQ(t.dtype(), DataType::kUInt8);
  // No resize: rows 4..11 of the picture, channels reversed.
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 16; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(t.data<uint8_t>()[(y * 16 + x) * 3 + c], pic[((y + 4) * 16 + x) * 3 + 2 - c]);
      }
    }
  }
}

TEST(DecodeResizeCropKernel, BadRowNamesTheRow) {
  const std::string good = EncodePng(TestPicture(40, 40), 40, 40, PNG_COLOR_TYPE_RGB);
  auto out = RunNode("DecodeResizeCrop", PreAttrs(32, 32),
                     {Strings({good, "not an image", good, ""}, {4})}, 1, 17, {}, "ai.inferd");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(
                "batch row 1 (and 1 more): not a JPEG or PNG image (first bytes 6e 6f 74 20)"),
            std::string::npos)
      << out.status().message();
  auto small = RunNode("DecodeResizeCrop", {{"crop", AttrInts({64, 64})}}, {Strings({good}, {1})},
                       1, 17, {}, "ai.inferd");
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("smaller than the crop 64x64"), std::string::npos);
  auto bad = RunNode("DecodeResizeCrop", {{"crop", AttrInts({0, 4})}}, {Strings({good}, {1})}, 1,
                     17, {}, "ai.inferd");
  EXPECT_FALSE(bad.ok());
}

std::vector<std::string> Values(const Tensor& t) {
  return {t.data<std::string>(), t.data<std::string>() + t.NumElements()};
}

TEST(ClassifyTopKKernel, ScoresLabelsSoftmax) {
  Attribute labels;
  labels.type = Attribute::Type::kStrings;
  labels.strings = {"cat", "dog", "fish"};
  Tensor scores = Tensor::FromVector<float>({1, 3, 2, 0.5f, 0.5f, 9, -1, 0}, {2, 4});
  auto out = RunNode("ClassifyTopK", {{"k", AttrInt(2)}, {"labels", labels}}, {scores}, 1, 17, {},
                     "ai.inferd");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), Shape({2, 2}));
  EXPECT_EQ(Values((*out)[0]), std::vector<std::string>({"3.000000:1:dog", "2.000000:2:fish",
                                                         "9.000000:1:dog", "0.500000:0:cat"}));
  auto soft = RunNode("ClassifyTopK", {{"k", AttrInt(1)}, {"softmax", AttrInt(1)}},
                      {Tensor::FromVector<float>({0, std::log(3.0f), NAN}, {1, 3})}, 1, 17, {},
                      "ai.inferd");
  ASSERT_TRUE(soft.ok()) << soft.status().ToString();
  EXPECT_EQ(Values((*soft)[0]), std::vector<std::string>({"0.750000:1"}));
  auto few = RunNode("ClassifyTopK", {{"k", AttrInt(5)}}, {scores}, 1, 17, {}, "ai.inferd");
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("4 classes, fewer than k = 5"), std::string::npos);
}

}  // namespace
}  // namespace inferd::cpu
