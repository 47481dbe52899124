#include "common/stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace inferd {
namespace {

TEST(Percentile, InterpolatesBetweenClosestRanks) {
  // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = [1, 1.75, 2.5, 3.7, 4].
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);  // the median of an even count
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
}

TEST(Percentile, OddCountMedianIsTheMiddleSample) {
  const std::vector<double> v = {10, 20, 30};
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 20);
}

TEST(Percentile, IntegersOneSampleEmptyAndClamping) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 50.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 99.01);
  EXPECT_DOUBLE_EQ(Percentile(v, 150), 100);  // p is clamped to [0, 100]
  EXPECT_DOUBLE_EQ(Percentile(v, -5), 1);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<int64_t>{7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<int64_t>{}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{}, 50), 0);
}

}  // namespace
}  // namespace inferd
