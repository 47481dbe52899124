#include "common/histogram.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace inferd {
namespace {

TEST(HistogramTest, BucketsSumCountAndPercentiles) {
  Histogram h({10, 20, 40});
  for (int i = 1; i <= 100; ++i) h.Record(i <= 90 ? 5 : 30);
  auto s = h.Snapshot();
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.sum, 90 * 5 + 10 * 30);
  EXPECT_EQ(s.CumulativeCount(0), 90u);
  EXPECT_EQ(s.CumulativeCount(1), 90u);
  EXPECT_EQ(s.CumulativeCount(2), 100u);
  EXPECT_EQ(s.CumulativeCount(3), 100u);
  EXPECT_LE(s.Percentile(50), 10);
  EXPECT_GT(s.Percentile(99), 20);
  EXPECT_LE(s.Percentile(99), 40);
  h.Record(1000);  // +Inf bucket reports the largest bound
  EXPECT_EQ(h.Snapshot().Percentile(100), 40);
  EXPECT_EQ(Histogram({}).Snapshot().Percentile(50), 0);
}

TEST(HistogramTest, ConcurrentRecording) {
  Histogram h(Histogram::ExponentialBounds(1, 2, 10));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) h.Record(i % 100);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(h.Snapshot().count, 40000u);
  EXPECT_EQ(h.Snapshot().CumulativeCount(10), 40000u);
}

}  // namespace
}  // namespace inferd
