// GemmWeights: one copy of a constant weight, plain or panels, and the by-rows switch; the path
// setting. The kernels on each path: math/matmul_test.cc and fused/matmul_test.cc.
#include "kernels/cpu/onednn/gemm_weights.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/onednn/dnnl_util.h"
#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::RandomFloat;

using ScopedGemmPath = ScopedGemmPathForTesting;

constexpr int64_t kK = 40, kN = 50;
constexpr int64_t kBytes = kK * kN * 4;
constexpr int64_t kPanelBytes = kK * 64 * 4;  // 4 panels of 16 columns, the last one padded

GemmWeights::Totals Delta(const GemmWeights::Totals& before) {
  const GemmWeights::Totals now = GemmWeights::LiveTotals();
  return {now.plain_bytes - before.plain_bytes, now.panel_bytes - before.panel_bytes};
}

// The panels hold B's values: column j of B is column j % 16 of panel j / 16.
void ExpectPanelsHold(const PanelWeights& p, const Tensor& b) {
  ASSERT_EQ(p.k(), kK);
  ASSERT_EQ(p.n(), kN);
  for (int64_t k = 0; k < kK; ++k) {
    for (int64_t j = 0; j < kN; ++j) {
      ASSERT_EQ(p.panel(j / 16)[k * 16 + j % 16], b.data<float>()[k * kN + j]) << k << ", " << j;
    }
  }
}

TEST(GemmWeights, ByRowsRunsPlainUntilSmallCallsOutnumberLargeOnes) {
  const Tensor b = RandomFloat({kK, kN}, -1, 1, 1);
  const GemmWeights::Totals before = GemmWeights::LiveTotals();
  {
    GemmWeights w;
    w.Reset(b, GemmWeights::Policy::kByRows);
    const int64_t small = PanelGemmMaxRows(kK, kN), large = small + 1;
    GemmWeights::Layout l = w.ForRows(large);
    EXPECT_FALSE(l.panel);
    // The initializer's buffer itself: no copy.
    EXPECT_EQ(l.plain.raw_data(), b.raw_data());
    EXPECT_EQ(Delta(before).plain_bytes, kBytes);
    EXPECT_EQ(Delta(before).panel_bytes, 0);
    l = w.ForRows(small);  // one small against one large: still plain
    EXPECT_FALSE(l.panel);
    EXPECT_TRUE(l.plain.defined());
    l = w.ForRows(1);  // two against one: panels, and the plain copy is dropped
    ASSERT_TRUE(l.panel);
    EXPECT_FALSE(l.plain.defined());
    ExpectPanelsHold(*l.panel, b);
    EXPECT_EQ(Delta(before).plain_bytes, 0);
    EXPECT_EQ(Delta(before).panel_bytes, kPanelBytes);
    // Sticky: large calls run on the panels from now on.
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(w.ForRows(large * 10).panel);
  }
  EXPECT_EQ(Delta(before).plain_bytes, 0);
  EXPECT_EQ(Delta(before).panel_bytes, 0);
}

TEST(GemmWeights, ByRowsPacksAtAFirstSmallCall) {
  GemmWeights w;
  w.Reset(RandomFloat({kK, kN}, -1, 1, 2), GemmWeights::Policy::kByRows);
  EXPECT_TRUE(w.ForRows(1).panel);
}

TEST(GemmWeights, PanelPolicyPacksAtReset) {
  const Tensor b = RandomFloat({kK, kN}, -1, 1, 3);
  const GemmWeights::Totals before = GemmWeights::LiveTotals();
  GemmWeights w;
  w.Reset(b, GemmWeights::Policy::kPanel);
  EXPECT_EQ(Delta(before).plain_bytes, 0);
  EXPECT_EQ(Delta(before).panel_bytes, kPanelBytes);
  const GemmWeights::Layout l = w.ForRows(1000);
  ASSERT_TRUE(l.panel);
  ExpectPanelsHold(*l.panel, b);
}

TEST(GemmWeights, PlainPolicyNeverPacks) {
  GemmWeights w;
  w.Reset(RandomFloat({kK, kN}, -1, 1, 4), GemmWeights::Policy::kPlain);
  for (int i = 0; i < 5; ++i) {
    const GemmWeights::Layout l = w.ForRows(1);
    EXPECT_FALSE(l.panel);
    EXPECT_TRUE(l.plain.defined());
  }
}

// A view (not owned) is copied, so the weights outlive the caller's buffer.
TEST(GemmWeights, ViewIsCopied) {
  std::vector<float> data(kK * kN, 0.25f);
  GemmWeights w;
  w.Reset(Tensor::View(DataType::kFloat32, {kK, kN}, data.data()), GemmWeights::Policy::kPlain);
  const GemmWeights::Layout l = w.ForRows(100);
  EXPECT_NE(l.plain.raw_data(), static_cast<const void*>(data.data()));
  EXPECT_EQ(std::memcmp(l.plain.raw_data(), data.data(), kBytes), 0);
}

// A layout handed out stays valid after another call switches the weights to panels.
TEST(GemmWeights, LayoutOutlivesTheSwitch) {
  const Tensor b = RandomFloat({kK, kN}, -1, 1, 5);
  GemmWeights w;
  w.Reset(b.Clone(), GemmWeights::Policy::kByRows);
  const GemmWeights::Layout plain = w.ForRows(1000);
  ASSERT_TRUE(w.ForRows(1).panel == nullptr);
  ASSERT_TRUE(w.ForRows(1).panel);
  ASSERT_TRUE(plain.plain.defined());
  EXPECT_EQ(std::memcmp(plain.plain.raw_data(), b.raw_data(), kBytes), 0);
}

TEST(GemmWeights, PathSettingChoosesThePolicy) {
  using Policy = GemmWeights::Policy;
  // 768 x 768: above kSmallPanelWeightElements, so the CPU alone decides under kAuto.
  constexpr int64_t k = 768, n = 768;
  static_assert(k * n > GemmWeights::kSmallPanelWeightElements);
  {
    ScopedGemmPath path(GemmPath::kPanel);
    EXPECT_EQ(GemmWeights::ChooseFor(false, k, n), Policy::kPanel);
    EXPECT_EQ(GemmWeights::ChooseFor(true, k, n), Policy::kPanel);
    EXPECT_EQ(GemmWeights::ChooseFor(true, 64, 64), Policy::kPanel);
  }
  {
    ScopedGemmPath path(GemmPath::kOneDnn);
    EXPECT_EQ(GemmWeights::ChooseFor(false, k, n), Policy::kPlain);
    EXPECT_EQ(GemmWeights::ChooseFor(true, k, n), Policy::kPlain);
    EXPECT_EQ(GemmWeights::ChooseFor(true, 64, 64), Policy::kPlain);  // forced: any size
  }
  {
    ScopedGemmPath path(GemmPath::kByRows);
    EXPECT_EQ(GemmWeights::ChooseFor(false, k, n), Policy::kByRows);
    EXPECT_EQ(GemmWeights::ChooseFor(true, k, n), Policy::kPanel);  // batch invariant: one kernel
  }
  {
    ScopedGemmPath path(GemmPath::kAuto);
    if (PreferPanelGemm()) {
      EXPECT_EQ(GemmWeights::ChooseFor(false, k, n), Policy::kByRows);
      EXPECT_EQ(GemmWeights::ChooseFor(true, k, n), Policy::kPanel);
    } else {  // oneDNN's own packed layout (PackedWeights)
      EXPECT_EQ(GemmWeights::ChooseFor(false, k, n), std::nullopt);
      EXPECT_EQ(GemmWeights::ChooseFor(true, k, n), std::nullopt);
    }
  }
}

// AVX-512 CPUs: a decoder's (batch-invariant session's) small weights take PanelGemm, where
// oneDNN's fixed cost per call dominates; large ones and other sessions keep oneDNN's layout.
TEST(GemmWeights, SmallDecoderWeightsTakePanelsOnEveryCpu) {
  using Policy = GemmWeights::Policy;
#if !(defined(__AVX2__) && defined(__FMA__))
  GTEST_SKIP() << "a build without AVX2 + FMA keeps oneDNN for every weight";
#endif
  ScopedGemmPath path(GemmPath::kAuto);
  constexpr int64_t limit = GemmWeights::kSmallPanelWeightElements;
  EXPECT_EQ(GemmWeights::ChooseFor(true, 192, 2048), Policy::kPanel);  // tiny-llama's head
  EXPECT_EQ(GemmWeights::ChooseFor(true, 64, 128), Policy::kPanel);
  EXPECT_EQ(GemmWeights::ChooseFor(true, 1, limit), Policy::kPanel);  // exactly the limit
  if (PreferPanelGemm()) return;  // every decoder weight is on panels there anyway
  EXPECT_EQ(GemmWeights::ChooseFor(true, 2, limit / 2 + 1), std::nullopt);  // just above
  EXPECT_EQ(GemmWeights::ChooseFor(true, 768, 32000), std::nullopt);
  EXPECT_EQ(GemmWeights::ChooseFor(false, 192, 2048), std::nullopt);  // not a decoder
}

}  // namespace
}  // namespace inferd::cpu
