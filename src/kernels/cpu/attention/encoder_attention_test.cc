// ai.inferd.Attention (the encoder op, fused/attention.cc) runs on this folder's MultiHeadAttention
// (dense_attention.h): checked against a plain reference at shapes that cross its tiles, with each
// mask broadcast form the fusion produces, and at BERT-base's heads.
#include <gtest/gtest.h>

#include <cmath>

#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrInt;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

// q [b, sq, h·d], k [b, skv, h·d], v [b, skv, h·dv], mask [b, mh, msq, skv] (mh, msq 1 or full).
Tensor Reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, int64_t h) {
  const int64_t b = q.dim(0), sq = q.dim(1), skv = k.dim(1);
  const int64_t d = q.dim(2) / h, dv = v.dim(2) / h;
  Tensor y = Tensor::Allocate(DataType::kFloat32, {b, sq, h * dv});
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> s(skv);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < skv; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < d; ++x) {
            dot += double{q.data<float>()[(bi * sq + i) * h * d + hi * d + x]} *
                   k.data<float>()[(bi * skv + j) * h * d + hi * d + x];
          }
          s[j] = dot * scale;
          if (mask != nullptr) {
            const int64_t mh = mask->dim(1), msq = mask->dim(2);
            s[j] += mask->data<
                float>()[((bi * mh + (mh == 1 ? 0 : hi)) * msq + (msq == 1 ? 0 : i)) * skv + j];
          }
          mx = std::max(mx, s[j]);
        }
        for (double& e : s) sum += e = std::exp(e - mx);
        for (int64_t c = 0; c < dv; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < skv; ++j) {
            acc += s[j] * v.data<float>()[(bi * skv + j) * h * dv + hi * dv + c];
          }
          y.data<float>()[(bi * sq + i) * h * dv + hi * dv + c] = static_cast<float>(acc / sum);
        }
      }
    }
  }
  return y;
}

TEST(EncoderAttention, MatchesReferenceWithMaskForms) {
  const int64_t b = 2, h = 3, d = 16, dv = 24;
  for (int64_t sq : {1, 33, 100}) {
    const int64_t skv = sq == 1 ? 40 : sq;
    Tensor q = RandomFloat({b, sq, h * d}, -1, 1, 1);
    Tensor k = RandomFloat({b, skv, h * d}, -1, 1, 2);
    Tensor v = RandomFloat({b, skv, h * dv}, -1, 1, 3);
    for (Shape ms : {Shape{}, Shape{b, 1, 1, skv}, Shape{b, h, sq, skv}, Shape{b, 1, sq, skv}}) {
      SCOPED_TRACE("sq " + std::to_string(sq) + " mask " + ShapeToString(ms));
      Tensor mask;
      if (!ms.empty()) {
        mask = RandomFloat(ms, -3, 0, 4);
        for (int64_t i = 0; i < mask.NumElements(); i += 3) mask.data<float>()[i] = -10000.f;
      }
      std::vector<Tensor> in = {q, k, v};
      if (mask.defined()) in.push_back(mask);
      auto out = RunNode("Attention", {{"num_heads", AttrInt(h)}}, in, 1, 17, {}, "ai.inferd");
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectTensorNear((*out)[0], Reference(q, k, v, mask.defined() ? &mask : nullptr, h), 1e-5,
                       2e-6);
    }
  }
}

// BERT-base's heads (12 x 64) at a length that is not a multiple of any tile, padding masked.
TEST(EncoderAttention, MatchesReferenceAtBertHeads) {
  const int64_t b = 2, h = 12, d = 64, s = 130;
  Tensor q = RandomFloat({b, s, h * d}, -1, 1, 5);
  Tensor k = RandomFloat({b, s, h * d}, -1, 1, 6);
  Tensor v = RandomFloat({b, s, h * d}, -1, 1, 7);
  Tensor mask = Tensor::Allocate(DataType::kFloat32, {b, 1, 1, s});
  for (int64_t i = 0; i < b * s; ++i)
    mask.data<float>()[i] = i % s < 100 + 20 * (i / s) ? 0.f : -10000.f;
  auto out =
      RunNode("Attention", {{"num_heads", AttrInt(h)}}, {q, k, v, mask}, 1, 17, {}, "ai.inferd");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], Reference(q, k, v, &mask, h), 1e-5, 2e-6);
}

}  // namespace
}  // namespace inferd::cpu
