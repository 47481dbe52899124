// PanelGemm against a double-precision reference at shapes around its blocking (1..6-row tiles,
// 1/2/4-panel tiles, K blocks of 256, a partial last panel, the row split), with and without the
// bias/residual epilogue; and its batch invariance: a row computes bit for bit the same alone,
// among others, and on any thread count. MatMul/FusedMatMul through it: math/matmul_test.cc and
// the optimizer tests.
#include "kernels/cpu/util/panel_gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace inferd::cpu {
namespace panel_gemm_test {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Case {
  int64_t m, k, n;
};

// Runs PanelGemm and checks every element against the double sum (relative to the sum of
// |terms|, the scale of float32 rounding error).
void CheckCase(const Case& c, bool bias, bool residual) {
  SCOPED_TRACE(::testing::Message() << "m=" << c.m << " k=" << c.k << " n=" << c.n
                                    << " bias=" << bias << " residual=" << residual);
  const std::vector<float> a = Random(c.m * c.k, 1), b = Random(c.k * c.n, 2);
  const std::vector<float> bv = Random(c.n, 3), rv = Random(c.m * c.n, 4);
  PanelWeights w;
  w.Pack(b.data(), c.k, c.n);
  ASSERT_EQ(w.num_panels(), (c.n + 15) / 16);
  std::vector<float> y(c.m * c.n, NAN);
  PanelGemm(a.data(), c.m, w, y.data(),
            {bias ? bv.data() : nullptr, residual ? rv.data() : nullptr});
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t q = 0; q < c.k; ++q) {
        const double t = double(a[i * c.k + q]) * b[q * c.n + j];
        sum += t;
        mag += std::fabs(t);
      }
      if (bias) sum += bv[j], mag += std::fabs(bv[j]);
      if (residual) sum += rv[i * c.n + j], mag += std::fabs(rv[i * c.n + j]);
      ASSERT_NEAR(y[i * c.n + j], sum, 1e-5 * mag + 1e-6) << "at " << i << ", " << j;
    }
  }
}

TEST(PanelGemm, MatchesReference) {
  const std::vector<Case> cases = {
      {1, 1, 1},    {1, 7, 16},   {2, 16, 32},   {3, 5, 17},    {1, 300, 100}, {2, 257, 64},
      {4, 256, 48}, {5, 512, 15}, {6, 33, 80},   {7, 100, 33},  {12, 64, 64},  {13, 70, 70},
      {16, 768, 96}, {17, 40, 1}, {40, 520, 31}, {100, 64, 16}, {256, 24, 8},  {64, 33, 70},
  };
  for (const Case& c : cases) {
    for (int e = 0; e < 4; ++e) CheckCase(c, e & 1, e & 2);
  }
}

// Every decode-step batch size (2..32 rows: 1..6-row tiles, the next-K-block prefetch split
// between them) at K around the 256 block (one short block, one block and a short one, exact
// blocks) and N with and without a partial panel, including a last full panel whose prefetch
// reaches past the packed weights' end.
TEST(PanelGemm, DecodeBatchSizes) {
  for (int64_t m = 2; m <= 32; ++m) {
    for (const Case& c : {Case{m, 40, 32}, Case{m, 257, 48}, Case{m, 512, 20}}) {
      CheckCase(c, false, m % 2 == 0);
    }
  }
}

// Row i of a batch equals the same row computed alone, bit for bit, for every batch size and
// with 1 or 2 threads: the decode of a sequence does not depend on what else is in its step.
TEST(PanelGemm, RowsDoNotDependOnTheBatch) {
  const int64_t k = 600, n = 200, max_m = 20;
  const std::vector<float> a = Random(max_m * k, 5), b = Random(k * n, 6), bias = Random(n, 7);
  PanelWeights w;
  w.Pack(b.data(), k, n);
  std::vector<std::vector<float>> alone(max_m, std::vector<float>(n));
  for (int64_t i = 0; i < max_m; ++i) {
    PanelGemm(a.data() + i * k, 1, w, alone[i].data(), {bias.data(), nullptr});
  }
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (int64_t m = 1; m <= max_m; ++m) {
      std::vector<float> y(m * n);
      PanelGemm(a.data(), m, w, y.data(), {bias.data(), nullptr});
      for (int64_t i = 0; i < m; ++i) {
        ASSERT_EQ(std::memcmp(y.data() + i * n, alone[i].data(), n * sizeof(float)), 0)
            << "row " << i << " of " << m << ", " << threads << " threads";
      }
    }
  }
  omp_set_num_threads(saved);
}

// Many rows over few panels take the row split across threads: same results as one thread.
TEST(PanelGemm, RowSplitMatchesOneThread) {
  const int64_t m = 97, k = 300, n = 20;
  const std::vector<float> a = Random(m * k, 8), b = Random(k * n, 9);
  PanelWeights w;
  w.Pack(b.data(), k, n);
  std::vector<float> one(m * n), two(m * n);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  PanelGemm(a.data(), m, w, one.data());
  omp_set_num_threads(2);
  PanelGemm(a.data(), m, w, two.data());
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
  CheckCase({m, k, n}, false, true);
}

}  // namespace
}  // namespace panel_gemm_test
}  // namespace inferd::cpu
