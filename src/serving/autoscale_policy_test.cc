#include "serving/autoscale_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/mutex.h"
#include "serving/autoscaler.h"
#include "serving/model_config.h"
#include "testing/fake_clock.h"

namespace inferd::serving {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Short windows so a test covers a few minutes of load in a few hundred samples.
AutoscaleOptions StepOptions() {
  AutoscaleOptions o;
  o.min_instances = 1;
  o.max_instances = 4;
  o.scale_up_window = seconds(5);
  o.scale_down_window = seconds(10);
  o.cooldown = seconds(5);
  o.sample_period = seconds(1);
  return o;
}

// A model whose requests each take 25 ms of one instance: `qps` offered requests per second keep
// min(1, qps × 0.025 / n) of n instances busy (the excess queues; the rate finished is capped).
struct SimulatedModel {
  static constexpr double kServiceSeconds = 0.025;
  uint64_t busy_ns = 0;
  uint64_t requests = 0;
  // One second of load at `qps` with `instances` instances.
  void RunOneSecond(double qps, int instances) {
    const double served = std::min(qps, instances / kServiceSeconds);
    busy_ns += static_cast<uint64_t>(std::llround(served * kServiceSeconds * 1e9));
    requests += static_cast<uint64_t>(std::llround(served));
  }
};

// The load trace of the issue: 1 QPS for 20 s, 60 QPS for 40 s, then nothing for 60 s.
double StepLoad(int second) { return second < 20 ? 1 : second < 60 ? 60 : 0; }

Status Validate(AutoscaleOptions o) { return ValidateAutoscaleOptions(o); }

TEST(AutoscalePolicyTest, RejectsBadOptionsNamingTheField) {
  AutoscaleOptions o = StepOptions();
  EXPECT_TRUE(Validate(o).ok());
  o.min_instances = 5;  // > max 4
  EXPECT_EQ(Validate(o).message(), "autoscaling.max_instances 4 is below min_instances 5");
  o = StepOptions();
  o.min_instances = 0;
  EXPECT_EQ(Validate(o).message(), "autoscaling.min_instances must be >= 1, got 0");
  o = StepOptions();
  o.max_instances = 1000;
  EXPECT_EQ(Validate(o).message(), "autoscaling.max_instances 1000 exceeds the limit 256");
  for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
    o = StepOptions();
    o.scale_up_utilization = bad;
    EXPECT_EQ(Validate(o).code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(Validate(o).message().find("scale_up_utilization"), std::string::npos);
  }
  for (double bad : {-1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    o = StepOptions();
    o.scale_down_qps = bad;
    EXPECT_NE(Validate(o).message().find("scale_down_qps"), std::string::npos) << bad;
  }
  o = StepOptions();
  o.hysteresis = 0.7;  // not below the up threshold
  EXPECT_NE(Validate(o).message().find("hysteresis"), std::string::npos);
  o = StepOptions();
  o.scale_up_window = milliseconds(0);
  EXPECT_NE(Validate(o).message().find("scale_up_window_ms"), std::string::npos);
  o = StepOptions();
  o.sample_period = seconds(6);  // longer than the 5 s up window
  EXPECT_NE(Validate(o).message().find("sample_period_ms 6000 is longer than a window"),
            std::string::npos);
  EXPECT_EQ(AutoscalePolicy::Create(StepOptions(), 5).status().message(),
            "the starting instance count 5 is outside autoscaling's [1, 4]");
}

// The acceptance case, on fake time: a step from 1 to 60 QPS raises the instances within
// the up window (plus one sample period) and lowers them to min after the load stops.
TEST(AutoscalePolicyTest, LoadStepRaisesThenLowersInstances) {
  auto policy = AutoscalePolicy::Create(StepOptions(), 1);
  ASSERT_TRUE(policy.ok());
  FakeClock clock;
  const Clock::TimePoint t0 = clock.Now();
  SimulatedModel model;
  std::vector<int> count_at;  // instances after each second's sample
  std::vector<std::pair<int, ScaleDirection>> events;
  policy->Observe({clock.Now(), 0, 0});
  for (int sec = 0; sec < 120; ++sec) {
    model.RunOneSecond(StepLoad(sec), policy->instances());
    clock.Advance(seconds(1));
    const ScaleDecision d = policy->Observe({clock.Now(), model.busy_ns, model.requests});
    if (d.direction != ScaleDirection::kNone) events.push_back({sec + 1, d.direction});
    count_at.push_back(d.instances);
  }
  ASSERT_EQ(clock.Now() - t0, seconds(120));
  // 1 QPS: at min, nothing moves (below 5 QPS, but already at min_instances).
  for (int sec = 0; sec < 20; ++sec) EXPECT_EQ(count_at[sec], 1) << sec;
  // 60 QPS × 25 ms = 1.5 instances of work. One instance: 100% busy for the 5 s window → 2 at
  // 25 s. Two: 75% > 70% for another window (and the cool-down) → 3 at 30 s. Three: 50%, stays.
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0], std::make_pair(25, ScaleDirection::kUp));
  EXPECT_EQ(events[1], std::make_pair(30, ScaleDirection::kUp));
  EXPECT_EQ(*std::max_element(count_at.begin(), count_at.end()), 3);
  for (int sec = 30; sec < 60; ++sec) EXPECT_EQ(count_at[sec], 3) << sec;
  // Load stops at 60 s: 0 QPS < 5 for the 10 s down window → 2 at 70 s, 1 at 80 s, then min.
  EXPECT_EQ(events[2], std::make_pair(70, ScaleDirection::kDown));
  EXPECT_EQ(events[3], std::make_pair(80, ScaleDirection::kDown));
  EXPECT_EQ(events.size(), 4u);
  EXPECT_EQ(count_at.back(), 1);
}

TEST(AutoscalePolicyTest, HysteresisKeepsAnInstanceThatWouldBeNeededAgain) {
  // 4 QPS of a heavy model (150 ms each = 0.6 instances of work) on 2 instances: 30% busy, and
  // below 5 QPS. Removing one would leave 60% > 0.7 - 0.2: it stays at 2.
  AutoscaleOptions o = StepOptions();
  o.hysteresis = 0.2;
  auto policy = AutoscalePolicy::Create(o, 2);
  ASSERT_TRUE(policy.ok());
  FakeClock clock;
  uint64_t busy = 0, requests = 0;
  policy->Observe({clock.Now(), busy, requests});
  for (int sec = 0; sec < 60; ++sec) {
    busy += 600'000'000;
    requests += 4;
    clock.Advance(seconds(1));
    EXPECT_EQ(policy->Observe({clock.Now(), busy, requests}).instances, 2) << sec;
  }
  // Without the band the same load removes it (60% < 70%).
  o.hysteresis = 0;
  policy = AutoscalePolicy::Create(o, 2);
  ASSERT_TRUE(policy.ok());
  policy->Observe({clock.Now(), busy, requests});
  int last = 2;
  for (int sec = 0; sec < 20; ++sec) {
    busy += 600'000'000;
    requests += 4;
    clock.Advance(seconds(1));
    last = policy->Observe({clock.Now(), busy, requests}).instances;
  }
  EXPECT_EQ(last, 1);
}

TEST(AutoscalePolicyTest, ConditionMustHoldForTheWholeWindow) {
  auto policy = AutoscalePolicy::Create(StepOptions(), 1);
  ASSERT_TRUE(policy.ok());
  FakeClock clock;
  uint64_t busy = 0;
  policy->Observe({clock.Now(), busy, 0});
  // Busy 4 s out of every 5: the 5 s up window never holds.
  for (int sec = 0; sec < 50; ++sec) {
    if (sec % 5 != 4) busy += 1'000'000'000;
    clock.Advance(seconds(1));
    EXPECT_EQ(policy->Observe({clock.Now(), busy, 1000}).direction, ScaleDirection::kNone) << sec;
  }
}

TEST(AutoscalePolicyTest, CooldownSpacesEvents) {
  AutoscaleOptions o = StepOptions();
  o.scale_up_window = seconds(1);
  o.cooldown = seconds(10);
  auto policy = AutoscalePolicy::Create(o, 1);
  ASSERT_TRUE(policy.ok());
  FakeClock clock;
  uint64_t busy = 0;
  std::vector<int> up_at;
  policy->Observe({clock.Now(), 0, 0});
  for (int sec = 1; sec <= 30; ++sec) {
    busy += static_cast<uint64_t>(policy->instances()) * 1'000'000'000;  // always 100% busy
    clock.Advance(seconds(1));
    if (policy->Observe({clock.Now(), busy, 0}).direction == ScaleDirection::kUp) {
      up_at.push_back(sec);
    }
  }
  // First after the 1 s window, then one per 10 s cool-down: ceil(n × 1.0 / 0.7) = 2, 3, then
  // 5 capped at max 4.
  EXPECT_EQ(up_at, (std::vector<int>{1, 11, 21}));
  EXPECT_EQ(policy->instances(), 4);
}

TEST(AutoscalePolicyTest, IgnoresTimeGoingBackAndCounterResets) {
  auto policy = AutoscalePolicy::Create(StepOptions(), 2);
  ASSERT_TRUE(policy.ok());
  FakeClock clock;
  policy->Observe({clock.Now(), 5'000'000'000, 100});
  EXPECT_EQ(policy->Observe({clock.Now(), 9'000'000'000, 200}).utilization, 0);  // same time
  clock.Advance(seconds(1));
  const ScaleDecision d = policy->Observe({clock.Now(), 0, 0});  // counters went backwards
  EXPECT_EQ(d.utilization, 0);
  EXPECT_EQ(d.qps, 0);
}

// ---- config ----

StatusOr<std::optional<AutoscaleOptions>> FromText(const std::string& text) {
  auto c = ParseModelConfig(text, /*strict=*/true, nullptr);
  if (!c.ok()) return c.status();
  return AutoscaleOptionsFromConfig(*c);
}

TEST(AutoscaleConfigTest, DefaultsAndStartCount) {
  auto none = FromText("name: \"m\"");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto o = FromText("name: \"m\" inferd { autoscaling { max_instances: 3 } }");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_TRUE(o->has_value());
  EXPECT_EQ((*o)->min_instances, 1);
  EXPECT_EQ((*o)->max_instances, 3);
  EXPECT_DOUBLE_EQ((*o)->scale_up_utilization, 0.7);
  EXPECT_DOUBLE_EQ((*o)->scale_down_qps, 5);
  EXPECT_EQ((*o)->scale_up_window, seconds(30));
  EXPECT_EQ((*o)->sample_period, seconds(1));
  auto c = ParseModelConfig(
      "name: \"m\" instance_group [{ count: 2 }] inferd { autoscaling { min_instances: 1 "
      "max_instances: 3 scale_down_qps: 0 sample_period_ms: 100 scale_up_window_ms: 500 } }",
      true, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto set = AutoscaleOptionsFromConfig(*c);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_DOUBLE_EQ((*set)->scale_down_qps, 0);  // explicit 0: never scale down
  EXPECT_EQ((*set)->sample_period, milliseconds(100));
  EXPECT_EQ(AutoscaleStartCount(*c, **set), 2);
}

TEST(AutoscaleConfigTest, BadConfigsFailTheLoadWithTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"inferd { autoscaling { min_instances: 4 max_instances: 2 } }",
       "inferd.autoscaling.max_instances 2 is below min_instances 4"},
      {"inferd { autoscaling { max_instances: 0 } }",
       "inferd.autoscaling.max_instances 0 is below min_instances 1"},
      {"inferd { autoscaling { max_instances: 2 scale_up_utilization: 1.5 } }",
       "inferd.autoscaling.scale_up_utilization 1.5 is outside (0, 1]"},
      {"inferd { autoscaling { max_instances: 2 scale_down_qps: -3 } }",
       "inferd.autoscaling.scale_down_qps -3 must be a finite number >= 0"},
      {"inferd { autoscaling { max_instances: 2 cooldown_ms: -1 } }",
       "inferd.autoscaling.cooldown_ms -1 is outside [0, 86400000]"},
      {"inferd { autoscaling { max_instances: 2 scale_up_window_ms: 9000000000000 } }",
       "inferd.autoscaling.scale_up_window_ms 9000000000000 is outside [0, 86400000]"},
      {"instance_group [{ count: 5 }] inferd { autoscaling { max_instances: 4 } }",
       "instance_group count 5 is outside inferd.autoscaling's [min_instances 1, max_instances "
       "4]"},
      {"sequence_batching { } inferd { autoscaling { max_instances: 4 } }",
       "inferd.autoscaling is not supported with sequence_batching (its sequence slots are sized "
       "by the instance count)"},
  };
  for (const auto& [text, want] : cases) {
    auto o = FromText(std::string("name: \"m\" ") + text);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(o.status().message(), want) << text;
    // ValidateConfigStandalone (every load) refuses it too.
    auto c = ParseModelConfig(std::string("name: \"m\" ") + text, true, nullptr);
    if (c.ok()) {
      EXPECT_FALSE(ValidateConfigStandalone(*c).ok()) << text;
    }
  }
}

// ---- the Autoscaler thread on a FakeClock ----

// The load step through the Autoscaler's own thread: the test plays one second of simulated load,
// advances the clock one period and waits until the thread sleeps on its next sample time, so
// every sample sees exactly that second.
TEST(AutoscalerTest, ThreadSamplesEveryPeriodAndApplies) {
  FakeClock clock;
  const Clock::TimePoint t0 = clock.Now();
  Mutex mu;
  SimulatedModel model;                      // guarded by mu
  int instances = 1;                         // guarded by mu
  std::vector<std::pair<int, int>> applied;  // (second, instances), guarded by mu
  auto policy = AutoscalePolicy::Create(StepOptions(), 1);
  ASSERT_TRUE(policy.ok());
  {
    Autoscaler scaler(
        std::move(policy).value(), clock,
        [&] {
          MutexLock l(&mu);
          return LoadSample{Clock::TimePoint{}, model.busy_ns, model.requests};
        },
        [&](const ScaleDecision& d) {
          MutexLock l(&mu);
          instances = d.instances;
          applied.push_back(
              {static_cast<int>(std::chrono::duration_cast<seconds>(clock.Now() - t0).count()),
               d.instances});
        });
    clock.BlockUntilWaiting(t0 + seconds(1));  // baseline taken at t0
    for (int sec = 0; sec < 100; ++sec) {
      {
        MutexLock l(&mu);
        model.RunOneSecond(StepLoad(sec), instances);
      }
      const uint64_t mark = clock.WaitMark();
      clock.Advance(seconds(1));
      clock.BlockUntilWaiting(t0 + seconds(sec + 2), mark);
    }
  }  // joins the thread
  MutexLock l(&mu);
  EXPECT_EQ(applied, (std::vector<std::pair<int, int>>{{25, 2}, {30, 3}, {70, 2}, {80, 1}}));
}

}  // namespace
}  // namespace inferd::serving
