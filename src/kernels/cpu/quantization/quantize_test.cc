// Quantization kernels against plain reference implementations.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "session/test_util.h"

namespace inferd {
namespace quantize_test {
namespace {

using testing::AttrInt;
using testing::AttrInts;
using testing::ExpectTensorNear;
using testing::RunNode;

template <typename T>
Tensor RandomInts(Shape shape, int lo, int hi, uint32_t seed) {
  Tensor t = Tensor::Allocate(DataTypeOf<T>::value, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
  return t;
}

TEST(QuantizeLinearTest, RoundsHalfToEvenAndSaturates) {
  Tensor x = Tensor::FromVector<float>({0.f, 1.f, 1.5f, 2.5f, 3.5f, -0.5f, 300.f, -300.f, 5.f});
  auto r = RunNode("QuantizeLinear", {}, {x, Tensor::Scalar<float>(1.f), Tensor::Scalar<uint8_t>(0)}, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<uint8_t>({0, 1, 2, 2, 4, 0, 255, 0, 5}));
  // int8 with zero point and scale 2.
  r = RunNode("QuantizeLinear", {}, {x, Tensor::Scalar<float>(2.f), Tensor::Scalar<int8_t>(-3)}, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // x/2 = 0, .5, .75, 1.25, 1.75, -.25, 150, -150, 2.5 → rint: 0,0,1,1,2,0,150,-150,2 → +(-3), clip.
  ExpectTensorNear((*r)[0], Tensor::FromVector<int8_t>({-3, -3, -2, -2, -1, -3, 127, -128, -1}));
  // No zero point: uint8.
  r = RunNode("QuantizeLinear", {}, {x, Tensor::Scalar<float>(1.f)}, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].dtype(), DataType::kUInt8);
}

TEST(QuantizeLinearTest, PerAxisMatchesReference) {
  Tensor x = testing::RandomFloat({2, 3, 4}, -5.f, 5.f);
  Tensor scale = Tensor::FromVector<float>({0.05f, 0.1f, 0.02f});
  Tensor zp = Tensor::FromVector<int8_t>({0, 10, -20});
  auto r = RunNode("QuantizeLinear", {{"axis", AttrInt(1)}}, {x, scale, zp}, 1, 13);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Tensor expected = Tensor::Allocate(DataType::kInt8, {2, 3, 4});
  for (int64_t i = 0; i < 24; ++i) {
    int64_t c = (i / 4) % 3;
    float q = std::nearbyint(x.data<float>()[i] / scale.data<float>()[c]) + zp.data<int8_t>()[c];
    expected.data<int8_t>()[i] = static_cast<int8_t>(std::clamp(q, -128.f, 127.f));
  }
  ExpectTensorNear((*r)[0], expected);
  // Negative axis.
  r = RunNode("QuantizeLinear", {{"axis", AttrInt(-2)}}, {x, scale, zp}, 1, 13);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], expected);
}

TEST(QuantizeLinearTest, BadInputsFail) {
  Tensor x = testing::RandomFloat({2, 3});
  Tensor scale = Tensor::FromVector<float>({0.1f, 0.2f, 0.3f});
  // Per-axis before opset 13.
  EXPECT_FALSE(RunNode("QuantizeLinear", {}, {x, scale, Tensor::FromVector<uint8_t>({1, 2, 3})}, 1, 10).ok());
  // Wrong per-axis size.
  EXPECT_FALSE(RunNode("QuantizeLinear", {{"axis", AttrInt(0)}},
                       {x, scale, Tensor::FromVector<uint8_t>({1, 2, 3})}, 1, 13).ok());
  // Zero point count differs from scale.
  EXPECT_FALSE(RunNode("QuantizeLinear", {}, {x, scale, Tensor::Scalar<uint8_t>(1)}, 1, 13).ok());
  // Axis out of range.
  EXPECT_FALSE(RunNode("QuantizeLinear", {{"axis", AttrInt(5)}},
                       {x, scale, Tensor::FromVector<uint8_t>({1, 2, 3})}, 1, 13).ok());
}

TEST(DequantizeLinearTest, PerTensorPerAxisAndInt32) {
  Tensor x = Tensor::FromVector<uint8_t>({0, 3, 128, 255});
  auto r = RunNode("DequantizeLinear", {}, {x, Tensor::Scalar<float>(2.f), Tensor::Scalar<uint8_t>(128)}, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({-256, -250, 0, 254}));

  Tensor xi = Tensor::FromVector<int8_t>({-128, 0, 5, 127, 1, 2}, {3, 2});
  r = RunNode("DequantizeLinear", {{"axis", AttrInt(0)}},
              {xi, Tensor::FromVector<float>({1.f, 0.5f, 2.f}), Tensor::FromVector<int8_t>({0, 1, -1})}, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({-128, 0, 2, 63, 4, 6}, {3, 2}));

  Tensor x32 = Tensor::FromVector<int32_t>({-100000, 7});
  r = RunNode("DequantizeLinear", {}, {x32, Tensor::Scalar<float>(0.5f)}, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({-50000, 3.5f}));

  // Zero-point type differs from input type.
  EXPECT_FALSE(RunNode("DequantizeLinear", {}, {x, Tensor::Scalar<float>(2.f), Tensor::Scalar<int8_t>(1)}, 1).ok());
}

TEST(DynamicQuantizeLinearTest, SpecExample) {
  Tensor x = Tensor::FromVector<float>({0, 2, -3, -2.5f, 1.34f, 0.5f});
  auto r = RunNode("DynamicQuantizeLinear", {}, {x}, 3, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<uint8_t>({153, 255, 0, 26, 221, 179}));
  ExpectTensorNear((*r)[1], Tensor::Scalar<float>(0.019607844f));
  ExpectTensorNear((*r)[2], Tensor::Scalar<uint8_t>(153));
  // All zeros: no division by zero.
  r = RunNode("DynamicQuantizeLinear", {}, {Tensor::FromVector<float>({0, 0})}, 3, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<uint8_t>({0, 0}));
}

// Reference: batched (broadcast over leading dims of equal rank) integer matmul.
template <typename A, typename B>
std::vector<int32_t> RefMatMul(const Tensor& a, const Tensor& b, int64_t batch, int64_t m,
                               int64_t k, int64_t n, const std::vector<int>& azp,
                               const std::vector<int>& bzp, bool b_shared) {
  std::vector<int32_t> c(batch * m * n);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int32_t acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          int32_t av = a.data<A>()[(bi * m + i) * k + p] - azp[azp.size() == 1 ? 0 : i];
          int32_t bv = b.data<B>()[((b_shared ? 0 : bi) * k + p) * n + j] - bzp[bzp.size() == 1 ? 0 : j];
          acc += av * bv;
        }
        c[(bi * m + i) * n + j] = acc;
      }
  return c;
}

TEST(MatMulIntegerTest, MatchesReferenceWithZeroPoints) {
  Tensor a = RandomInts<uint8_t>({3, 4, 5}, 0, 255, 1);
  Tensor b = RandomInts<int8_t>({5, 6}, -128, 127, 2);
  auto r = RunNode("MatMulInteger", {}, {a, b, Tensor::Scalar<uint8_t>(12), Tensor::Scalar<int8_t>(-3)}, 1, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto ref = RefMatMul<uint8_t, int8_t>(a, b, 3, 4, 5, 6, {12}, {-3}, true);
  ExpectTensorNear((*r)[0], Tensor::FromVector<int32_t>(ref, {3, 4, 6}));
  // Per-row / per-column zero points, no broadcast.
  Tensor b2 = RandomInts<uint8_t>({3, 5, 6}, 0, 255, 3);
  Tensor azp = Tensor::FromVector<uint8_t>({1, 2, 3, 4});
  Tensor bzp = Tensor::FromVector<uint8_t>({10, 20, 30, 40, 50, 60});
  r = RunNode("MatMulInteger", {}, {a, b2, azp, bzp}, 1, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ref = RefMatMul<uint8_t, uint8_t>(a, b2, 3, 4, 5, 6, {1, 2, 3, 4}, {10, 20, 30, 40, 50, 60}, false);
  ExpectTensorNear((*r)[0], Tensor::FromVector<int32_t>(ref, {3, 4, 6}));
  // No zero points, 1-D A.
  Tensor a1 = RandomInts<int8_t>({5}, -128, 127, 4);
  r = RunNode("MatMulInteger", {}, {a1, b}, 1, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ref = RefMatMul<int8_t, int8_t>(a1, b, 1, 1, 5, 6, {0}, {0}, true);
  ExpectTensorNear((*r)[0], Tensor::FromVector<int32_t>(ref, {6}));
  // Bad: inner dims differ; zero point of wrong length.
  EXPECT_FALSE(RunNode("MatMulInteger", {}, {a, RandomInts<int8_t>({4, 6}, -5, 5, 5)}, 1, 10).ok());
  EXPECT_FALSE(RunNode("MatMulInteger", {}, {a, b, Tensor::FromVector<uint8_t>({1, 2})}, 1, 10).ok());
}

TEST(QLinearMatMulTest, MatchesReference) {
  Tensor a = RandomInts<uint8_t>({2, 3, 8}, 0, 255, 6);
  Tensor b = RandomInts<int8_t>({8, 5}, -128, 127, 7);
  float as = 0.02f, bs = 0.01f, ys = 0.05f;
  auto r = RunNode("QLinearMatMul", {},
                   {a, Tensor::Scalar<float>(as), Tensor::Scalar<uint8_t>(120), b,
                    Tensor::Scalar<float>(bs), Tensor::Scalar<int8_t>(2), Tensor::Scalar<float>(ys),
                    Tensor::Scalar<uint8_t>(100)},
                   1, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto acc = RefMatMul<uint8_t, int8_t>(a, b, 2, 3, 8, 5, {120}, {2}, true);
  Tensor expected = Tensor::Allocate(DataType::kUInt8, {2, 3, 5});
  for (size_t i = 0; i < acc.size(); ++i) {
    float v = std::nearbyint(static_cast<float>(acc[i]) * (as * bs / ys)) + 100.f;
    expected.data<uint8_t>()[i] = static_cast<uint8_t>(std::clamp(v, 0.f, 255.f));
  }
  ExpectTensorNear((*r)[0], expected, 0, 1);  // allow 1 ulp of the quantized grid
  // Missing scale.
  EXPECT_FALSE(RunNode("QLinearMatMul", {},
                       {a, Tensor(), Tensor::Scalar<uint8_t>(120), b, Tensor::Scalar<float>(bs),
                        Tensor::Scalar<int8_t>(2), Tensor::Scalar<float>(ys), Tensor::Scalar<uint8_t>(100)},
                       1, 10).ok());
}

// Reference 2-D grouped conv over (x - xzp) * (w - wzp[m]).
std::vector<int32_t> RefConv2d(const Tensor& x, const Tensor& w, int xzp, const std::vector<int>& wzp,
                               int64_t group, std::vector<int64_t> pads, std::vector<int64_t> strides,
                               std::vector<int64_t> dil, Shape* out_shape) {
  int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  int64_t M = w.dim(0), KH = w.dim(2), KW = w.dim(3);
  int64_t OH = (H + pads[0] + pads[2] - dil[0] * (KH - 1) - 1) / strides[0] + 1;
  int64_t OW = (W + pads[1] + pads[3] - dil[1] * (KW - 1) - 1) / strides[1] + 1;
  *out_shape = {N, M, OH, OW};
  int64_t cg = C / group, mg = M / group;
  std::vector<int32_t> out(N * M * OH * OW);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int32_t acc = 0;
          int64_t g = m / mg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * strides[0] - pads[0] + kh * dil[0];
                int64_t iw = ow * strides[1] - pads[1] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int32_t xv = static_cast<int32_t>(x.GetAsInt64(((n * C + g * cg + c) * H + ih) * W + iw)) - xzp;
                int32_t wv = static_cast<int32_t>(w.GetAsInt64(((m * cg + c) * KH + kh) * KW + kw)) -
                             wzp[wzp.size() == 1 ? 0 : m];
                acc += xv * wv;
              }
          out[((n * M + m) * OH + oh) * OW + ow] = acc;
        }
  return out;
}

TEST(ConvIntegerTest, MatchesReference) {
  Tensor x = RandomInts<uint8_t>({2, 4, 7, 6}, 0, 255, 8);
  Tensor w = RandomInts<uint8_t>({6, 2, 3, 2}, 0, 255, 9);
  auto r = RunNode("ConvInteger",
                   {{"group", AttrInt(2)}, {"pads", AttrInts({1, 0, 2, 1})},
                    {"strides", AttrInts({2, 1})}, {"dilations", AttrInts({1, 2})}},
                   {x, w, Tensor::Scalar<uint8_t>(100), Tensor::Scalar<uint8_t>(7)}, 1, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Shape shape;
  auto ref = RefConv2d(x, w, 100, {7}, 2, {1, 0, 2, 1}, {2, 1}, {1, 2}, &shape);
  ExpectTensorNear((*r)[0], Tensor::FromVector<int32_t>(ref, shape));
  // Bad group.
  EXPECT_FALSE(RunNode("ConvInteger", {{"group", AttrInt(3)}}, {x, w}, 1, 10).ok());
  // Bad rank.
  EXPECT_FALSE(RunNode("ConvInteger", {}, {RandomInts<uint8_t>({4, 7}, 0, 9, 1), w}, 1, 10).ok());
}

TEST(QLinearConvTest, PerChannelMatchesReference) {
  Tensor x = RandomInts<int8_t>({1, 3, 5, 5}, -128, 127, 10);
  Tensor w = RandomInts<int8_t>({4, 3, 3, 3}, -128, 127, 11);
  Tensor ws = Tensor::FromVector<float>({0.01f, 0.02f, 0.005f, 0.03f});
  Tensor bias = Tensor::FromVector<int32_t>({100, -200, 300, 0});
  float xs = 0.05f, ys = 0.5f;
  auto r = RunNode("QLinearConv", {{"auto_pad", testing::AttrString("SAME_UPPER")}},
                   {x, Tensor::Scalar<float>(xs), Tensor::Scalar<int8_t>(-5), w, ws,
                    Tensor::FromVector<int8_t>({0, 0, 0, 0}), Tensor::Scalar<float>(ys),
                    Tensor::Scalar<int8_t>(3), bias},
                   1, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Shape shape;
  auto acc = RefConv2d(x, w, -5, {0}, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, &shape);
  Tensor expected = Tensor::Allocate(DataType::kInt8, shape);
  for (size_t i = 0; i < acc.size(); ++i) {
    int64_t m = (i / 25) % 4;
    float v = std::nearbyint(static_cast<float>(acc[i] + bias.data<int32_t>()[m]) *
                             (xs * ws.data<float>()[m] / ys)) + 3.f;
    expected.data<int8_t>()[i] = static_cast<int8_t>(std::clamp(v, -128.f, 127.f));
  }
  ExpectTensorNear((*r)[0], expected, 0, 1);
  // Bias of the wrong size.
  EXPECT_FALSE(RunNode("QLinearConv", {},
                       {x, Tensor::Scalar<float>(xs), Tensor::Scalar<int8_t>(-5), w, ws,
                        Tensor::FromVector<int8_t>({0, 0, 0, 0}), Tensor::Scalar<float>(ys),
                        Tensor::Scalar<int8_t>(3), Tensor::FromVector<int32_t>({1, 2})},
                       1, 10).ok());
}

}  // namespace
}  // namespace quantize_test
}  // namespace inferd
