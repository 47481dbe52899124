// The oneDNN int8 QLinearConv path (constant quantization parameters) against the int32
// reference path of the same kernel (parameters fed as graph inputs), over geometries, zero
// points, output types and groups; results may differ by one unit of rounding.
#include <gtest/gtest.h>

#include <random>

#include "session/test_util.h"

namespace inferd {
namespace int8_test {
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

struct Case {
  const char* name;
  Shape x, w;
  std::map<std::string, Attribute> attrs;
  bool uint8_x = true;
  int x_zp = 128;
  bool uint8_y = true;
  int y_zp = 0;
  bool per_channel = true;
  bool bias = true;
  int w_lo = -127, w_hi = 127;  // weight range
};

void CheckCase(const Case& c) {
  SCOPED_TRACE(c.name);
  Tensor x =
      c.uint8_x ? RandomInts<uint8_t>(c.x, 0, 255, 1) : RandomInts<int8_t>(c.x, -128, 127, 1);
  Tensor w = RandomInts<int8_t>(c.w, c.w_lo, c.w_hi, 2);
  const int64_t m = c.w[0];
  std::vector<float> scales(c.per_channel ? m : 1);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.001f * (1 + i % 7);
  Tensor ws =
      c.per_channel ? Tensor::FromVector<float>(scales, {m}) : Tensor::Scalar<float>(0.003f);
  Tensor wzp = c.per_channel ? Tensor::Allocate(DataType::kInt8, {m}) : Tensor::Scalar<int8_t>(0);
  Tensor xzp = c.uint8_x ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(c.x_zp))
                         : Tensor::Scalar<int8_t>(static_cast<int8_t>(c.x_zp));
  Tensor yzp = c.uint8_y ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(c.y_zp))
                         : Tensor::Scalar<int8_t>(static_cast<int8_t>(c.y_zp));
  std::vector<Tensor> inputs = {x,   Tensor::Scalar<float>(0.02f), xzp, w, ws,
                                wzp, Tensor::Scalar<float>(0.05f), yzp};
  if (c.bias) inputs.push_back(RandomInts<int32_t>({m}, -5000, 5000, 3));
  std::vector<size_t> constants;
  for (size_t i = 1; i < inputs.size(); ++i) constants.push_back(i);
  auto fast = RunNode("QLinearConv", c.attrs, inputs, 1, 13, constants);
  auto ref = RunNode("QLinearConv", c.attrs, inputs, 1, 13);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  ExpectTensorNear((*fast)[0], (*ref)[0], 0, 1);
}

TEST(QLinearConvDnnlTest, MatchesReference) {
  std::vector<Case> cases;
  cases.push_back({"3x3 pad 1, u8 zp 128 → u8 relu",
                   {2, 16, 9, 9},
                   {32, 16, 3, 3},
                   {{"pads", AttrInts({1, 1, 1, 1})}}});
  cases.push_back({"stride 2, no bias, per tensor, y zp 7",
                   {1, 8, 10, 10},
                   {8, 8, 3, 3},
                   {{"strides", AttrInts({2, 2})}, {"pads", AttrInts({0, 1, 1, 0})}},
                   true,
                   3,
                   true,
                   7,
                   false,
                   false});
  cases.push_back({"1x1, x zp 0 → s8", {3, 24, 5, 5}, {40, 24, 1, 1}, {}, true, 0, false, -3});
  cases.push_back({"s8 x, depthwise group",
                   {1, 12, 7, 7},
                   {12, 1, 3, 3},
                   {{"group", AttrInt(12)}, {"auto_pad", testing::AttrString("SAME_UPPER")}},
                   false,
                   -4,
                   true,
                   0});
  cases.push_back({"grouped, dilated",
                   {1, 8, 11, 11},
                   {16, 4, 3, 3},
                   {{"group", AttrInt(2)}, {"dilations", AttrInts({2, 2})}},
                   true,
                   100,
                   true,
                   10});
  cases.push_back({"1-D conv", {2, 4, 20}, {6, 4, 5}, {{"pads", AttrInts({2, 2})}}});
  for (const Case& c : cases) CheckCase(c);
}

// Weights within 7 bits with uint8 x: oneDNN's int8 convolution is exact on every CPU (without
// AVX-512 VNNI too, where full-range weights take the reference: conv_dnnl.h): oneDNN runs it.
TEST(QLinearConvDnnlTest, SevenBitWeightsMatchReference) {
  Case c{"3x3 pad 1, 7-bit weights",
         {2, 16, 9, 9},
         {32, 16, 3, 3},
         {{"pads", AttrInts({1, 1, 1, 1})}}};
  c.w_lo = -64;
  c.w_hi = 63;
  CheckCase(c);
  c = {"grouped, 7-bit weights",
       {1, 8, 11, 11},
       {16, 4, 3, 3},
       {{"group", AttrInt(2)}},
       true,
       100,
       true,
       10};
  c.w_lo = -64;
  c.w_hi = 63;
  CheckCase(c);
}

TEST(QLinearConvDnnlTest, BadInputsFail) {
  Tensor w = RandomInts<int8_t>({4, 3, 3, 3}, -127, 127, 2);
  std::vector<Tensor> inputs = {
      RandomInts<uint8_t>({1, 5, 6, 6}, 0, 255, 1),  // 5 channels, W wants 3
      Tensor::Scalar<float>(0.02f),
      Tensor::Scalar<uint8_t>(128),
      w,
      Tensor::Scalar<float>(0.01f),
      Tensor::Scalar<int8_t>(0),
      Tensor::Scalar<float>(0.05f),
      Tensor::Scalar<uint8_t>(0)};
  EXPECT_FALSE(RunNode("QLinearConv", {}, inputs, 1, 13, {1, 2, 3, 4, 5, 6, 7}).ok());
  inputs[0] = RandomInts<uint8_t>({1, 3}, 0, 255, 1);  // rank 2
  EXPECT_FALSE(RunNode("QLinearConv", {}, inputs, 1, 13, {1, 2, 3, 4, 5, 6, 7}).ok());
  inputs[0] = RandomInts<int8_t>({1, 3, 6, 6}, 0, 100, 1);  // int8 x but uint8 zero point
  EXPECT_FALSE(RunNode("QLinearConv", {}, inputs, 1, 13, {1, 2, 3, 4, 5, 6, 7}).ok());
}

// MatMulInteger with a constant int8 B (oneDNN) against the same node with B fed at run time
// (int32 reference loops): exact.
TEST(MatMulIntegerDnnlTest, MatchesReference) {
  for (bool u8 : {true, false}) {
    Tensor a = u8 ? RandomInts<uint8_t>({2, 7, 48}, 0, 255, 4)
                  : RandomInts<int8_t>({2, 7, 48}, -128, 127, 4);
    Tensor b = RandomInts<int8_t>({48, 33}, -127, 127, 5);
    Tensor azp = u8 ? Tensor::Scalar<uint8_t>(131) : Tensor::Scalar<int8_t>(-9);
    Tensor bzp = Tensor::Allocate(DataType::kInt8, {33});
    auto fast = RunNode("MatMulInteger", {}, {a, b, azp, bzp}, 1, 13, {1, 3});
    auto ref = RunNode("MatMulInteger", {}, {a, b, azp, bzp}, 1, 13);
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    EXPECT_EQ((*fast)[0].shape(), (Shape{2, 7, 33}));
    ExpectTensorNear((*fast)[0], (*ref)[0], 0, 0);
  }
  {  // uint8 A with 7-bit B: oneDNN on every CPU (DnnlInt8IsExact), still exact.
    Tensor a = RandomInts<uint8_t>({2, 7, 48}, 0, 255, 4);
    Tensor b = RandomInts<int8_t>({48, 33}, -64, 63, 5);
    Tensor azp = Tensor::Scalar<uint8_t>(131);
    auto fast = RunNode("MatMulInteger", {}, {a, b, azp}, 1, 13, {1});
    auto ref = RunNode("MatMulInteger", {}, {a, b, azp}, 1, 13);
    ASSERT_TRUE(fast.ok() && ref.ok()) << fast.status().ToString() << ref.status().ToString();
    ExpectTensorNear((*fast)[0], (*ref)[0], 0, 0);
  }
  {  // One row (a decode step), full ranges and a long K: int32 accumulation stays exact.
    Tensor a = RandomInts<uint8_t>({1, 1000}, 0, 255, 6);
    Tensor b = RandomInts<int8_t>({1000, 70}, -128, 127, 7);
    auto fast = RunNode("MatMulInteger", {}, {a, b}, 1, 13, {1});
    auto ref = RunNode("MatMulInteger", {}, {a, b}, 1, 13);
    ASSERT_TRUE(fast.ok() && ref.ok()) << fast.status().ToString() << ref.status().ToString();
    ExpectTensorNear((*fast)[0], (*ref)[0], 0, 0);
  }
  // K mismatch and a zero point of the wrong type fail cleanly.
  Tensor b = RandomInts<int8_t>({48, 8}, -127, 127, 5);
  EXPECT_FALSE(
      RunNode("MatMulInteger", {}, {RandomInts<uint8_t>({3, 40}, 0, 255, 1), b}, 1, 13, {1}).ok());
  EXPECT_FALSE(RunNode("MatMulInteger", {},
                       {RandomInts<uint8_t>({3, 48}, 0, 255, 1), b, Tensor::Scalar<int8_t>(1)}, 1,
                       13, {1})
                   .ok());
}

TEST(DequantizeAddTest, MatchesDequantizeAddRelu) {
  Tensor x = RandomInts<uint8_t>({2, 3, 5, 7}, 0, 255, 8);
  Tensor b = testing::RandomFloat({2, 3, 5, 7}, -2.f, 2.f, 9);
  const float s = 0.0123f;
  const int zp = 117;
  for (bool relu : {false, true}) {
    std::map<std::string, Attribute> attrs;
    if (relu) attrs["activation"] = testing::AttrString("Relu");
    auto r = RunNode("DequantizeAdd", attrs,
                     {x, Tensor::Scalar<float>(s), Tensor::Scalar<uint8_t>(zp), b}, 1, 13, {1, 2},
                     "ai.inferd");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    Tensor want = Tensor::Allocate(DataType::kFloat32, x.shape());
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      float v = static_cast<float>(x.data<uint8_t>()[i] - zp) * s + b.data<float>()[i];
      want.data<float>()[i] = relu ? std::max(0.f, v) : v;
    }
    ExpectTensorNear((*r)[0], want, 0, 0);
  }
  // Shape mismatch, wrong zero-point type, unknown activation: errors, no crash.
  EXPECT_FALSE(RunNode("DequantizeAdd", {},
                       {x, Tensor::Scalar<float>(s), Tensor::Scalar<uint8_t>(zp),
                        testing::RandomFloat({2, 3, 5})},
                       1, 13, {}, "ai.inferd")
                   .ok());
  EXPECT_FALSE(RunNode("DequantizeAdd", {},
                       {x, Tensor::Scalar<float>(s), Tensor::Scalar<int8_t>(1), b}, 1, 13, {},
                       "ai.inferd")
                   .ok());
  EXPECT_FALSE(RunNode("DequantizeAdd", {{"activation", testing::AttrString("Tanh")}},
                       {x, Tensor::Scalar<float>(s), Tensor::Scalar<uint8_t>(zp), b}, 1, 13, {},
                       "ai.inferd")
                   .ok());
}

// MatMulInt4 / GatherInt4 against float math on the dequantized weights; bad packing fails.
TEST(Int4KernelsTest, MatchDequantizedReference) {
  const int64_t k = 40, n = 3, block = 32;
  Tensor q = RandomInts<uint8_t>({n, k / 2}, 0, 255, 6);
  Tensor s = testing::RandomFloat({n, 2}, 0.01f, 0.1f, 7);
  Tensor a = testing::RandomFloat({2, 4, k}, -1.f, 1.f, 8);
  auto deq = [&](int64_t r, int64_t i) {
    uint8_t b = q.data<uint8_t>()[r * (k / 2) + i / 2];
    return static_cast<float>(((i & 1) ? (b >> 4) : (b & 15)) - 8) *
           s.data<float>()[r * 2 + i / block];
  };
  std::map<std::string, Attribute> attrs = {
      {"K", AttrInt(k)}, {"N", AttrInt(n)}, {"block_size", AttrInt(block)}};
  auto r = RunNode("MatMulInt4", attrs, {a, q, s}, 1, 13, {1, 2}, "ai.inferd");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Tensor want = Tensor::Allocate(DataType::kFloat32, {2, 4, n});
  for (int64_t m = 0; m < 8; ++m) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += a.data<float>()[m * k + i] * deq(j, i);
      want.data<float>()[m * n + j] = static_cast<float>(acc);
    }
  }
  ExpectTensorNear((*r)[0], want, 1e-4, 1e-4);
  // Gather rows 2, 0 of the same table (D = 40).
  Tensor idx = Tensor::FromVector<int64_t>({2, 0});
  auto gr = RunNode("GatherInt4", {{"D", AttrInt(k)}, {"block_size", AttrInt(block)}}, {q, s, idx},
                    1, 13, {0, 1}, "ai.inferd");
  ASSERT_TRUE(gr.ok()) << gr.status().ToString();
  for (int64_t i = 0; i < k; ++i) {
    EXPECT_FLOAT_EQ((*gr)[0].data<float>()[i], deq(2, i));
    EXPECT_FLOAT_EQ((*gr)[0].data<float>()[k + i], deq(0, i));
  }
  EXPECT_FALSE(RunNode("GatherInt4", {{"D", AttrInt(k)}, {"block_size", AttrInt(block)}},
                       {q, s, Tensor::FromVector<int64_t>({3})}, 1, 13, {0, 1}, "ai.inferd")
                   .ok());      // row out of range
  attrs["K"] = AttrInt(k + 2);  // packing does not match K
  EXPECT_FALSE(RunNode("MatMulInt4", attrs, {a, q, s}, 1, 13, {1, 2}, "ai.inferd").ok());
}

}  // namespace
}  // namespace int8_test
}  // namespace inferd
