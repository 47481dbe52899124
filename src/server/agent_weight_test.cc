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

TEST(AgentWeightTest, SlowReplyNamesTheSpeed) {
  AgentInputs in = Ready(1.0, {});
  in.state = NodeState::kSlow;
  in.speed = 0.3;
  EXPECT_EQ(AgentReply(in), "drain#slow: 30% of its unloaded speed\n");
}

// One model "m/1" that has run `count` batches of size 1 taking `ns` in all.
std::vector<ModelSample> Batches(uint64_t count, uint64_t ns) {
  return {{"m/1", ns, 0, 1, 1, {{1, count, ns}}}};
}

TEST(AgentWeightTest, SamplerMeasuresSpeedAgainstTheUnloadedServiceTime) {
  LoadSampler s;
  s.Sample(milliseconds(0), Batches(0, 0));
  EXPECT_FALSE(s.speed_measured());
  EXPECT_EQ(s.speed(), 1.0);
  // 10 batches of 4 ms: the baseline; speed (1 + 1) / 2.
  s.Sample(milliseconds(100), Batches(10, 40'000'000));
  EXPECT_TRUE(s.speed_measured());
  EXPECT_DOUBLE_EQ(s.speed(), 1.0);
  // 10 batches of 16 ms: a quarter of the speed (the baseline creeps up by 0.1% of the gap).
  s.Sample(milliseconds(300), Batches(20, 200'000'000));
  const double t0 = 4e6 + LoadSampler::kBaselineCreep * 12e6;
  EXPECT_DOUBLE_EQ(s.speed(), (1.0 + t0 / 16e6) / 2);
  EXPECT_DOUBLE_EQ(s.excess_ns(), (0 + (16e6 - t0)) / 2);  // ns beyond the baseline per batch
  // Again: the average moves towards a quarter.
  const double before = s.speed();
  s.Sample(milliseconds(500), Batches(30, 360'000'000));
  EXPECT_LT(s.speed(), before);
  EXPECT_GT(s.speed(), 0.25);
  // Two batches only: too little evidence; the speed stays and the counters wait for more.
  const double kept = s.speed();
  s.Sample(milliseconds(600), Batches(32, 368'000'000));
  EXPECT_FALSE(s.speed_measured());
  EXPECT_EQ(s.speed(), kept);
  // The next window sees all 3 (4 ms each): the baseline drops to 4 ms; speed 1 averaged in.
  s.Sample(milliseconds(700), Batches(33, 372'000'000));
  EXPECT_TRUE(s.speed_measured());
  EXPECT_DOUBLE_EQ(s.speed(), (kept + 1.0) / 2);
}

TEST(AgentWeightTest, SpeedIsComparedPerBatchSizeAndPerVersion) {
  LoadSampler s;
  // Batches of 8 take longer than batches of 1 but are not a slowdown.
  auto both = [](uint64_t n1, uint64_t ns1, uint64_t n8, uint64_t ns8) {
    return std::vector<ModelSample>{{"m/1", 0, 0, 1, 1, {{1, n1, ns1}, {8, n8, ns8}}}};
  };
  s.Sample(milliseconds(0), both(0, 0, 0, 0));
  s.Sample(milliseconds(100), both(10, 10'000'000, 0, 0));            // 1 ms per batch of 1
  s.Sample(milliseconds(200), both(10, 10'000'000, 10, 50'000'000));  // 5 ms per batch of 8
  EXPECT_DOUBLE_EQ(s.speed(), 1.0);
  s.Sample(milliseconds(300), both(20, 20'000'000, 20, 100'000'000));  // same again, both sizes
  EXPECT_DOUBLE_EQ(s.speed(), 1.0);
  // A counter that went backwards (a new version under the same key) starts a new baseline.
  s.Sample(milliseconds(400), both(3, 30'000'000, 0, 0));
  EXPECT_FALSE(s.speed_measured());
  s.Sample(milliseconds(500), both(6, 60'000'000, 0, 0));  // 10 ms: its own baseline
  EXPECT_DOUBLE_EQ(s.speed(), 1.0);
}

constexpr double kSlowNs = 5e6;  // batches 5 ms slower than at the baseline

SlowNodePolicy Policy() {
  SlowNodePolicy p;
  p.shed_below = 0.5;
  p.serve_above = 0.7;
  p.first_probe = milliseconds(1000);
  p.max_probe = milliseconds(3000);
  p.idle_probe = milliseconds(2000);
  return p;
}

TEST(SlowNodeGuardTest, ShedsWhileSlowAndProbesWithBackoff) {
  SlowNodeGuard g(Policy());
  EXPECT_FALSE(g.Shedding(milliseconds(0), 0.9, kSlowNs, true));
  EXPECT_FALSE(
      g.Shedding(milliseconds(100), 0.6, kSlowNs, true));  // between the thresholds: serving
  EXPECT_TRUE(g.Shedding(milliseconds(200), 0.3, kSlowNs, true));     // slow: shed for 1 s
  EXPECT_TRUE(g.Shedding(milliseconds(700), 0.3, kSlowNs, false));    // no traffic, not yet time
  EXPECT_FALSE(g.Shedding(milliseconds(1200), 0.3, kSlowNs, false));  // probe: its weight again
  EXPECT_FALSE(
      g.Shedding(milliseconds(1300), 0.3, kSlowNs, false));  // waiting for the probe's traffic
  EXPECT_TRUE(g.Shedding(milliseconds(1400), 0.35, kSlowNs, true));  // still slow: shed for 2 s
  EXPECT_TRUE(g.Shedding(milliseconds(3300), 0.35, kSlowNs, false));
  EXPECT_FALSE(g.Shedding(milliseconds(3400), 0.35, kSlowNs, false));  // probe
  EXPECT_TRUE(g.Shedding(milliseconds(3500), 0.35, kSlowNs, true));    // shed for 3 s (the maximum)
  EXPECT_TRUE(g.Shedding(milliseconds(6400), 0.35, kSlowNs, false));
  EXPECT_FALSE(g.Shedding(milliseconds(6500), 0.35, kSlowNs, false));  // probe
  // Better but not yet fast: shed again (3 s).
  EXPECT_TRUE(g.Shedding(milliseconds(6600), 0.6, kSlowNs, true));
  EXPECT_FALSE(g.Shedding(milliseconds(9600), 0.6, kSlowNs, false));  // probe
  EXPECT_FALSE(g.Shedding(milliseconds(9700), 0.8, kSlowNs, true));   // fast once: probing on
  EXPECT_FALSE(g.Shedding(milliseconds(9800), 0.8, kSlowNs, true));   // twice: serving for good
  EXPECT_FALSE(g.Shedding(milliseconds(9900), 0.6, kSlowNs, true));   // serving: not slow
  // Slow again: the backoff starts over at 1 s.
  EXPECT_TRUE(g.Shedding(milliseconds(12000), 0.2, kSlowNs, true));
  EXPECT_FALSE(g.Shedding(milliseconds(13000), 0.2, kSlowNs, false));
}

TEST(SlowNodeGuardTest, TrafficThatStillArrivesDecidesWithoutAProbe) {
  SlowNodeGuard g(Policy());
  EXPECT_TRUE(g.Shedding(milliseconds(0), 0.3, kSlowNs, true));
  // Other proxies still send it requests: measured slow, the shedding goes on past its second.
  EXPECT_TRUE(g.Shedding(milliseconds(900), 0.3, kSlowNs, true));
  EXPECT_TRUE(g.Shedding(milliseconds(1500), 0.3, kSlowNs, false));
  EXPECT_FALSE(
      g.Shedding(milliseconds(1900), 0.3, kSlowNs, false));  // 1 s after the last slow window
  EXPECT_TRUE(g.Shedding(milliseconds(2000), 0.3, kSlowNs, true));  // the probe is slow: 2 s
  // Measured fast on that traffic twice in a row: serving without a probe.
  EXPECT_TRUE(g.Shedding(milliseconds(2500), 0.75, kSlowNs, true));
  EXPECT_FALSE(g.Shedding(milliseconds(2600), 0.75, kSlowNs, true));
}

TEST(SlowNodeGuardTest, AnIdleProbeEndsTheSheddingAndZeroTurnsItOff) {
  SlowNodeGuard g(Policy());
  EXPECT_TRUE(g.Shedding(milliseconds(0), 0.3, kSlowNs, true));
  EXPECT_FALSE(g.Shedding(milliseconds(1000), 0.3, kSlowNs, false));  // probe
  EXPECT_FALSE(g.Shedding(milliseconds(2900), 0.3, kSlowNs, false));
  EXPECT_FALSE(
      g.Shedding(milliseconds(3000), 0.3, kSlowNs, false));  // 2 s without traffic: serving
  EXPECT_TRUE(
      g.Shedding(milliseconds(3100), 0.3, kSlowNs, true));  // slow again: 1 s (backoff reset)
  EXPECT_FALSE(g.Shedding(milliseconds(4100), 0.3, kSlowNs, false));
  // A small model: 30% of its speed, but its batches only 0.2 ms slower (under min_excess).
  SlowNodeGuard small(Policy());
  EXPECT_FALSE(small.Shedding(milliseconds(0), 0.3, 2e5, true));
  EXPECT_TRUE(small.Shedding(milliseconds(100), 0.3, 1.5e6, true));
  EXPECT_TRUE(small.Shedding(milliseconds(200), 0.3, 4e5, true));   // under half once
  EXPECT_FALSE(small.Shedding(milliseconds(300), 0.3, 4e5, true));  // twice: serving
  SlowNodePolicy off = Policy();
  off.shed_below = 0;
  SlowNodeGuard never(off);
  EXPECT_FALSE(never.Shedding(milliseconds(0), 0.01, kSlowNs, true));
  EXPECT_FALSE(never.Shedding(milliseconds(100), 0.01, kSlowNs, true));
}

}  // namespace
}  // namespace inferd::server
