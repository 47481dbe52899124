// Statistics of one model version: why requests failed (FailureReason), Triton's durations and
// per-batch-size counts, and the latency histograms behind /metrics.
//
// A failure's kind is decided where it happens (the scheduler's reject callback is a timeout, a
// full queue is what Schedule refuses with, ...) and travels as a FailureReason beside the Status;
// metrics read only the enum, so the message text is free to change (as Triton core's
// failure_reasons.h).
//
// ModelStats is written by the request path (Infer, the scheduler's workers) and read by
// Snapshot() (statistics endpoints, /metrics). Thread-safe: histograms and `pending` are lock-free,
// the rest is guarded by one mutex held for a few increments.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/histogram.h"
#include "common/mutex.h"
#include "common/status.h"

namespace inferd::serving {

// Why a request failed. Declared in the order of FailureReasonName, so a std::map keyed by it
// lists reasons as their names sort.
enum class FailureReason {
  kInternal,      // the engine failed (or produced outputs that do not fit the request)
  kInvalidInput,  // the request does not fit the model (names, dtypes, shapes, batch size)
  kQueueFull,     // the priority level's queue was at max_queue_size
  kTimeout,       // the queue timeout expired before the request ran
  kUnavailable,   // the model could not take it (shutting down)
};
// The metrics label: "internal", "invalid_argument", "queue_full", "timeout", "unavailable".
const char* FailureReasonName(FailureReason reason);
// The reason for an engine or assembly Status that carries no more specific one: INVALID_ARGUMENT
// → kInvalidInput, UNAVAILABLE → kUnavailable, anything else → kInternal.
FailureReason FailureReasonFromCode(StatusCode code);

// A count and the total time it took (Triton's StatisticDuration).
struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// Per batch size executed (Triton's InferBatchStatistics).
struct BatchStat {
  int64_t batch_size = 0;
  DurationStat compute_input, compute_infer, compute_output;
};

// Statistics and metrics of one model version, a consistent snapshot.
struct ModelStatisticsSnapshot {
  std::string name;
  int64_t version = 0;
  uint64_t last_inference_ms = 0;  // wall-clock ms since the Unix epoch of the last inference; 0
  uint64_t inference_count = 0;    // requests' batch rows inferred successfully
  uint64_t execution_count = 0;    // Session::Run calls (batches)
  // Triton's InferStatistics.
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::vector<BatchStat> batch_stats;  // ascending batch size
  // Prometheus: failed requests by reason (only reasons that occurred).
  std::map<FailureReason, uint64_t> failures;
  uint64_t success_requests = 0;
  HistogramSnapshot request_us;  // end-to-end (enqueue → callback), µs
  HistogramSnapshot queue_us;    // enqueue → batch start, µs
  HistogramSnapshot compute_us;  // batch assembly + Session::Run + split, µs
  HistogramSnapshot batch_size;  // rows per executed batch
  int64_t pending = 0;           // requests queued or executing now
  // Merged batches that failed with INVALID_ARGUMENT and were re-run one request at a time, so
  // that only the requests with bad data fail (ModelInstance).
  uint64_t batches_split = 0;
  // Instances serving this version now (its scheduler's active workers; autoscaling moves it).
  // 0 for an ensemble, which has none of its own.
  int instances = 0;
  // Instance time spent executing batches (merge, run, split), summed over instances, ns. Its
  // growth over a period divided by (period × instances) is the instances' utilization; the
  // autoscaler and the HAProxy agent weight read it.
  uint64_t busy_ns = 0;
  // Autoscaling events: instance count raised / lowered (autoscale_policy.h).
  uint64_t scale_ups = 0;
  uint64_t scale_downs = 0;
  // Memory plans the version's session recorded (GraphExecutor::plans_recorded: warmup included);
  // growing in steady state means input shapes outnumber the plans kept (re-planned runs allocate
  // their activations on the heap). 0 for an ensemble.
  int64_t memory_plans_recorded = 0;
};

using SteadyTime = std::chrono::steady_clock::time_point;
// Nanoseconds from a to b, 0 when b is earlier.
uint64_t NsBetween(SteadyTime a, SteadyTime b);

// When one batch's phases ended (steady clock).
struct BatchTimes {
  SteadyTime start;         // the worker took the batch
  SteadyTime inputs_ready;  // inputs merged
  SteadyTime inferred;      // Session::Run returned
  SteadyTime outputs_ready; // outputs split per request
};

class ModelStats {
 public:
  ModelStats();
  ModelStats(const ModelStats&) = delete;
  ModelStats& operator=(const ModelStats&) = delete;

  // While paused (warmup through the scheduler) nothing is recorded but `pending`.
  void set_paused(bool paused) { paused_.store(paused); }

  // A request was queued (+1) or its callback is about to run (-1).
  void AddPending(int64_t n) { pending_.fetch_add(n, std::memory_order_relaxed); }
  // The version's current instance count (set at start and by every scale event).
  void set_instances(int n) { instances_.store(n, std::memory_order_relaxed); }
  // A request ran and succeeded, `ns` after it was queued.
  void RecordSuccess(uint64_t ns) EXCLUDES(mu_);
  // A queued request failed `ns` after it was queued.
  void RecordFailure(FailureReason reason, uint64_t ns) EXCLUDES(mu_);
  // A request was refused before it was queued (no latency is recorded for it).
  void RecordRejected(FailureReason reason) EXCLUDES(mu_);
  // A request waited `ns` in the queue.
  void RecordQueue(uint64_t ns) EXCLUDES(mu_);
  // A merged batch failed with INVALID_ARGUMENT and its requests are re-run one at a time.
  void RecordBatchSplit() EXCLUDES(mu_);
  // One Session::Run of `rows` rows for `requests` requests.
  void RecordExecution(int64_t rows, size_t requests, const BatchTimes& times) EXCLUDES(mu_);

  // The autoscaler changed the instance count (up: raised).
  void RecordScaleEvent(bool up) EXCLUDES(mu_);

  // An ensemble request of `rows` rows succeeded: one inference and execution counted, without
  // the compute phases (its steps' models record those).
  void RecordInference(int64_t rows) EXCLUDES(mu_);

  // Everything but name and version, which the caller fills in.
  ModelStatisticsSnapshot Snapshot() const EXCLUDES(mu_);

 private:
  bool paused() const { return paused_.load(std::memory_order_relaxed); }
  void CountFailureLocked(FailureReason reason, uint64_t ns) REQUIRES(mu_);

  std::atomic<bool> paused_{false};
  std::atomic<int64_t> pending_{0};
  std::atomic<int> instances_{0};
  Histogram request_us_, queue_us_, compute_us_, batch_size_;  // lock-free
  mutable Mutex mu_;
  uint64_t last_inference_ms_ GUARDED_BY(mu_) = 0;
  uint64_t inference_count_ GUARDED_BY(mu_) = 0;
  uint64_t execution_count_ GUARDED_BY(mu_) = 0;
  uint64_t success_requests_ GUARDED_BY(mu_) = 0;
  uint64_t batches_split_ GUARDED_BY(mu_) = 0;
  uint64_t busy_ns_ GUARDED_BY(mu_) = 0;
  uint64_t scale_ups_ GUARDED_BY(mu_) = 0;
  uint64_t scale_downs_ GUARDED_BY(mu_) = 0;
  DurationStat success_ GUARDED_BY(mu_), fail_ GUARDED_BY(mu_), queue_ GUARDED_BY(mu_);
  DurationStat compute_input_ GUARDED_BY(mu_), compute_infer_ GUARDED_BY(mu_),
      compute_output_ GUARDED_BY(mu_);
  std::map<int64_t, BatchStat> batches_ GUARDED_BY(mu_);
  std::map<FailureReason, uint64_t> failures_ GUARDED_BY(mu_);
};

}  // namespace inferd::serving
