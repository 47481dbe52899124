// The broadcast plan against an uncollapsed walk (BroadcastStrides over every output dim): both
// walkers (BroadcastIterator, ForEachSegment) must give every output element the same input
// offsets, for the fast-path patterns and for awkward shapes (size-1 and zero dims, Seek).
#include "kernels/cpu/util/broadcast.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace inferd::cpu {
namespace broadcast_test {
namespace {

// offsets[i][k]: input k's element offset for output element i, by a plain odometer over `out`.
std::vector<std::vector<int64_t>> NaiveOffsets(const Shape& out, const std::vector<Shape>& ins) {
  std::vector<std::vector<int64_t>> strides;
  for (const Shape& s : ins) strides.push_back(BroadcastStrides(s, out));
  const int64_t n = NumElements(out);
  std::vector<std::vector<int64_t>> offsets(n, std::vector<int64_t>(ins.size(), 0));
  std::vector<int64_t> index(out.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < ins.size(); ++k) {
      for (size_t d = 0; d < out.size(); ++d) offsets[i][k] += index[d] * strides[k][d];
    }
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      if (++index[d] < out[d]) break;
      index[d] = 0;
    }
  }
  return offsets;
}

struct Case {
  Shape a, b;
};

const std::vector<Case> kCases = {
    {{4, 5}, {4, 5}},       {{4, 5}, {}},           {{4, 5}, {5}},         {{2, 3, 6}, {3, 1}},
    {{2, 1, 3}, {1, 4, 1}}, {{1, 1}, {1}},          {{3, 1, 1, 2}, {2}},   {{2, 0, 3}, {3}},
    {{5}, {1, 5}},          {{2, 3, 4, 5}, {3, 1, 5}},
};

TEST(BroadcastTest, IteratorMatchesNaiveWalk) {
  for (const Case& c : kCases) {
    Shape out = *BroadcastShapes({c.a, c.b});
    auto want = NaiveOffsets(out, {c.a, c.b});
    BroadcastIterator it(PlanBroadcast(out, {c.a, c.b}));
    for (size_t i = 0; i < want.size(); ++i, it.Next()) {
      ASSERT_EQ(it.offset(0), want[i][0]) << ShapeToString(c.a) << " element " << i;
      ASSERT_EQ(it.offset(1), want[i][1]) << ShapeToString(c.b) << " element " << i;
    }
    for (size_t i = 0; i < want.size(); i += 3) {
      it.Seek(static_cast<int64_t>(i));
      EXPECT_EQ(it.offset(0), want[i][0]);
      EXPECT_EQ(it.offset(1), want[i][1]);
    }
  }
}

TEST(BroadcastTest, SegmentsMatchNaiveWalk) {
  for (const Case& c : kCases) {
    Shape out = *BroadcastShapes({c.a, c.b});
    auto want = NaiveOffsets(out, {c.a, c.b});
    BroadcastPlan plan = PlanBroadcast(out, {c.a, c.b});
    std::vector<std::vector<int64_t>> got(want.size(), std::vector<int64_t>(2, -1));
    // Grain 1: as many threads as there are, so segments also start inside rows.
    ForEachSegment<2>(plan, 1, [&](const std::array<int64_t, 2>& off, int64_t o, int64_t len) {
      for (int64_t i = 0; i < len; ++i) {
        for (size_t k = 0; k < 2; ++k) got[o + i][k] = off[k] + i * plan.strides[k].back();
      }
    });
    EXPECT_EQ(got, want) << ShapeToString(c.a) << " with " << ShapeToString(c.b);
  }
}

TEST(BroadcastTest, PlanCollapsesTheFastPathPatterns) {
  EXPECT_EQ(PlanBroadcast({4, 5}, {{4, 5}, {4, 5}}).dims, (Shape{20}));
  EXPECT_EQ(PlanBroadcast({4, 5}, {{4, 5}, {}}).strides[1], (std::vector<int64_t>{0}));
  EXPECT_EQ(PlanBroadcast({4, 5}, {{4, 5}, {5}}).dims, (Shape{4, 5}));
  EXPECT_EQ(PlanBroadcast({}, {{}, {}}).dims, (Shape{1}));
  EXPECT_FALSE(BroadcastShapes({{2, 3}, {4}}).ok());
}

}  // namespace
}  // namespace broadcast_test
}  // namespace inferd::cpu
