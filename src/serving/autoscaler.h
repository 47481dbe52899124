// Autoscaler: the thread that runs a model version's AutoscalePolicy (autoscale_policy.h), turned
// on by config.pbtxt (autoscale_config.h):
//
//   instance_group [ { count: 1 kind: KIND_CPU } ]   # the starting count (absent: min_instances)
//   inferd { autoscaling { min_instances: 1 max_instances: 4
//                          scale_up_utilization: 0.7 scale_down_qps: 5 hysteresis: 0.1
//                          scale_up_window_ms: 30000 scale_down_window_ms: 60000
//                          cooldown_ms: 30000 sample_period_ms: 1000 } }
//
// ModelVersion creates the scheduler with max_instances workers, min..max of them active
// (BatchScheduler::SetActiveWorkers), and an Autoscaler whose apply callback moves the active
// count: raising it lets parked workers take queued work at once, lowering it lets the workers
// past the new count finish their batch before they park, so no request is dropped or failed.
//
// Thread-safety: the Autoscaler's thread calls `sample` and `apply`; the destructor stops it and
// joins, after which neither is called again. Time comes from the injected Clock (tests advance a
// FakeClock: the thread waits for exactly `next sample time`).
#pragma once

#include <functional>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "serving/autoscale_config.h"
#include "serving/autoscale_policy.h"

namespace inferd::serving {

class Autoscaler {
 public:
  // Reads the version's cumulative counters (the time is filled in by the Autoscaler).
  using SampleFn = std::function<LoadSample()>;
  // Applies a scale event (decision.direction is kUp or kDown).
  using ApplyFn = std::function<void(const ScaleDecision&)>;

  // Starts the thread: a baseline sample now, then one every sample_period; `clock`, `sample`'s
  // and `apply`'s targets outlive the Autoscaler.
  Autoscaler(AutoscalePolicy policy, Clock& clock, SampleFn sample, ApplyFn apply);
  ~Autoscaler();
  Autoscaler(const Autoscaler&) = delete;
  Autoscaler& operator=(const Autoscaler&) = delete;

 private:
  void Loop() EXCLUDES(mu_);

  AutoscalePolicy policy_;  // only the thread uses it
  Clock& clock_;
  const SampleFn sample_;
  const ApplyFn apply_;
  Mutex mu_;
  CondVar cv_;  // with mu_: stop
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace inferd::serving
