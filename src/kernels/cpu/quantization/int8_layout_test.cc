// ai.inferd.QLinearConv: channels-last x/y and the fused residual join, on the oneDNN path
// (constant parameters) and the reference path (parameters fed at run time), against the standard
// QLinearConv reference computed in NCHW and transposed / dequantized by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "session/test_util.h"

namespace inferd {
namespace {

using testing::AttrInt;
using testing::AttrInts;
using testing::AttrString;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

template <typename T>
Tensor RandomInts(Shape shape, int lo, int hi, uint32_t seed) {
  Tensor t = Tensor::Allocate(DataTypeOf<T>::value, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
  return t;
}

// NCHW → NHWC (to_nhwc) or back, any element type of 1 or 4 bytes.
Tensor Permute(const Tensor& t, bool to_nhwc) {
  const Shape& s = t.shape();
  const Shape out_shape = to_nhwc ? Shape{s[0], s[2], s[3], s[1]} : Shape{s[0], s[3], s[1], s[2]};
  Tensor out = Tensor::Allocate(t.dtype(), out_shape);
  const int64_t n = s[0];
  const int64_t c = to_nhwc ? s[1] : s[3], h = to_nhwc ? s[2] : s[1], w = to_nhwc ? s[3] : s[2];
  const size_t es = t.ByteSize() / std::max<int64_t>(1, t.NumElements());
  auto src = static_cast<const char*>(t.raw_data());
  auto dst = static_cast<char*>(out.raw_data());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const int64_t nchw = ((b * c + ci) * h + y) * w + x, nhwc = ((b * h + y) * w + x) * c + ci;
          const int64_t from = to_nhwc ? nchw : nhwc, to = to_nhwc ? nhwc : nchw;
          std::copy(src + from * es, src + (from + 1) * es, dst + to * es);
        }
  return out;
}

struct Case {
  const char* name;
  Shape x, w;  // NCHW
  std::map<std::string, Attribute> attrs;
  bool uint8 = true;  // x and y uint8 (else int8)
  int x_zp = 128, y_zp = 3;
};

std::vector<Case> Cases() {
  return {
      {"3x3 pad 1", {2, 16, 9, 9}, {32, 16, 3, 3}, {{"pads", AttrInts({1, 1, 1, 1})}}},
      {"1x1 stride 2", {1, 24, 10, 10}, {16, 24, 1, 1}, {{"strides", AttrInts({2, 2})}}},
      {"grouped, asymmetric pads",
       {1, 8, 11, 11},
       {16, 4, 3, 3},
       {{"group", AttrInt(2)}, {"pads", AttrInts({0, 1, 1, 0})}}},
      {"int8, zero points 0", {2, 8, 6, 6}, {8, 8, 3, 3}, {}, false, 0, 0},
  };
}

struct Operands {
  std::vector<Tensor> inputs;  // standard QLinearConv inputs, NCHW x
  float y_scale = 0.05f;
};

Operands MakeOperands(const Case& c) {
  Operands o;
  const int64_t m = c.w[0];
  Tensor x = c.uint8 ? RandomInts<uint8_t>(c.x, 0, 255, 1) : RandomInts<int8_t>(c.x, -128, 127, 1);
  std::vector<float> ws(m);
  for (int64_t i = 0; i < m; ++i) ws[i] = 0.001f * (1 + i % 5);
  Tensor xzp = c.uint8 ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(c.x_zp))
                       : Tensor::Scalar<int8_t>(static_cast<int8_t>(c.x_zp));
  Tensor yzp = c.uint8 ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(c.y_zp))
                       : Tensor::Scalar<int8_t>(static_cast<int8_t>(c.y_zp));
  o.inputs = {x,
              Tensor::Scalar<float>(0.02f),
              xzp,
              RandomInts<int8_t>(c.w, -127, 127, 2),
              Tensor::FromVector<float>(ws, {m}),
              Tensor::Allocate(DataType::kInt8, {m}),
              Tensor::Scalar<float>(o.y_scale),
              yzp,
              RandomInts<int32_t>({m}, -5000, 5000, 3)};
  return o;
}

std::vector<size_t> Params() { return {1, 2, 3, 4, 5, 6, 7, 8}; }

TEST(QLinearConvChannelsLastTest, MatchesNchwReference) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Operands o = MakeOperands(c);
    auto ref = RunNode("QLinearConv", c.attrs, o.inputs, 1, 13);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (bool x_cl : {false, true}) {
      for (bool y_cl : {false, true}) {
        if (!x_cl && !y_cl) continue;
        SCOPED_TRACE(::testing::Message() << "x_cl " << x_cl << " y_cl " << y_cl);
        auto attrs = c.attrs;
        attrs["x_channels_last"] = AttrInt(x_cl);
        attrs["y_channels_last"] = AttrInt(y_cl);
        std::vector<Tensor> in = o.inputs;
        if (x_cl) in[0] = Permute(in[0], true);
        const Tensor want = y_cl ? Permute((*ref)[0], true) : (*ref)[0];
        for (bool constant : {true, false}) {  // oneDNN path, reference path
          auto got = RunNode("QLinearConv", attrs, in, 1, 13,
                             constant ? Params() : std::vector<size_t>{}, "ai.inferd");
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          ASSERT_EQ((*got)[0].shape(), want.shape());
          ExpectTensorNear((*got)[0], want, 0, 1);
        }
      }
    }
  }
}

// y = relu((q - y_zp) * y_scale + Z): Z in y's layout, the convolution still requantized first.
TEST(QLinearConvChannelsLastTest, FusedResidualMatchesDequantizeAdd) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Operands o = MakeOperands(c);
    auto ref = RunNode("QLinearConv", c.attrs, o.inputs, 1, 13);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (bool y_cl : {false, true}) {
      for (bool relu : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "y_cl " << y_cl << " relu " << relu);
        const Tensor q = y_cl ? Permute((*ref)[0], true) : (*ref)[0];
        Tensor z = RandomFloat(q.shape(), -2, 2, 9);
        auto want = RunNode("DequantizeAdd", {}, {q, o.inputs[6], o.inputs[7], z}, 1, 13, {},
                            "ai.inferd");
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        if (relu) {
          float* v = (*want)[0].data<float>();
          for (int64_t i = 0; i < (*want)[0].NumElements(); ++i) v[i] = std::max(v[i], 0.f);
        }
        auto attrs = c.attrs;
        attrs["x_channels_last"] = AttrInt(y_cl);
        attrs["y_channels_last"] = AttrInt(y_cl);
        if (relu) attrs["activation"] = AttrString("Relu");
        std::vector<Tensor> in = o.inputs;
        if (y_cl) in[0] = Permute(in[0], true);
        in.push_back(z);
        for (bool constant : {true, false}) {
          auto got = RunNode("QLinearConv", attrs, in, 1, 13,
                             constant ? Params() : std::vector<size_t>{}, "ai.inferd");
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          ASSERT_EQ((*got)[0].dtype(), DataType::kFloat32);
          // One unit of requantization rounding.
          ExpectTensorNear((*got)[0], (*want)[0], 0, o.y_scale * 1.01);
        }
      }
    }
  }
}

// ai.inferd.MaxPool on uint8/int8, NCHW or NHWC per side, against the standard MaxPool.
TEST(QuantMaxPoolTest, MatchesMaxPool) {
  const std::map<std::string, Attribute> attrs = {{"kernel_shape", AttrInts({3, 3})},
                                                  {"strides", AttrInts({2, 2})},
                                                  {"pads", AttrInts({1, 1, 1, 1})}};
  for (bool u8 : {true, false}) {
    Tensor x = u8 ? RandomInts<uint8_t>({2, 16, 11, 11}, 0, 255, 5)
                  : RandomInts<int8_t>({2, 16, 11, 11}, -128, 127, 5);
    auto want = RunNode("MaxPool", attrs, {x}, 1, 13);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (bool x_cl : {false, true}) {
      for (bool y_cl : {false, true}) {
        auto a = attrs;
        a["x_channels_last"] = AttrInt(x_cl);
        a["y_channels_last"] = AttrInt(y_cl);
        auto got = RunNode("MaxPool", a, {x_cl ? Permute(x, true) : x}, 1, 13, {}, "ai.inferd");
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ExpectTensorNear((*got)[0], y_cl ? Permute((*want)[0], true) : (*want)[0], 0, 0);
      }
    }
  }
  EXPECT_FALSE(RunNode("MaxPool", attrs, {RandomFloat({1, 2, 5, 5})}, 1, 13, {}, "ai.inferd").ok());
}

TEST(QLinearConvChannelsLastTest, BadInputsFail) {
  Case c = Cases()[0];
  Operands o = MakeOperands(c);
  auto attrs = c.attrs;
  attrs["x_channels_last"] = AttrInt(1);
  attrs["y_channels_last"] = AttrInt(1);
  // NCHW x where NHWC is declared: channel count mismatch, an error, not a crash.
  EXPECT_FALSE(RunNode("QLinearConv", attrs, o.inputs, 1, 13, Params(), "ai.inferd").ok());
  std::vector<Tensor> in = o.inputs;
  in[0] = Permute(in[0], true);
  in.push_back(RandomFloat({1, 2, 3}, -1, 1, 4));  // Z of the wrong shape
  EXPECT_FALSE(RunNode("QLinearConv", attrs, in, 1, 13, Params(), "ai.inferd").ok());
  EXPECT_FALSE(RunNode("QLinearConv", attrs, in, 1, 13, {}, "ai.inferd").ok());
  attrs["activation"] = AttrString("Tanh");
  EXPECT_FALSE(RunNode("QLinearConv", attrs, in, 1, 13, Params(), "ai.inferd").ok());
}

}  // namespace
}  // namespace inferd
