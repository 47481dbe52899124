#include "server/agent_weight.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace inferd::server {
namespace {

using std::chrono::milliseconds;

AgentInputs Ready(double capacity, std::vector<ModelLoad> models) {
  AgentInputs in;
  in.capacity = capacity;
  in.models = std::move(models);
  return in;
}

TEST(AgentWeightTest, IdleNodeGetsItsCapacity) {
  EXPECT_EQ(AgentWeightPercent(Ready(1.0, {})), 100);
  EXPECT_EQ(AgentWeightPercent(Ready(1.0, {{0, 0, 1}})), 100);
  EXPECT_EQ(AgentWeightPercent(Ready(0.5, {{0, 0, 4}})), 50);
  EXPECT_EQ(AgentReply(Ready(0.25, {})), "up ready 25%\n");
}

TEST(AgentWeightTest, BusyAndQueuedNodesGetLess) {
  // All instances busy: L = 1 -> 50%; one request waiting per instance: L = 2 -> 33%.
  EXPECT_DOUBLE_EQ(NodeLoad({{1.0, 0, 1}}), 1.0);
  EXPECT_EQ(AgentWeightPercent(Ready(1.0, {{1.0, 0, 1}})), 50);
  EXPECT_EQ(AgentWeightPercent(Ready(1.0, {{0.2, 4, 2}})), 33);
  // Half utilized over the window: 67%.
  EXPECT_EQ(AgentWeightPercent(Ready(1.0, {{0.5, 0, 1}})), 67);
  // A batch that runs longer than the window shows no busy time, but its request is pending.
  EXPECT_DOUBLE_EQ(NodeLoad({{0.0, 1, 2}}), 0.5);
  // The busiest model decides.
  EXPECT_DOUBLE_EQ(NodeLoad({{0.1, 0, 1}, {0.0, 7, 1}, {0.3, 0, 1}}), 7.0);
}

TEST(AgentWeightTest, FasterNodeGetsMoreAtTheSameLoad) {
  const std::vector<ModelLoad> load = {{0.6, 1, 1}};
  EXPECT_GT(AgentWeightPercent(Ready(1.0, load)), AgentWeightPercent(Ready(0.5, load)));
  EXPECT_EQ(AgentWeightPercent(Ready(0.5, load)), 25);
}

TEST(AgentWeightTest, MeasuredCpuShareScalesTheWeight) {
  AgentInputs in = Ready(1.0, {{1.0, 0, 1}});
  in.cpu_share = 0.5;  // a node under a 50% CPU quota, all busy: 100 * 0.5 / 2
  EXPECT_EQ(AgentWeightPercent(in), 25);
  in.cpu_share = 3.0;  // clamped
  EXPECT_EQ(AgentWeightPercent(in), 50);
  in.cpu_share = -1;
  EXPECT_EQ(AgentWeightPercent(in), 1);
}

TEST(AgentWeightTest, WeightStaysWithinOneToHundred) {
  EXPECT_EQ(AgentWeightPercent(Ready(1.0, {{1.0, 100000, 1}})), 1);
  EXPECT_EQ(AgentWeightPercent(Ready(0.0, {})), 1);
  EXPECT_EQ(AgentWeightPercent(Ready(-3, {})), 1);
  EXPECT_EQ(AgentWeightPercent(Ready(std::numeric_limits<double>::quiet_NaN(), {})), 1);
  EXPECT_EQ(AgentWeightPercent(Ready(7.0, {})), 100);
  // Garbage inputs are clamped, not trusted.
  EXPECT_EQ(AgentWeightPercent(Ready(1.0, {{5.0, -3, 0}})), 50);
}

TEST(AgentWeightTest, StateWords) {
  AgentInputs in = Ready(1.0, {{1.0, 5, 1}});
  in.state = NodeState::kDraining;
  EXPECT_EQ(AgentReply(in), "drain\n");
  in.state = NodeState::kNotReady;
  EXPECT_EQ(AgentReply(in), "down#not ready\n");
}

TEST(AgentWeightTest, SamplerComputesUtilizationBetweenSamples) {
  LoadSampler s;
  auto loads = s.Sample(milliseconds(1000), {{"a/1", 500'000'000, 2, 2}, {"b/1", 0, 0, 1}});
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[0].utilization, 0);  // first sight: no window yet
  EXPECT_EQ(loads[0].pending, 2);
  EXPECT_EQ(loads[0].instances, 2);
  // 1 s later: a/1 was busy 1 s over 2 instances (50%), b/1 250 ms (25%).
  loads = s.Sample(milliseconds(2000), {{"a/1", 1'500'000'000, 0, 2}, {"b/1", 250'000'000, 0, 1}});
  EXPECT_DOUBLE_EQ(loads[0].utilization, 0.5);
  EXPECT_DOUBLE_EQ(loads[1].utilization, 0.25);
  // More busy time than the window allows (clock skew between counters) is clamped; a counter
  // that went backwards (a reloaded version) counts as a first sight.
  loads = s.Sample(milliseconds(2100), {{"a/1", 9'000'000'000, 0, 2}, {"b/1", 10, 0, 1}});
  EXPECT_DOUBLE_EQ(loads[0].utilization, 1.0);
  EXPECT_DOUBLE_EQ(loads[1].utilization, 0.0);
  // Same instant twice: no window, no utilization.
  loads = s.Sample(milliseconds(2100), {{"a/1", 9'100'000'000, 0, 2}});
  EXPECT_DOUBLE_EQ(loads[0].utilization, 0.0);
}

TEST(AgentWeightTest, SamplerMeasuresCpuShareWhileBusy) {
  using std::chrono::nanoseconds;
  LoadSampler s;
  EXPECT_EQ(s.cpu_share(), 1.0);
  s.Sample(milliseconds(1000), {{"a/1", 0, 0, 1, 2}}, milliseconds(0));
  // 1 s window, the instance busy 800 ms with 2 threads (1.6 s of CPU at full speed), the
  // process used 0.4 s: a quarter.
  s.Sample(milliseconds(2000), {{"a/1", 800'000'000, 0, 1, 2}}, milliseconds(400));
  EXPECT_DOUBLE_EQ(s.cpu_share(), 0.25);
  // Next window at full speed (clamped to 1): averaged with the last value.
  s.Sample(milliseconds(3000), {{"a/1", 1'800'000'000, 0, 1, 2}}, milliseconds(2500));
  EXPECT_DOUBLE_EQ(s.cpu_share(), 0.625);
  // Idle (busy 10 ms of 1 s): too little evidence, the share stays.
  s.Sample(milliseconds(4000), {{"a/1", 1'810'000'000, 0, 1, 2}}, milliseconds(2501));
  EXPECT_DOUBLE_EQ(s.cpu_share(), 0.625);
  // Starved: floor 0.05, averaged.
  s.Sample(milliseconds(5000), {{"a/1", 2'810'000'000, 0, 1, 2}}, milliseconds(2501));
  EXPECT_DOUBLE_EQ(s.cpu_share(), (0.625 + 0.05) / 2);
}

}  // namespace
}  // namespace inferd::server
