#include "generation/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "generation/test_util.h"

namespace inferd::gen {
namespace {

SamplerOptions Opts(float temperature, int top_k = 0, float top_p = 1.0f) {
  SamplerOptions o;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  return o;
}

std::vector<float> LogProbs(std::vector<double> p, float shift = 3.0f) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)) + shift);
  return l;
}

std::map<int32_t, int> Histogram(Sampler& s, const std::vector<float>& logits, int n) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits).token];
  return counts;
}

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s(Opts(0), 1);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> logits = testing::FakeLogits(std::vector<int32_t>{i}, 500);
    EXPECT_EQ(s.Sample(logits).token, testing::ArgmaxOf(logits));
  }
  EXPECT_EQ(s.Sample(std::vector<float>{1, 3, 3, 2}).token, 1);
}

TEST(SamplerTest, SameSeedSameTokensOtherSeedOthers) {
  const std::vector<float> logits(64, 0.0f);  // uniform: every draw matters
  Sampler a(Opts(1.0f), 42), b(Opts(1.0f), 42), c(Opts(1.0f), 43);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 50; ++i) {
    ta.push_back(a.Sample(logits).token);
    tb.push_back(b.Sample(logits).token);
    tc.push_back(c.Sample(logits).token);
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(SamplerTest, DrawsInProportionToProbabilities) {
  Sampler s(Opts(1.0f), 7);
  auto counts = Histogram(s, LogProbs({0.5, 0.3, 0.2}), 20000);
  EXPECT_NEAR(counts[0] / 20000.0, 0.5, 0.02);
  EXPECT_NEAR(counts[1] / 20000.0, 0.3, 0.02);
  EXPECT_NEAR(counts[2] / 20000.0, 0.2, 0.02);
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  std::vector<float> logits = testing::FakeLogits(std::vector<int32_t>{5}, 100);
  std::vector<int32_t> order(100);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  for (float& l : logits) l *= 0.1f;  // flatter, so all top-k tokens show up
  Sampler s(Opts(1.0f, /*top_k=*/3), 9);
  auto counts = Histogram(s, logits, 3000);
  std::set<int32_t> seen;
  for (auto& [t, n] : counts) seen.insert(t);
  EXPECT_EQ(seen, (std::set<int32_t>{order[0], order[1], order[2]}));
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> logits = LogProbs({0.05, 0.5, 0.15, 0.3});
  auto support = [&](float top_p) {
    Sampler s(Opts(1.0f, 0, top_p), 11);
    std::set<int32_t> seen;
    for (auto& [t, n] : Histogram(s, logits, 3000)) seen.insert(t);
    return seen;
  };
  EXPECT_EQ(support(0.45f), (std::set<int32_t>{1}));
  EXPECT_EQ(support(0.75f), (std::set<int32_t>{1, 3}));
  EXPECT_EQ(support(0.9f), (std::set<int32_t>{1, 3, 2}));
  EXPECT_EQ(support(1.0f), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(SamplerTest, TopPNucleusInALargeVocabularyMatchesAFullSort) {
  // 5000 tokens with a flat-ish distribution: the nucleus is far larger than the first sorted
  // prefix the sampler tries.
  const std::vector<float> logits = testing::FakeLogits(std::vector<int32_t>{3}, 5000);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  double total = 0;
  for (float l : logits) total += std::exp(l);
  std::set<int32_t> nucleus;
  double cumulative = 0;
  for (int32_t t : order) {
    if (cumulative >= 0.5 * total) break;
    cumulative += std::exp(logits[t]);
    nucleus.insert(t);
  }
  ASSERT_GT(nucleus.size(), 256u);
  Sampler s(Opts(1.0f, 0, 0.5f), 17);
  auto counts = Histogram(s, logits, 4000);
  bool beyond_first_64 = false;
  for (auto& [t, n] : counts) {
    EXPECT_TRUE(nucleus.contains(t)) << t;
    beyond_first_64 |= std::find(order.begin(), order.begin() + 64, t) == order.begin() + 64;
  }
  EXPECT_TRUE(beyond_first_64);
}

TEST(SamplerTest, TopPAppliesAfterTopK) {
  // top-k 2 leaves {0.5, 0.3} -> renormalized {0.625, 0.375}: top_p 0.6 keeps only the first.
  Sampler s(Opts(1.0f, 2, 0.6f), 3);
  auto counts = Histogram(s, LogProbs({0.5, 0.3, 0.2}), 500);
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 0);
}

TEST(SamplerTest, LowTemperatureIsAlmostGreedyHighTemperatureFlattens) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f};
  Sampler cold(Opts(0.02f), 5);
  EXPECT_EQ(Histogram(cold, logits, 500)[0], 500);
  Sampler hot(Opts(100.0f), 5);
  auto counts = Histogram(hot, logits, 6000);
  for (int t = 0; t < 3; ++t) EXPECT_NEAR(counts[t] / 6000.0, 1.0 / 3, 0.03);
}

TEST(SamplerTest, FrequencyPenaltyGrowsWithCount) {
  SamplerOptions o = Opts(0);
  o.frequency_penalty = 0.4f;
  Sampler s(o, 1);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(s.Sample(std::vector<float>{2.0f, 1.0f}).token);
  // 2.0 -> 1.6 -> 1.2 -> 0.8 < 1.0
  EXPECT_EQ(got, (std::vector<int32_t>{0, 0, 0, 1}));
}

TEST(SamplerTest, PresencePenaltyIsPaidOnce) {
  SamplerOptions o = Opts(0);
  o.presence_penalty = 0.4f;
  Sampler s(o, 1);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(s.Sample(std::vector<float>{2.0f, 1.0f}).token);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 0, 0, 0}));  // 1.6 stays above 1.0
  o.presence_penalty = 1.5f;
  Sampler t(o, 1);
  got.clear();
  for (int i = 0; i < 3; ++i) got.push_back(t.Sample(std::vector<float>{2.0f, 1.0f}).token);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 0}));  // 0.5 < 1.0; then 0.5 > -0.5
}

TEST(SamplerTest, LogprobsOfRawLogitsWithTopAlternatives) {
  SamplerOptions o = Opts(0);
  o.logprobs = 2;
  o.frequency_penalty = 2.0f;  // penalties do not change the reported logprobs
  Sampler s(o, 1);
  const std::vector<float> logits = LogProbs({0.5, 0.3, 0.2});
  SampleResult r = s.Sample(logits);
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(0.5), 1e-5);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].first, 0);
  EXPECT_NEAR(r.top[0].second, std::log(0.5), 1e-5);
  EXPECT_EQ(r.top[1].first, 1);
  EXPECT_NEAR(r.top[1].second, std::log(0.3), 1e-5);
  r = s.Sample(logits);  // penalized: 0 now loses to 1
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.logprob, std::log(0.3), 1e-5);

  o.logprobs = 0;
  Sampler z(o, 1);
  r = z.Sample(logits);
  EXPECT_TRUE(r.top.empty());
  EXPECT_NEAR(r.logprob, std::log(0.5), 1e-5);
}

TEST(SamplerTest, UniformIsInUnitInterval) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const double u = Sampler::Uniform(rng);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace inferd::gen
