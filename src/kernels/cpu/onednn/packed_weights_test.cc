// Constant weights of Conv / ConvTranspose / MatMul / Gemm are packed once per oneDNN layout and
// shared by the per-input-shape plans (PackedWeights, packed_weights.h): running shapes A, B, A gives
// the reference results every time and leaves one packed copy per weight.
#include <gtest/gtest.h>

#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/onednn/packed_weights.h"
#include "session/session.h"
#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrInt;
using testing::AttrInts;
using testing::ExpectTensorNear;
using testing::RandomFloat;

// 2-D Conv, stride 1, symmetric pad p, no groups, in double.
Tensor RefConv(const Tensor& x, const Tensor& w, const Tensor& b, int64_t p) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t m = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const int64_t oh = h + 2 * p - kh + 1, ow = wd + 2 * p - kw + 1;
  Tensor y = Tensor::Allocate(DataType::kFloat32, {n, m, oh, ow});
  const float* xd = x.data<float>();
  const float* wdat = w.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          double acc = b.data<float>()[o];
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t u = 0; u < kh; ++u)
              for (int64_t v = 0; v < kw; ++v) {
                const int64_t ir = r + u - p, iq = q + v - p;
                if (ir < 0 || ir >= h || iq < 0 || iq >= wd) continue;
                acc += static_cast<double>(xd[((i * c + ci) * h + ir) * wd + iq]) *
                       wdat[((o * c + ci) * kh + u) * kw + v];
              }
          y.data<float>()[((i * m + o) * oh + r) * ow + q] = static_cast<float>(acc);
        }
  return y;
}

// y[r, j] = sum_q a[r, q] * (trans_b ? b[j, q] : b[q, j]) + (c ? c[j] : 0), rows = all but last dim.
Tensor RefRows(const Tensor& a, const Tensor& b, bool trans_b, const Tensor* c) {
  const int64_t k = a.shape().back(), rows = a.NumElements() / k;
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  Shape out = a.shape();
  out.back() = n;
  Tensor y = Tensor::Allocate(DataType::kFloat32, out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = c ? c->data<float>()[j] : 0.0;
      for (int64_t q = 0; q < k; ++q) {
        acc += static_cast<double>(a.data<float>()[r * k + q]) *
               b.data<float>()[trans_b ? j * k + q : q * n + j];
      }
      y.data<float>()[r * n + j] = static_cast<float>(acc);
    }
  return y;
}

TEST(WeightSharing, ShapesABAKeepOnePackedCopyPerWeight) {
  const PackedWeights::Totals before = PackedWeights::LiveTotals();
  const Tensor conv_w = RandomFloat({16, 3, 3, 3}, -1, 1, 1);
  const Tensor conv_b = RandomFloat({16}, -1, 1, 2);
  const Tensor mm_b = RandomFloat({16, 24}, -1, 1, 3);
  const Tensor gemm_b = RandomFloat({10, 16}, -1, 1, 4);  // transB = 1
  const Tensor gemm_c = RandomFloat({10}, -1, 1, 5);
  {
    Model model;
    model.opsets[""] = 17;
    Graph& g = model.graph;
    g.name = "weight_sharing";
    g.initializers["conv_w"] = conv_w;
    g.initializers["conv_b"] = conv_b;
    g.initializers["mm_b"] = mm_b;
    g.initializers["gemm_b"] = gemm_b;
    g.initializers["gemm_c"] = gemm_c;
    for (const char* name : {"x", "a", "g"}) {
      ValueInfo vi;
      vi.name = name;
      vi.dtype = DataType::kFloat32;
      g.inputs.push_back(vi);
    }
    for (const char* name : {"conv_y", "mm_y", "gemm_y"}) {
      ValueInfo vi;
      vi.name = name;
      g.outputs.push_back(vi);
    }
    Node* conv = g.AddNode("Conv", {"x", "conv_w", "conv_b"}, {"conv_y"}, "conv");
    conv->attributes["pads"] = AttrInts({1, 1, 1, 1});
    g.AddNode("MatMul", {"a", "mm_b"}, {"mm_y"}, "matmul");
    Node* gemm = g.AddNode("Gemm", {"g", "gemm_b", "gemm_c"}, {"gemm_y"}, "gemm");
    gemm->attributes["transB"] = AttrInt(1);
    SessionOptions opts;
    opts.num_threads = 2;
    auto session = Session::Create(std::move(model), opts);
    ASSERT_TRUE(session.ok()) << session.status().ToString();

    int64_t layouts_after_first = -1;
    for (int64_t batch : {1, 5, 1, 5}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      const Tensor x = RandomFloat({batch, 3, 9, 7}, -1, 1, 10 + batch);
      const Tensor a = RandomFloat({batch, 7, 16}, -1, 1, 20 + batch);
      const Tensor gi = RandomFloat({batch * 3, 16}, -1, 1, 30 + batch);
      std::vector<Tensor> outs;
      ASSERT_TRUE((*session)->Run({x, a, gi}, &outs).ok());
      ASSERT_EQ(outs.size(), 3u);
      ExpectTensorNear(outs[0], RefConv(x, conv_w, conv_b, 1), 1e-4, 1e-4);
      ExpectTensorNear(outs[1], RefRows(a, mm_b, false, nullptr), 1e-4, 1e-4);
      ExpectTensorNear(outs[2], RefRows(gi, gemm_b, true, &gemm_c), 1e-4, 1e-4);
      const PackedWeights::Totals now = PackedWeights::LiveTotals();
      // One packed layout per constant weight, whatever the number of shapes run so far; the
      // MatMul's B is a GemmWeights instead where PreferPanelGemm (onednn/gemm_weights.h).
      const bool panel = PreferPanelGemm();
      EXPECT_EQ(now.layouts - before.layouts, panel ? 2 : 3);
      if (layouts_after_first < 0) layouts_after_first = now.bytes - before.bytes;
      EXPECT_EQ(now.bytes - before.bytes, layouts_after_first);
      // Packed copies are at least the weights (blocked layouts may pad).
      EXPECT_GE(now.bytes - before.bytes,
                static_cast<int64_t>(conv_w.ByteSize() + (panel ? 0 : mm_b.ByteSize()) +
                                     gemm_b.ByteSize()));
    }
  }
  // Destroying the session frees the packed copies.
  const PackedWeights::Totals after = PackedWeights::LiveTotals();
  EXPECT_EQ(after.layouts, before.layouts);
  EXPECT_EQ(after.bytes, before.bytes);
}

// ConvTranspose with a constant weight, shapes A, B, A: each run matches a fresh single-run
// session (the existing path, itself checked against a reference in nn/conv_test.cc).
TEST(WeightSharing, ConvTransposeShapesABA) {
  const Tensor w = RandomFloat({4, 6, 3, 3}, -1, 1, 7);
  for (int64_t batch : {2, 1, 2}) {
    const Tensor x = RandomFloat({batch, 4, 5, 6}, -1, 1, 40 + batch);
    auto shared = testing::RunNode("ConvTranspose", {{"strides", AttrInts({2, 2})}}, {x, w}, 1,
                                   17, {1});
    auto plain = testing::RunNode("ConvTranspose", {{"strides", AttrInts({2, 2})}}, {x, w}, 1, 17);
    ASSERT_TRUE(shared.ok()) << shared.status().ToString();
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    ExpectTensorNear((*shared)[0], (*plain)[0], 1e-5, 1e-5);
  }
}

// A float16 constant weight is converted once and packed once.
TEST(WeightSharing, Float16ConstantMatMul) {
  const Tensor b32 = RandomFloat({8, 12}, -1, 1, 9);
  Tensor b16 = Tensor::Allocate(DataType::kFloat16, b32.shape());
  Tensor b16_as32 = Tensor::Allocate(DataType::kFloat32, b32.shape());
  for (int64_t i = 0; i < b32.NumElements(); ++i) {
    b16.data<Float16>()[i] = Float16(b32.data<float>()[i]);
    b16_as32.data<float>()[i] = static_cast<float>(b16.data<Float16>()[i]);
  }
  const Tensor a32 = RandomFloat({3, 8}, -1, 1, 11);
  Tensor a16 = Tensor::Allocate(DataType::kFloat16, a32.shape());
  Tensor a16_as32 = Tensor::Allocate(DataType::kFloat32, a32.shape());
  for (int64_t i = 0; i < a32.NumElements(); ++i) {
    a16.data<Float16>()[i] = Float16(a32.data<float>()[i]);
    a16_as32.data<float>()[i] = static_cast<float>(a16.data<Float16>()[i]);
  }
  auto y = testing::RunNode("MatMul", {}, {a16, b16}, 1, 17, {1});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  ASSERT_EQ((*y)[0].dtype(), DataType::kFloat16);
  const Tensor ref = RefRows(a16_as32, b16_as32, false, nullptr);
  for (int64_t i = 0; i < ref.NumElements(); ++i) {
    EXPECT_NEAR(static_cast<float>((*y)[0].data<Float16>()[i]), ref.data<float>()[i], 2e-2);
  }
}

}  // namespace
}  // namespace inferd::cpu
