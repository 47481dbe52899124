// AutoscalePolicy: decides a model version's instance count from its measured load, in-node
// (the Kubernetes HorizontalPodAutoscaler scales pods; this scales a model's instances inside one
// node). Pure: no threads, no clock reads. The caller (serving/autoscaler.h) samples the version's
// statistics every `sample_period` on the injected Clock and feeds them to Observe.
//
// Signals, computed over each sample period (between two consecutive samples):
//   utilization = Δ(instance busy time) / (Δt × instances): the share of the instances' time spent
//                 running batches (ModelStatisticsSnapshot::busy_ns), clamped to [0, 1];
//   request rate = Δ(requests finished) / Δt, in requests per second.
// Rules (an event is one change of the count):
//   up   when utilization > scale_up_utilization held for scale_up_window: to
//        ceil(n × utilization / scale_up_utilization), at least n + 1, at most max_instances;
//   down when request rate < scale_down_qps held for scale_down_window, by one instance, and only
//        if the remaining n - 1 instances would stay below the up threshold by `hysteresis`
//        (utilization × n / (n - 1) < scale_up_utilization - hysteresis), so a removal does not
//        trigger the next addition;
//   cool-down: no event within `cooldown` of the previous one. "Held" means every
//        sample period since the condition started satisfied it; an event restarts both holds, so
//        the next event is measured with the new count.
// Up wins when both rules hold. The count always stays in [min_instances, max_instances].
//
// Example (a load step, sample period 1 s, windows 5 s, cool-down 5 s):
//   ASSIGN_OR_RETURN(auto policy, AutoscalePolicy::Create(options, /*initial_instances=*/1));
//   policy.Observe({t, busy_ns, requests});  // every second; .instances is the count to run
//
// Not thread-safe: one caller (the autoscaler thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace inferd::serving {

struct AutoscaleOptions {
  int min_instances = 1;                                // >= 1
  int max_instances = 1;                                // >= min_instances, <= 256 (kMaxInstances)
  double scale_up_utilization = 0.7;                    // (0, 1]
  double scale_down_qps = 5.0;                          // >= 0, finite
  double hysteresis = 0.1;                              // [0, scale_up_utilization)
  std::chrono::milliseconds scale_up_window{30'000};    // > 0
  std::chrono::milliseconds scale_down_window{60'000};  // > 0
  std::chrono::milliseconds cooldown{30'000};           // >= 0
  std::chrono::milliseconds sample_period{1'000};       // > 0, <= both windows
};

// OK, or INVALID_ARGUMENT naming the field, its value and the allowed range.
Status ValidateAutoscaleOptions(const AutoscaleOptions& options);

// Cumulative counters of one version at one time (from its statistics snapshot).
struct LoadSample {
  Clock::TimePoint time;
  uint64_t busy_ns = 0;   // instance time spent executing batches, summed over instances
  uint64_t requests = 0;  // requests finished (succeeded or failed)
};

enum class ScaleDirection { kNone, kUp, kDown };

struct ScaleDecision {
  int instances = 0;  // the count to run from now on
  ScaleDirection direction = ScaleDirection::kNone;
  // The last period's signals (0 before the second sample).
  double utilization = 0;
  double qps = 0;
};

class AutoscalePolicy {
 public:
  // INVALID_ARGUMENT for bad options or an initial count outside [min, max].
  static StatusOr<AutoscalePolicy> Create(const AutoscaleOptions& options, int initial_instances);

  // Takes the next sample (times must not go backwards; a sample at or before the previous one is
  // ignored). The first sample only sets the baseline.
  ScaleDecision Observe(const LoadSample& sample);

  int instances() const { return instances_; }
  const AutoscaleOptions& options() const { return options_; }

 private:
  AutoscalePolicy(const AutoscaleOptions& options, int instances)
      : options_(options), instances_(instances) {}
  // The count the up rule asks for at `utilization`.
  int UpTarget(double utilization) const;
  bool DownAllowed(double utilization, double qps) const;

  AutoscaleOptions options_;
  int instances_;
  std::optional<LoadSample> last_;
  std::optional<Clock::TimePoint> last_event_;
  // When the up / down condition started to hold (the start of its first period); empty when
  // the last period did not satisfy it.
  std::optional<Clock::TimePoint> up_since_, down_since_;
};

// "up" / "down" / "none": the metrics label.
const char* ScaleDirectionName(ScaleDirection direction);

}  // namespace inferd::serving
