#include <gtest/gtest.h>

#include <cmath>

#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrInt;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

// Reference over (outer, len, inner); kind 0 softmax, 1 log-softmax, 2 hardmax.
Tensor Ref(const Tensor& x, int64_t outer, int64_t len, int64_t inner, int kind) {
  Tensor y = Tensor::Allocate(DataType::kFloat32, x.shape());
  const float* xd = x.data<float>();
  float* yd = y.data<float>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t i) { return o * len * inner + i * inner + in; };
      double mx = -1e300, sum = 0;
      int64_t arg = 0;
      for (int64_t i = 0; i < len; ++i) {
        if (xd[at(i)] > mx) {
          mx = xd[at(i)];
          arg = i;
        }
      }
      for (int64_t i = 0; i < len; ++i) sum += std::exp(xd[at(i)] - mx);
      for (int64_t i = 0; i < len; ++i) {
        const double v = xd[at(i)] - mx;
        yd[at(i)] = static_cast<float>(kind == 0 ? std::exp(v) / sum
                                       : kind == 1 ? v - std::log(sum)
                                                   : (i == arg ? 1.0 : 0.0));
      }
    }
  }
  return y;
}

TEST(NnSoftmax, Opset13SingleAxis) {
  Tensor x = RandomFloat({2, 3, 4}, -5, 5);
  const char* ops[] = {"Softmax", "LogSoftmax", "Hardmax"};
  for (int kind = 0; kind < 3; ++kind) {
    for (int64_t axis : {0, 1, 2, -1}) {
      SCOPED_TRACE(std::string(ops[kind]) + " axis " + std::to_string(axis));
      const int64_t a = axis < 0 ? axis + 3 : axis;
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < a; ++i) outer *= x.dim(i);
      for (int64_t i = a + 1; i < 3; ++i) inner *= x.dim(i);
      auto out = RunNode(ops[kind], {{"axis", AttrInt(axis)}}, {x}, 1, 13);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectTensorNear((*out)[0], Ref(x, outer, x.dim(a), inner, kind), 1e-5, 1e-5);
    }
  }
}

TEST(NnSoftmax, BeforeOpset13CoercesTo2d) {
  Tensor x = RandomFloat({2, 3, 4}, -5, 5);
  auto def = RunNode("Softmax", {}, {x}, 1, 11);  // axis 1: rows of 12
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  ExpectTensorNear((*def)[0], Ref(x, 2, 12, 1, 0), 1e-5, 1e-6);
  auto lsm = RunNode("LogSoftmax", {{"axis", AttrInt(2)}}, {x}, 1, 11);
  ASSERT_TRUE(lsm.ok());
  ExpectTensorNear((*lsm)[0], Ref(x, 6, 4, 1, 1), 1e-5, 1e-5);
  auto hm = RunNode("Hardmax", {{"axis", AttrInt(0)}}, {x}, 1, 11);
  ASSERT_TRUE(hm.ok());
  ExpectTensorNear((*hm)[0], Ref(x, 1, 24, 1, 2), 0, 0);
  // Default axis 13+ is -1.
  auto d13 = RunNode("Softmax", {}, {x}, 1, 13);
  ASSERT_TRUE(d13.ok());
  ExpectTensorNear((*d13)[0], Ref(x, 6, 4, 1, 0), 1e-5, 1e-6);
}

TEST(NnSoftmax, HardmaxTiesAndFloat64) {
  Tensor x = Tensor::FromVector<float>({1, 3, 3, 2}, {1, 4});
  auto out = RunNode("Hardmax", {}, {x}, 1);
  ASSERT_TRUE(out.ok());
  ExpectTensorNear((*out)[0], Tensor::FromVector<float>({0, 1, 0, 0}, {1, 4}), 0, 0);
  Tensor xd = Tensor::FromVector<double>({1000, 1001, 1002}, {1, 3});
  auto sm = RunNode("Softmax", {}, {xd}, 1);
  ASSERT_TRUE(sm.ok());
  const double e = std::exp(1.0), s = 1 + e + e * e;
  ExpectTensorNear((*sm)[0], Tensor::FromVector<double>({1 / s, e / s, e * e / s}, {1, 3}), 1e-12, 0);
}

TEST(NnSoftmax, BadInputs) {
  EXPECT_FALSE(RunNode("Softmax", {{"axis", AttrInt(3)}}, {RandomFloat({2, 3})}, 1).ok());
  EXPECT_FALSE(RunNode("LogSoftmax", {{"axis", AttrInt(-4)}}, {RandomFloat({2, 3, 4})}, 1).ok());
  EXPECT_FALSE(RunNode("Hardmax", {}, {Tensor::Scalar(1.f)}, 1).ok());
}

}  // namespace
}  // namespace inferd::cpu
