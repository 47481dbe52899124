#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrInt;
using testing::AttrInts;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

struct PoolCase {
  Shape x;
  std::vector<int64_t> k, s, pads, d;
  bool ceil = false;
  bool include_pad = false;
};

// Reference 2-D pooling (rank-4 input) with explicit pads; avg divisor as ONNX/PyTorch: windows
// clipped to input+explicit pads (include_pad) or to the input.
void RefPool2d(const PoolCase& c, const Tensor& x, bool is_max, Tensor* y, Tensor* idx) {
  const int64_t n = c.x[0], ch = c.x[1], h = c.x[2], w = c.x[3];
  int64_t out[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t in = c.x[2 + i], ke = (c.k[i] - 1) * c.d[i] + 1;
    const int64_t span = in + c.pads[i] + c.pads[i + 2] - ke;
    out[i] = c.ceil ? (span + c.s[i] - 1) / c.s[i] + 1 : span / c.s[i] + 1;
    if (c.ceil && (out[i] - 1) * c.s[i] >= in + c.pads[i]) --out[i];
  }
  *y = Tensor::Allocate(DataType::kFloat32, {n, ch, out[0], out[1]});
  *idx = Tensor::Allocate(DataType::kInt64, {n, ch, out[0], out[1]});
  const float* xd = x.data<float>();
  for (int64_t p = 0; p < n * ch; ++p) {
    for (int64_t oh = 0; oh < out[0]; ++oh) {
      for (int64_t ow = 0; ow < out[1]; ++ow) {
        double acc = 0, best = -1e30;
        int64_t best_i = -1, cnt = 0, pcnt = 0;
        for (int64_t kh = 0; kh < c.k[0]; ++kh) {
          for (int64_t kw = 0; kw < c.k[1]; ++kw) {
            const int64_t ih = oh * c.s[0] - c.pads[0] + kh * c.d[0];
            const int64_t iw = ow * c.s[1] - c.pads[1] + kw * c.d[1];
            if (ih < h + c.pads[2] && iw < w + c.pads[3]) ++pcnt;
            if (ih < 0 || iw < 0 || ih >= h || iw >= w) continue;
            const double v = xd[p * h * w + ih * w + iw];
            ++cnt;
            acc += v;
            if (v > best) {
              best = v;
              best_i = p * h * w + ih * w + iw;
            }
          }
        }
        const int64_t o = (p * out[0] + oh) * out[1] + ow;
        y->data<float>()[o] = static_cast<float>(is_max ? best : acc / (c.include_pad ? pcnt : cnt));
        idx->data<int64_t>()[o] = best_i;
      }
    }
  }
}

TEST(NnPool, MaxAndAverageMatchReference) {
  std::vector<PoolCase> cases = {
      {{1, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {{2, 3, 7, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {{1, 4, 9, 9}, {3, 2}, {2, 3}, {0, 1, 1, 0}, {1, 1}, true},
      {{1, 2, 10, 10}, {2, 3}, {1, 2}, {1, 1, 0, 0}, {2, 2}},
      {{1, 1, 5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true},
      {{1, 2, 6, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true},  // ceil + include_pad
      {{2, 16, 11, 11}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true},
  };
  for (const PoolCase& c : cases) {
    SCOPED_TRACE(ShapeToString(c.x) + " k" + std::to_string(c.k[0]) + " ceil" + std::to_string(c.ceil));
    Tensor x = RandomFloat(c.x);
    Tensor ref_max, ref_avg, ref_idx, unused;
    RefPool2d(c, x, true, &ref_max, &ref_idx);
    RefPool2d(c, x, false, &ref_avg, &unused);
    std::map<std::string, Attribute> attrs = {{"kernel_shape", AttrInts(c.k)},
                                              {"strides", AttrInts(c.s)},
                                              {"pads", AttrInts(c.pads)},
                                              {"ceil_mode", AttrInt(c.ceil)}};
    auto avg_attrs = attrs;
    avg_attrs["count_include_pad"] = AttrInt(c.include_pad);
    auto max_attrs = attrs;
    max_attrs["dilations"] = AttrInts(c.d);
    if (c.d == std::vector<int64_t>{1, 1}) {
      auto avg = RunNode("AveragePool", avg_attrs, {x}, 1);
      ASSERT_TRUE(avg.ok()) << avg.status().ToString();
      ExpectTensorNear((*avg)[0], ref_avg, 1e-5, 1e-6);
    }
    auto mx = RunNode("MaxPool", max_attrs, {x}, 1);
    ASSERT_TRUE(mx.ok()) << mx.status().ToString();
    ExpectTensorNear((*mx)[0], ref_max, 0, 0);
    auto mxi = RunNode("MaxPool", max_attrs, {x}, 2);  // plain loop with indices
    ASSERT_TRUE(mxi.ok()) << mxi.status().ToString();
    ExpectTensorNear((*mxi)[0], ref_max, 0, 0);
    ExpectTensorNear((*mxi)[1], ref_idx, 0, 0);
  }
}

TEST(NnPool, OneAndThreeDimensional) {
  // 1-D and 3-D pools via the oneDNN path must agree with the plain loop (Indices output forces it).
  for (Shape xs : {Shape{2, 3, 11}, Shape{1, 2, 5, 6, 7}}) {
    const size_t r = xs.size() - 2;
    Tensor x = RandomFloat(xs);
    std::map<std::string, Attribute> attrs = {{"kernel_shape", AttrInts(std::vector<int64_t>(r, 3))},
                                              {"strides", AttrInts(std::vector<int64_t>(r, 2))},
                                              {"pads", AttrInts(std::vector<int64_t>(2 * r, 1))}};
    auto fast = RunNode("MaxPool", attrs, {x}, 1);
    auto slow = RunNode("MaxPool", attrs, {x}, 2);
    ASSERT_TRUE(fast.ok() && slow.ok());
    ExpectTensorNear((*fast)[0], (*slow)[0], 0, 0);
  }
}

TEST(NnPool, GlobalAndLp) {
  Tensor x = RandomFloat({2, 3, 4, 5});
  Tensor avg = Tensor::Allocate(DataType::kFloat32, {2, 3, 1, 1});
  Tensor mx = Tensor::Allocate(DataType::kFloat32, {2, 3, 1, 1});
  Tensor lp = Tensor::Allocate(DataType::kFloat32, {2, 3, 1, 1});
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0, m = -1e30, l = 0;
    for (int64_t i = 0; i < 20; ++i) {
      const double v = x.data<float>()[p * 20 + i];
      s += v;
      m = std::max(m, v);
      l += v * v;
    }
    avg.data<float>()[p] = static_cast<float>(s / 20);
    mx.data<float>()[p] = static_cast<float>(m);
    lp.data<float>()[p] = static_cast<float>(std::sqrt(l));
  }
  auto a = RunNode("GlobalAveragePool", {}, {x}, 1);
  auto m = RunNode("GlobalMaxPool", {}, {x}, 1);
  auto l = RunNode("GlobalLpPool", {}, {x}, 1);
  ASSERT_TRUE(a.ok() && m.ok() && l.ok());
  ExpectTensorNear((*a)[0], avg, 1e-5, 1e-6);
  ExpectTensorNear((*m)[0], mx, 0, 0);
  ExpectTensorNear((*l)[0], lp, 1e-5, 1e-6);
  // LpPool with a window covering the whole plane equals GlobalLpPool.
  auto lw = RunNode("LpPool", {{"kernel_shape", AttrInts({4, 5})}, {"p", AttrInt(2)}}, {x}, 1);
  ASSERT_TRUE(lw.ok()) << lw.status().ToString();
  ExpectTensorNear((*lw)[0], lp, 1e-5, 1e-6);
}

TEST(NnPool, BadInputs) {
  Tensor x = RandomFloat({1, 1, 4, 4});
  EXPECT_FALSE(RunNode("MaxPool", {}, {x}, 1).ok());  // no kernel_shape
  EXPECT_FALSE(RunNode("MaxPool", {{"kernel_shape", AttrInts({2})}}, {x}, 1).ok());
  EXPECT_FALSE(RunNode("MaxPool", {{"kernel_shape", AttrInts({5, 5})}}, {x}, 1).ok());
  EXPECT_FALSE(RunNode("AveragePool", {{"kernel_shape", AttrInts({2, 2})}}, {RandomFloat({4, 4})}, 1).ok());
  EXPECT_FALSE(RunNode("GlobalAveragePool", {}, {RandomFloat({4})}, 1).ok());
  EXPECT_FALSE(RunNode("MaxPool", {{"kernel_shape", AttrInts({2, 2})}, {"strides", AttrInts({0, 1})}},
                       {x}, 1).ok());
}

}  // namespace
}  // namespace inferd::cpu
