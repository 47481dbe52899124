#include "serving/model_stats.h"

#include <gtest/gtest.h>

namespace inferd::serving {
namespace {

TEST(ModelStatsTest, FailureReasonNamesAreTheMetricLabels) {
  EXPECT_STREQ(FailureReasonName(FailureReason::kInternal), "internal");
  EXPECT_STREQ(FailureReasonName(FailureReason::kInvalidInput), "invalid_argument");
  EXPECT_STREQ(FailureReasonName(FailureReason::kQueueFull), "queue_full");
  EXPECT_STREQ(FailureReasonName(FailureReason::kTimeout), "timeout");
  EXPECT_STREQ(FailureReasonName(FailureReason::kUnavailable), "unavailable");
  EXPECT_EQ(FailureReasonFromCode(StatusCode::kInvalidArgument), FailureReason::kInvalidInput);
  EXPECT_EQ(FailureReasonFromCode(StatusCode::kUnavailable), FailureReason::kUnavailable);
  EXPECT_EQ(FailureReasonFromCode(StatusCode::kNotFound), FailureReason::kInternal);
}

TEST(ModelStatsTest, RecordsAndSnapshots) {
  ModelStats stats;
  stats.AddPending(2);
  stats.RecordQueue(1000);
  stats.RecordSuccess(5000);
  stats.RecordFailure(FailureReason::kTimeout, 3000);
  stats.RecordRejected(FailureReason::kInvalidInput);
  const SteadyTime t0{};
  stats.RecordExecution(3, 2,
                        {t0, t0 + std::chrono::nanoseconds(10), t0 + std::chrono::nanoseconds(30),
                         t0 + std::chrono::nanoseconds(60)});
  const ModelStatisticsSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.pending, 2);
  EXPECT_EQ(s.queue.count, 1u);
  EXPECT_EQ(s.success.ns, 5000u);
  EXPECT_EQ(s.success_requests, 1u);
  EXPECT_EQ(s.fail.count, 2u);
  EXPECT_EQ(s.fail.ns, 3000u);
  EXPECT_EQ(s.failures.at(FailureReason::kTimeout), 1u);
  EXPECT_EQ(s.failures.at(FailureReason::kInvalidInput), 1u);
  EXPECT_EQ(s.request_us.count, 2u);  // a rejected request has no latency
  EXPECT_EQ(s.execution_count, 1u);
  EXPECT_EQ(s.inference_count, 3u);
  EXPECT_EQ(s.compute_infer.count, 2u);  // per request
  EXPECT_EQ(s.compute_infer.ns, 40u);
  ASSERT_EQ(s.batch_stats.size(), 1u);
  EXPECT_EQ(s.batch_stats[0].batch_size, 3);
  EXPECT_EQ(s.batch_stats[0].compute_output.ns, 30u);
  EXPECT_GT(s.last_inference_ms, 0u);
  EXPECT_EQ(s.busy_ns, 60u);  // the batch's whole span, once (not per request)
}

TEST(ModelStatsTest, InstancesAndScaleEvents) {
  ModelStats stats;
  stats.set_instances(3);
  stats.RecordScaleEvent(true);
  stats.RecordScaleEvent(true);
  stats.RecordScaleEvent(false);
  const ModelStatisticsSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.instances, 3);
  EXPECT_EQ(s.scale_ups, 2u);
  EXPECT_EQ(s.scale_downs, 1u);
}

TEST(ModelStatsTest, PausedRecordsNothingButPending) {
  ModelStats stats;
  stats.set_paused(true);
  stats.AddPending(1);
  stats.RecordSuccess(1);
  stats.RecordFailure(FailureReason::kInternal, 1);
  stats.RecordQueue(1);
  stats.set_paused(false);
  const ModelStatisticsSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.pending, 1);
  EXPECT_EQ(s.success.count + s.fail.count + s.queue.count, 0u);
  EXPECT_TRUE(s.failures.empty());
}

}  // namespace
}  // namespace inferd::serving
