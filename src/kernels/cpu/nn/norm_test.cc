#include <gtest/gtest.h>

#include <cmath>

#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrFloat;
using testing::AttrInt;
using testing::AttrInts;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

TEST(NnNorm, BatchNormalization) {
  Tensor x = RandomFloat({2, 3, 4, 5}), scale = RandomFloat({3}, 0.5, 2, 1),
         b = RandomFloat({3}, -1, 1, 2), mean = RandomFloat({3}, -1, 1, 3),
         var = RandomFloat({3}, 0.1, 2, 4);
  Tensor ref = Tensor::Allocate(DataType::kFloat32, x.shape());
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    const int64_t c = (i / 20) % 3;
    ref.data<float>()[i] = (x.data<float>()[i] - mean.data<float>()[c]) /
                               std::sqrt(var.data<float>()[c] + 1e-3f) * scale.data<float>()[c] +
                           b.data<float>()[c];
  }
  for (int64_t opset : {7, 9, 15}) {
    auto out = RunNode("BatchNormalization", {{"epsilon", AttrFloat(1e-3f)}},
                       {x, scale, b, mean, var}, 1, opset, {1, 2, 3, 4});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectTensorNear((*out)[0], ref, 1e-5, 1e-5);
  }
  EXPECT_FALSE(RunNode("BatchNormalization", {}, {x, RandomFloat({4}), b, mean, var}, 1).ok());
  EXPECT_FALSE(RunNode("BatchNormalization", {}, {RandomFloat({3}), scale, b, mean, var}, 1).ok());
}

// Normalizes each of `rows` contiguous rows of `len` (no affine).
Tensor RefRows(const Tensor& x, int64_t rows, int64_t len, float eps) {
  Tensor y = Tensor::Allocate(DataType::kFloat32, x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < len; ++i) m += x.data<float>()[r * len + i];
    m /= len;
    for (int64_t i = 0; i < len; ++i) v += std::pow(x.data<float>()[r * len + i] - m, 2);
    v /= len;
    for (int64_t i = 0; i < len; ++i) {
      y.data<float>()[r * len + i] = static_cast<float>((x.data<float>()[r * len + i] - m) / std::sqrt(v + eps));
    }
  }
  return y;
}

TEST(NnNorm, InstanceNormalization) {
  Tensor x = RandomFloat({2, 3, 4, 5});
  Tensor ones = Tensor::FromVector<float>({1, 1, 1}), zeros = Tensor::FromVector<float>({0, 0, 0});
  auto out = RunNode("InstanceNormalization", {}, {x, ones, zeros}, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], RefRows(x, 6, 20, 1e-5f), 1e-4, 1e-5);
  EXPECT_FALSE(RunNode("InstanceNormalization", {}, {x, Tensor::FromVector<float>({1, 1}), zeros}, 1).ok());
}

TEST(NnNorm, LayerNormalization) {
  Tensor x = RandomFloat({2, 3, 4});
  Tensor scale = RandomFloat({3, 4}, 0.5, 2, 5), bias = RandomFloat({4}, -1, 1, 6);
  Tensor ref = RefRows(x, 2, 12, 1e-5f);
  for (int64_t i = 0; i < ref.NumElements(); ++i) {
    ref.data<float>()[i] = ref.data<float>()[i] * scale.data<float>()[i % 12] + bias.data<float>()[i % 4];
  }
  auto out = RunNode("LayerNormalization", {{"axis", AttrInt(1)}}, {x, scale, bias}, 3);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], ref, 1e-4, 1e-5);
  ASSERT_EQ((*out)[1].shape(), (Shape{2, 1, 1}));
  ASSERT_EQ((*out)[2].shape(), (Shape{2, 1, 1}));
  double m = 0;
  for (int64_t i = 0; i < 12; ++i) m += x.data<float>()[i];
  EXPECT_NEAR((*out)[1].data<float>()[0], m / 12, 1e-5);
  EXPECT_FALSE(RunNode("LayerNormalization", {{"axis", AttrInt(3)}}, {x, scale}, 1).ok());
  EXPECT_FALSE(RunNode("LayerNormalization", {}, {x, RandomFloat({5})}, 1).ok());
}

TEST(NnNorm, LrnAndMvn) {
  Tensor x = RandomFloat({1, 5, 2, 2});
  const float alpha = 0.01f, beta = 0.6f, bias = 2.f;
  const int64_t size = 3;
  Tensor ref = Tensor::Allocate(DataType::kFloat32, x.shape());
  for (int64_t c = 0; c < 5; ++c) {
    for (int64_t i = 0; i < 4; ++i) {
      double sq = 0;
      for (int64_t q = std::max<int64_t>(0, c - 1); q <= std::min<int64_t>(4, c + 1); ++q) {
        sq += std::pow(x.data<float>()[q * 4 + i], 2);
      }
      ref.data<float>()[c * 4 + i] =
          static_cast<float>(x.data<float>()[c * 4 + i] / std::pow(bias + alpha / size * sq, beta));
    }
  }
  auto out = RunNode("LRN", {{"alpha", AttrFloat(alpha)}, {"beta", AttrFloat(beta)},
                             {"bias", AttrFloat(bias)}, {"size", AttrInt(size)}},
                     {x}, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], ref, 1e-5, 1e-6);
  EXPECT_FALSE(RunNode("LRN", {}, {x}, 1).ok());  // size is required

  // MVN over axes {1}: each (n, h, w) column of 5 channels normalized.
  Tensor x2 = RandomFloat({2, 3});
  auto mvn = RunNode("MeanVarianceNormalization", {{"axes", AttrInts({1})}}, {x2}, 1);
  ASSERT_TRUE(mvn.ok()) << mvn.status().ToString();
  ExpectTensorNear((*mvn)[0], RefRows(x2, 2, 3, 0.f), 1e-4, 1e-5);
  EXPECT_FALSE(RunNode("MeanVarianceNormalization", {{"axes", AttrInts({4})}}, {x2}, 1).ok());
}

}  // namespace
}  // namespace inferd::cpu
