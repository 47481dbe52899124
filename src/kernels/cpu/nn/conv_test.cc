#include <gtest/gtest.h>

#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrInt;
using testing::AttrInts;
using testing::AttrString;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

struct ConvCase {
  Shape x, w;
  int64_t group = 1;
  std::vector<int64_t> strides, pads, dilations;
  bool bias = true;
};

// Advances a multi-index over `dims` (row-major); false after the last.
bool NextIndex(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// Plain N-d grouped convolution (explicit pads).
Tensor RefConv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor* b) {
  const size_t r = c.x.size() - 2;
  std::vector<int64_t> in(c.x.begin() + 2, c.x.end()), k(c.w.begin() + 2, c.w.end()), out(r);
  for (size_t i = 0; i < r; ++i) {
    out[i] = (in[i] + c.pads[i] + c.pads[i + r] - (k[i] - 1) * c.dilations[i] - 1) / c.strides[i] + 1;
  }
  const int64_t n = c.x[0], cin = c.x[1], m = c.w[0], cg = cin / c.group, mg = m / c.group;
  Shape ys = {n, m};
  ys.insert(ys.end(), out.begin(), out.end());
  Tensor y = Tensor::Allocate(DataType::kFloat32, ys);
  const auto xst = StridesOf(c.x), wst = StridesOf(c.w), yst = StridesOf(ys);
  for (int64_t in_ = 0; in_ < n; ++in_) {
    for (int64_t oc = 0; oc < m; ++oc) {
      const int64_t g = oc / mg;
      std::vector<int64_t> o(r, 0);
      do {
        double acc = b ? b->data<float>()[oc] : 0.0;
        for (int64_t ic = 0; ic < cg; ++ic) {
          std::vector<int64_t> kk(r, 0);
          do {
            int64_t xoff = in_ * xst[0] + (g * cg + ic) * xst[1];
            bool inside = true;
            for (size_t d = 0; d < r; ++d) {
              int64_t p = o[d] * c.strides[d] - c.pads[d] + kk[d] * c.dilations[d];
              if (p < 0 || p >= in[d]) inside = false;
              xoff += p * xst[d + 2];
            }
            if (!inside) continue;
            int64_t woff = oc * wst[0] + ic * wst[1];
            for (size_t d = 0; d < r; ++d) woff += kk[d] * wst[d + 2];
            acc += double(x.data<float>()[xoff]) * w.data<float>()[woff];
          } while (NextIndex(kk, k));
        }
        int64_t yoff = in_ * yst[0] + oc * yst[1];
        for (size_t d = 0; d < r; ++d) yoff += o[d] * yst[d + 2];
        y.data<float>()[yoff] = static_cast<float>(acc);
      } while (NextIndex(o, out));
    }
  }
  return y;
}

void CheckConv(ConvCase c, bool const_weights) {
  const size_t r = c.x.size() - 2;
  if (c.strides.empty()) c.strides.assign(r, 1);
  if (c.dilations.empty()) c.dilations.assign(r, 1);
  if (c.pads.empty()) c.pads.assign(2 * r, 0);
  Tensor x = RandomFloat(c.x, -1, 1, 1), w = RandomFloat(c.w, -1, 1, 2),
         b = RandomFloat({c.w[0]}, -1, 1, 3);
  std::vector<Tensor> inputs = {x, w};
  if (c.bias) inputs.push_back(b);
  std::vector<size_t> consts;
  if (const_weights) consts = c.bias ? std::vector<size_t>{1, 2} : std::vector<size_t>{1};
  auto out = RunNode("Conv",
                     {{"group", AttrInt(c.group)},
                      {"strides", AttrInts(c.strides)},
                      {"pads", AttrInts(c.pads)},
                      {"dilations", AttrInts(c.dilations)}},
                     inputs, 1, 17, consts);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], RefConv(c, x, w, c.bias ? &b : nullptr), 1e-4, 1e-4);
}

TEST(NnConv, MatchesReference) {
  std::vector<ConvCase> cases = {
      {{1, 3, 8, 8}, {4, 3, 3, 3}},
      {{2, 4, 9, 7}, {6, 2, 3, 3}, 2, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {{1, 8, 10, 10}, {8, 1, 3, 3}, 8, {1, 1}, {1, 0, 2, 1}, {2, 2}},  // depthwise, dilated
      {{2, 3, 12}, {5, 3, 4}, 1, {3}, {2, 1}, {1}, false},              // 1-D
      {{1, 2, 5, 6, 4}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {1, 0, 1, 0, 1, 1}, {1, 1, 2}},  // 3-D
      {{1, 32, 7, 7}, {64, 32, 1, 1}},  // pointwise, blocked layouts
      {{3, 16, 14, 14}, {32, 16, 3, 3}, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      // First layers (fewer than 16 input channels: NCHW in, channel-blocked out): a stem-like
      // 7x7 stride 2 with an output channel count that is no multiple of the block, one channel
      // dilated without bias
      {{2, 3, 23, 21}, {20, 3, 7, 7}, 1, {2, 2}, {3, 3, 3, 3}, {1, 1}},
      {{1, 1, 9, 9}, {5, 1, 3, 3}, 1, {1, 1}, {2, 1, 0, 2}, {2, 2}, false},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(ShapeToString(c.x) + " * " + ShapeToString(c.w));
    CheckConv(c, /*const_weights=*/true);
    CheckConv(c, /*const_weights=*/false);
  }
}

TEST(NnConv, AutoPadSame) {
  Tensor x = RandomFloat({1, 2, 7, 6}), w = RandomFloat({3, 2, 3, 2}, -1, 1, 5);
  for (std::string mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    SCOPED_TRACE(mode);
    auto out = RunNode("Conv", {{"auto_pad", AttrString(mode)}, {"strides", AttrInts({2, 2})}},
                       {x, w}, 1);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ConvCase c{{1, 2, 7, 6}, {3, 2, 3, 2}, 1, {2, 2}, {}, {1, 1}, false};
    // in 7, s 2: out 4, total pad 2 (1/1). in 6, k 2: out 3, total pad 0.
    if (mode == "VALID") {
      c.pads = {0, 0, 0, 0};
    } else {
      c.pads = {1, 0, 1, 0};
    }
    ExpectTensorNear((*out)[0], RefConv(c, x, w, nullptr), 1e-4, 1e-4);
  }
  // Asymmetric total padding: in 6, k 3, s 1 → total 2; in 5, k 2 → total 1 (upper puts it at end).
  Tensor x2 = RandomFloat({1, 1, 6, 5}), w2 = RandomFloat({1, 1, 3, 2}, -1, 1, 6);
  auto up = RunNode("Conv", {{"auto_pad", AttrString("SAME_UPPER")}}, {x2, w2}, 1);
  auto lo = RunNode("Conv", {{"auto_pad", AttrString("SAME_LOWER")}}, {x2, w2}, 1);
  ASSERT_TRUE(up.ok() && lo.ok());
  ConvCase cu{{1, 1, 6, 5}, {1, 1, 3, 2}, 1, {1, 1}, {1, 0, 1, 1}, {1, 1}, false};
  ConvCase cl{{1, 1, 6, 5}, {1, 1, 3, 2}, 1, {1, 1}, {1, 1, 1, 0}, {1, 1}, false};
  ExpectTensorNear((*up)[0], RefConv(cu, x2, w2, nullptr), 1e-4, 1e-4);
  ExpectTensorNear((*lo)[0], RefConv(cl, x2, w2, nullptr), 1e-4, 1e-4);
}

TEST(NnConv, Float16AndFloat64) {
  ConvCase c{{1, 2, 5, 5}, {2, 2, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, false};
  Tensor x = RandomFloat(c.x), w = RandomFloat(c.w, -1, 1, 9);
  Tensor ref = RefConv(c, x, w, nullptr);
  Tensor xd = Tensor::Allocate(DataType::kFloat64, c.x), wd = Tensor::Allocate(DataType::kFloat64, c.w);
  for (int64_t i = 0; i < x.NumElements(); ++i) xd.data<double>()[i] = x.data<float>()[i];
  for (int64_t i = 0; i < w.NumElements(); ++i) wd.data<double>()[i] = w.data<float>()[i];
  auto out = RunNode("Conv", {{"pads", AttrInts({1, 1, 1, 1})}}, {xd, wd}, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].dtype(), DataType::kFloat64);
  for (int64_t i = 0; i < ref.NumElements(); ++i) {
    EXPECT_NEAR((*out)[0].data<double>()[i], ref.data<float>()[i], 1e-4);
  }
}

TEST(NnConv, BadInputs) {
  Tensor x = RandomFloat({1, 3, 5, 5});
  // Channel mismatch.
  EXPECT_FALSE(RunNode("Conv", {}, {x, RandomFloat({2, 4, 3, 3})}, 1).ok());
  // Wrong rank of W.
  EXPECT_FALSE(RunNode("Conv", {}, {x, RandomFloat({2, 3, 3})}, 1).ok());
  // Rank-2 X.
  EXPECT_FALSE(RunNode("Conv", {}, {RandomFloat({3, 5}), RandomFloat({2, 3})}, 1).ok());
  // Kernel larger than the input.
  EXPECT_FALSE(RunNode("Conv", {}, {x, RandomFloat({2, 3, 7, 7})}, 1).ok());
  // Bad bias, bad strides, output channels not divisible by group.
  EXPECT_FALSE(RunNode("Conv", {}, {x, RandomFloat({2, 3, 3, 3}), RandomFloat({3})}, 1).ok());
  EXPECT_FALSE(
      RunNode("Conv", {{"strides", AttrInts({0, 1})}}, {x, RandomFloat({2, 3, 3, 3})}, 1).ok());
  EXPECT_FALSE(RunNode("Conv", {{"group", AttrInt(3)}}, {x, RandomFloat({2, 1, 3, 3})}, 1).ok());
  EXPECT_FALSE(
      RunNode("ConvTranspose", {}, {x, RandomFloat({2, 3, 3, 3})}, 1).ok());  // W[0] != C
}

// ConvTranspose reference: scatter form with explicit pads and output size.
Tensor RefDeconv(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group,
                 const std::vector<int64_t>& s, const std::vector<int64_t>& d,
                 const std::vector<int64_t>& pad_begin, const Shape& ys) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const size_t r = xs.size() - 2;
  const int64_t icg = xs[1] / group, ocg = ws[1];
  Tensor y = Tensor::Allocate(DataType::kFloat32, ys);
  const auto xst = StridesOf(xs), wst = StridesOf(ws), yst = StridesOf(ys);
  std::vector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end());
  for (int64_t n = 0; n < xs[0]; ++n) {
    for (int64_t ic = 0; ic < xs[1]; ++ic) {
      const int64_t g = ic / icg;
      std::vector<int64_t> i(r, 0);
      do {
        float xv = x.data<float>()[n * xst[0] + ic * xst[1] + [&] {
          int64_t o = 0;
          for (size_t q = 0; q < r; ++q) o += i[q] * xst[q + 2];
          return o;
        }()];
        for (int64_t oc = 0; oc < ocg; ++oc) {
          std::vector<int64_t> kk(r, 0);
          do {
            int64_t yoff = n * yst[0] + (g * ocg + oc) * yst[1];
            bool inside = true;
            for (size_t q = 0; q < r; ++q) {
              int64_t p = i[q] * s[q] + kk[q] * d[q] - pad_begin[q];
              if (p < 0 || p >= ys[q + 2]) inside = false;
              yoff += p * yst[q + 2];
            }
            if (!inside) continue;
            int64_t woff = ic * wst[0] + oc * wst[1];
            for (size_t q = 0; q < r; ++q) woff += kk[q] * wst[q + 2];
            y.data<float>()[yoff] += xv * w.data<float>()[woff];
          } while (NextIndex(kk, k));
        }
      } while (NextIndex(i, in));
    }
  }
  if (b) {
    const int64_t plane = y.NumElements() / (ys[0] * ys[1]);
    for (int64_t p = 0; p < ys[0] * ys[1]; ++p) {
      for (int64_t j = 0; j < plane; ++j) y.data<float>()[p * plane + j] += b->data<float>()[p % ys[1]];
    }
  }
  return y;
}

TEST(NnConvTranspose, MatchesReference) {
  struct Case {
    Shape x, w;
    int64_t group;
    std::vector<int64_t> s, d, pads, out_pad;
  };
  std::vector<Case> cases = {
      {{1, 2, 4, 4}, {2, 3, 3, 3}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
      {{2, 4, 3, 5}, {4, 2, 3, 2}, 2, {2, 3}, {1, 1}, {1, 0, 1, 1}, {1, 0}},
      {{1, 3, 5}, {3, 2, 3}, 1, {2}, {2}, {1, 0}, {1}},
      {{1, 2, 3, 3, 2}, {2, 2, 2, 2, 2}, 1, {2, 2, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.x) + " * " + ShapeToString(c.w));
    const size_t r = c.x.size() - 2;
    Tensor x = RandomFloat(c.x), w = RandomFloat(c.w, -1, 1, 7), b = RandomFloat({c.w[1] * c.group}, -1, 1, 8);
    Shape ys = {c.x[0], c.w[1] * c.group};
    for (size_t i = 0; i < r; ++i) {
      ys.push_back(c.s[i] * (c.x[i + 2] - 1) + c.out_pad[i] + (c.w[i + 2] - 1) * c.d[i] + 1 -
                   c.pads[i] - c.pads[i + r]);
    }
    Tensor ref = RefDeconv(x, w, &b, c.group, c.s, c.d, std::vector<int64_t>(c.pads.begin(), c.pads.begin() + r), ys);
    for (bool consts : {true, false}) {
      auto out = RunNode("ConvTranspose",
                         {{"group", AttrInt(c.group)},
                          {"strides", AttrInts(c.s)},
                          {"dilations", AttrInts(c.d)},
                          {"pads", AttrInts(c.pads)},
                          {"output_padding", AttrInts(c.out_pad)}},
                         {x, w, b}, 1, 17, consts ? std::vector<size_t>{1, 2} : std::vector<size_t>{});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectTensorNear((*out)[0], ref, 1e-4, 1e-4);
    }
  }
}

TEST(NnConvTranspose, OutputShape) {
  // Natural size 9x7; output_shape 10x8 extends the end with bias-only values.
  Tensor x = RandomFloat({1, 1, 3, 3}), w = RandomFloat({1, 2, 3, 3}, -1, 1, 3);
  auto out = RunNode("ConvTranspose",
                     {{"strides", AttrInts({3, 2})}, {"output_shape", AttrInts({10, 8})}}, {x, w}, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], RefDeconv(x, w, nullptr, 1, {3, 2}, {1, 1}, {0, 0}, {1, 2, 10, 8}),
                   1e-4, 1e-4);
}

}  // namespace
}  // namespace inferd::cpu
