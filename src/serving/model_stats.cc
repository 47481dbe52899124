#include "serving/model_stats.h"

#include <algorithm>

#include "common/clock.h"

namespace inferd::serving {
namespace {

std::vector<double> LatencyBoundsUs() { return Histogram::ExponentialBounds(50, 2, 18); }

double Us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

const char* FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kInternal: return "internal";
    case FailureReason::kInvalidInput: return "invalid_argument";
    case FailureReason::kQueueFull: return "queue_full";
    case FailureReason::kTimeout: return "timeout";
    case FailureReason::kUnavailable: return "unavailable";
  }
  return "internal";
}

FailureReason FailureReasonFromCode(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return FailureReason::kInvalidInput;
    case StatusCode::kUnavailable: return FailureReason::kUnavailable;
    default: return FailureReason::kInternal;
  }
}

uint64_t NsBetween(SteadyTime a, SteadyTime b) {
  return static_cast<uint64_t>(
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count()));
}

ModelStats::ModelStats()
    : request_us_(LatencyBoundsUs()),
      queue_us_(LatencyBoundsUs()),
      compute_us_(LatencyBoundsUs()),
      batch_size_(Histogram::ExponentialBounds(1, 2, 11)) {}

void ModelStats::RecordSuccess(uint64_t ns) {
  if (paused()) return;
  request_us_.Record(Us(ns));
  MutexLock l(&mu_);
  ++success_.count;
  success_.ns += ns;
  ++success_requests_;
}

void ModelStats::RecordFailure(FailureReason reason, uint64_t ns) {
  if (paused()) return;
  request_us_.Record(Us(ns));
  MutexLock l(&mu_);
  CountFailureLocked(reason, ns);
}

void ModelStats::RecordRejected(FailureReason reason) {
  if (paused()) return;
  MutexLock l(&mu_);
  CountFailureLocked(reason, 0);
}

void ModelStats::RecordBatchSplit() {
  if (paused()) return;
  MutexLock l(&mu_);
  ++batches_split_;
}

void ModelStats::CountFailureLocked(FailureReason reason, uint64_t ns) {
  ++failures_[reason];
  ++fail_.count;
  fail_.ns += ns;
}

void ModelStats::RecordQueue(uint64_t ns) {
  if (paused()) return;
  queue_us_.Record(Us(ns));
  MutexLock l(&mu_);
  ++queue_.count;
  queue_.ns += ns;
}

void ModelStats::RecordExecution(int64_t rows, size_t requests, const BatchTimes& t) {
  if (paused()) return;
  const uint64_t n_in = NsBetween(t.start, t.inputs_ready);
  const uint64_t n_inf = NsBetween(t.inputs_ready, t.inferred);
  const uint64_t n_out = NsBetween(t.inferred, t.outputs_ready);
  {
    MutexLock l(&mu_);
    ++execution_count_;
    inference_count_ += rows;
    last_inference_ms_ = WallMillis();
    busy_ns_ += NsBetween(t.start, t.outputs_ready);
    // Triton counts compute durations per request: each request of the batch spent them.
    for (DurationStat* d : {&compute_input_, &compute_infer_, &compute_output_}) {
      d->count += requests;
    }
    compute_input_.ns += n_in * requests;
    compute_infer_.ns += n_inf * requests;
    compute_output_.ns += n_out * requests;
    BatchStat& b = batches_[rows];
    b.batch_size = rows;
    b.compute_input.count++;
    b.compute_input.ns += n_in;
    b.compute_infer.count++;
    b.compute_infer.ns += n_inf;
    b.compute_output.count++;
    b.compute_output.ns += n_out;
  }
  compute_us_.Record(Us(NsBetween(t.start, t.outputs_ready)));
  batch_size_.Record(static_cast<double>(rows));
}

void ModelStats::RecordScaleEvent(bool up) {
  MutexLock l(&mu_);
  ++(up ? scale_ups_ : scale_downs_);
}

void ModelStats::RecordInference(int64_t rows) {
  if (paused()) return;
  MutexLock l(&mu_);
  ++execution_count_;
  inference_count_ += rows;
  last_inference_ms_ = WallMillis();
}

ModelStatisticsSnapshot ModelStats::Snapshot() const {
  ModelStatisticsSnapshot s;
  {
    MutexLock l(&mu_);
    s.last_inference_ms = last_inference_ms_;
    s.inference_count = inference_count_;
    s.execution_count = execution_count_;
    s.batches_split = batches_split_;
    s.busy_ns = busy_ns_;
    s.scale_ups = scale_ups_;
    s.scale_downs = scale_downs_;
    s.success = success_;
    s.fail = fail_;
    s.queue = queue_;
    s.compute_input = compute_input_;
    s.compute_infer = compute_infer_;
    s.compute_output = compute_output_;
    for (const auto& [size, b] : batches_) s.batch_stats.push_back(b);
    s.failures = failures_;
    s.success_requests = success_requests_;
  }
  s.request_us = request_us_.Snapshot();
  s.queue_us = queue_us_.Snapshot();
  s.compute_us = compute_us_.Snapshot();
  s.batch_size = batch_size_.Snapshot();
  s.pending = pending_.load(std::memory_order_relaxed);
  s.instances = instances_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace inferd::serving
