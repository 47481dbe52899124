// ai.inferd.MoE against a naive reference (every token through its experts in double, one at a
// time), the expert counts, batch independence, and every bad attribute or weight.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "session/test_util.h"

namespace inferd {
namespace moe_test {  // unity builds: moe_test.cc and moe_nbits_test.cc share a TU
namespace {

using testing::AttrInt;
using testing::RandomFloat;

struct MoeCase {
  int64_t h, n, e;  // hidden, expert width, experts
};

struct MoeInputs {
  Tensor router, gate, up, down;
};

MoeInputs RandomWeights(const MoeCase& c, uint32_t seed) {
  return {RandomFloat({c.h, c.e}, -1.f, 1.f, seed), RandomFloat({c.e, c.h, c.n}, -0.3f, 0.3f, seed + 1),
          RandomFloat({c.e, c.h, c.n}, -0.3f, 0.3f, seed + 2),
          RandomFloat({c.e, c.n, c.h}, -0.3f, 0.3f, seed + 3)};
}

// The block for one token, in double: softmax, top k (ties: lower index), renormalized.
std::vector<double> ReferenceToken(const float* x, const MoeCase& c, const MoeInputs& w, int k,
                                   bool normalize, std::vector<int64_t>* counts) {
  std::vector<double> logit(c.e, 0.0);
  for (int64_t e = 0; e < c.e; ++e) {
    for (int64_t i = 0; i < c.h; ++i) logit[e] += double{x[i]} * w.router.data<float>()[i * c.e + e];
  }
  const double m = *std::max_element(logit.begin(), logit.end());
  double sum = 0;
  for (double& l : logit) sum += l = std::exp(l - m);
  std::vector<std::pair<double, int64_t>> ranked;
  for (int64_t e = 0; e < c.e; ++e) ranked.push_back({-logit[e] / sum, e});
  std::stable_sort(ranked.begin(), ranked.end());
  double top = 0;
  for (int j = 0; j < k; ++j) top -= ranked[j].first;
  std::vector<double> y(c.h, 0.0);
  for (int j = 0; j < k; ++j) {
    const int64_t e = ranked[j].second;
    ++(*counts)[e];
    const double wt = -ranked[j].first / (normalize ? top : 1.0);
    std::vector<double> act(c.n);
    for (int64_t f = 0; f < c.n; ++f) {
      double g = 0, u = 0;
      for (int64_t i = 0; i < c.h; ++i) {
        g += double{x[i]} * w.gate.data<float>()[(e * c.h + i) * c.n + f];
        u += double{x[i]} * w.up.data<float>()[(e * c.h + i) * c.n + f];
      }
      act[f] = g / (1 + std::exp(-g)) * u;
    }
    for (int64_t o = 0; o < c.h; ++o) {
      double s = 0;
      for (int64_t f = 0; f < c.n; ++f) s += act[f] * w.down.data<float>()[(e * c.n + f) * c.h + o];
      y[o] += wt * s;
    }
  }
  return y;
}

StatusOr<std::vector<Tensor>> RunMoe(const Tensor& x, const MoeInputs& w, int64_t top_k,
                                     int64_t normalize = 1, size_t outputs = 2) {
  return testing::RunNode("MoE", {{"top_k", AttrInt(top_k)}, {"normalize", AttrInt(normalize)}},
                          {x, w.router, w.gate, w.up, w.down}, outputs, 17, {1, 2, 3, 4},
                          "ai.inferd");
}

void CheckAgainstReference(const MoeCase& c, const Shape& x_shape, int k, bool normalize) {
  const MoeInputs w = RandomWeights(c, 7);
  const Tensor x = RandomFloat(x_shape, -1.f, 1.f, 3);
  auto out = RunMoe(x, w, k, normalize ? 1 : 0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].shape(), x_shape);
  const int64_t t = x.NumElements() / c.h;
  std::vector<int64_t> counts(c.e, 0);
  for (int64_t tok = 0; tok < t; ++tok) {
    const std::vector<double> want =
        ReferenceToken(x.data<float>() + tok * c.h, c, w, k, normalize, &counts);
    for (int64_t o = 0; o < c.h; ++o) {
      const double got = (*out)[0].data<float>()[tok * c.h + o];
      ASSERT_NEAR(got, want[o], 1e-5 + 1e-4 * std::fabs(want[o]))
          << "token " << tok << " column " << o << " (h " << c.h << ", n " << c.n << ", e " << c.e
          << ", k " << k << ")";
    }
  }
  ASSERT_EQ((*out)[1].dtype(), DataType::kInt64);
  ASSERT_EQ((*out)[1].shape(), (Shape{c.e}));
  for (int64_t e = 0; e < c.e; ++e) EXPECT_EQ((*out)[1].data<int64_t>()[e], counts[e]) << e;
}

TEST(MoE, MatchesTheNaiveReference) {
  // Widths that are and are not multiples of the 16-column panels; 1 to 37 tokens.
  for (const MoeCase c : {MoeCase{32, 48, 8}, MoeCase{40, 24, 8}, MoeCase{20, 9, 4}}) {
    for (int64_t t : {1, 3, 37}) {
      CheckAgainstReference(c, {1, t, c.h}, 2, true);
    }
  }
  CheckAgainstReference({40, 24, 8}, {2, 5, 40}, 2, false);  // not renormalized, rank 3, B = 2
  CheckAgainstReference({40, 24, 8}, {6, 40}, 1, true);      // top-1: weight 1
  CheckAgainstReference({24, 16, 3}, {9, 24}, 3, true);      // every expert
}

TEST(MoE, CountsAddUpToTokensTimesTopK) {
  const MoeCase c{32, 16, 8};
  auto out = RunMoe(RandomFloat({1, 50, 32}, -1.f, 1.f, 11), RandomWeights(c, 5), 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  int64_t total = 0, used = 0;
  for (int64_t e = 0; e < 8; ++e) {
    total += (*out)[1].data<int64_t>()[e];
    used += (*out)[1].data<int64_t>()[e] > 0;
  }
  EXPECT_EQ(total, 100);
  EXPECT_GT(used, 2) << "random routing should spread 50 tokens over more than 2 experts";
}

// A token's output is bit-identical alone, among 20 (a decode-sized step: small parts on the
// calling thread) or among 100 (every phase parallel): the batch changes only how many rows each
// expert's products have.
TEST(MoE, ATokenDoesNotDependOnTheBatch) {
  const MoeCase c{48, 40, 8};
  const MoeInputs w = RandomWeights(c, 9);
  const Tensor batch = RandomFloat({1, 100, c.h}, -1.f, 1.f, 4);
  auto all = RunMoe(batch, w, 2, 1, 1);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  Tensor twenty = Tensor::Allocate(DataType::kFloat32, {1, 20, c.h});
  std::copy_n(batch.data<float>(), 20 * c.h, twenty.data<float>());
  auto some = RunMoe(twenty, w, 2, 1, 1);
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  for (int64_t o = 0; o < 20 * c.h; ++o) {
    ASSERT_EQ((*some)[0].data<float>()[o], (*all)[0].data<float>()[o]) << o;
  }
  for (int64_t tok : {0, 7, 19, 99}) {
    Tensor one = Tensor::Allocate(DataType::kFloat32, {1, 1, c.h});
    std::copy_n(batch.data<float>() + tok * c.h, c.h, one.data<float>());
    auto alone = RunMoe(one, w, 2, 1, 1);
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    for (int64_t o = 0; o < c.h; ++o) {
      ASSERT_EQ((*alone)[0].data<float>()[o], (*all)[0].data<float>()[tok * c.h + o]) << tok;
    }
  }
}

void ExpectFails(const StatusOr<std::vector<Tensor>>& r, const std::string& reason) {
  ASSERT_FALSE(r.ok()) << "expected a failure naming: " << reason;
  EXPECT_NE(r.status().message().find(reason), std::string::npos) << r.status().ToString();
}

TEST(MoE, BadAttributesAndWeightsFailTheLoadWithTheReason) {
  const MoeCase c{16, 8, 4};
  const MoeInputs w = RandomWeights(c, 1);
  const Tensor x = RandomFloat({1, 2, 16});
  ExpectFails(RunMoe(x, w, 5), "top_k 5 outside 1..4");
  ExpectFails(RunMoe(x, w, 0), "top_k 0 outside 1..4");
  ExpectFails(RunMoe(x, w, 2, 2), "normalize must be 0 or 1");
  MoeInputs bad = w;
  bad.up = RandomFloat({4, 16, 9});
  ExpectFails(RunMoe(x, bad, 2), "up must be float32 [4, 16, 8]");
  bad = w;
  bad.down = RandomFloat({3, 8, 16});
  ExpectFails(RunMoe(x, bad, 2), "down must be float32 [4, 8, 16]");
  bad = w;
  bad.router = RandomFloat({16});
  ExpectFails(RunMoe(x, bad, 2), "router must be a constant [H, E]");
  // Weights fed at run time instead of initializers.
  ExpectFails(testing::RunNode("MoE", {{"top_k", AttrInt(2)}}, {x, w.router, w.gate, w.up, w.down},
                               1, 17, {1, 2, 3}, "ai.inferd"),
              "down (input 4) must be an initializer");
  // X of the wrong width: the run fails, not the load.
  ExpectFails(RunMoe(RandomFloat({1, 2, 15}), w, 2), "X must be float32 [..., 16]");
}

TEST(MoE, NonFiniteInputsPropagateWithoutCrashing) {
  const MoeCase c{16, 8, 4};
  Tensor x = RandomFloat({1, 3, 16});
  x.data<float>()[16 + 5] = std::nanf("");
  auto out = RunMoe(x, RandomWeights(c, 2), 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::isnan((*out)[0].data<float>()[16]));  // token 1: NaN everywhere
  EXPECT_FALSE(std::isnan((*out)[0].data<float>()[0]));  // token 0 untouched
  int64_t total = 0;
  for (int64_t e = 0; e < 4; ++e) total += (*out)[1].data<int64_t>()[e];
  EXPECT_EQ(total, 6);  // the NaN token still goes to 2 distinct experts
}

}  // namespace
}  // namespace moe_test
}  // namespace inferd
