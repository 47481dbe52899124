// Histogram: fixed buckets, Prometheus style (cumulative `le` buckets, sum, count), with
// lock-free recording from many threads and percentile estimation from a snapshot.
//
//   Histogram h(Histogram::ExponentialBounds(100, 2, 16));   // 100µs .. ~3.3s
//   h.Record(latency_us);
//   HistogramSnapshot s = h.Snapshot();
//   double p99 = s.Percentile(99);
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace inferd {

struct HistogramSnapshot {
  std::vector<double> bounds;    // ascending upper bounds; an implicit +Inf bucket follows
  std::vector<uint64_t> counts;  // per bucket (not cumulative), bounds.size() + 1 entries
  double sum = 0;
  uint64_t count = 0;

  // Observations <= bounds[i] (i == bounds.size(): all), as Prometheus' `le` buckets.
  uint64_t CumulativeCount(size_t i) const;
  // Estimated p-th percentile (0 < p <= 100), interpolating linearly inside the bucket (the
  // first bucket starts at 0; the +Inf bucket reports the largest finite bound). 0 when empty.
  double Percentile(double p) const;
  double Mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

class Histogram {
 public:
  // `bounds` must be ascending (programmer error otherwise); an empty list makes one +Inf bucket.
  explicit Histogram(std::vector<double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // start, start*factor, ... (`count` bounds).
  static std::vector<double> ExponentialBounds(double start, double factor, int count);

  // Thread-safe, lock-free.
  void Record(double value);
  // Thread-safe. Buckets, sum and count are read one after the other, so a snapshot taken during
  // concurrent recording may be off by the observations in flight.
  HistogramSnapshot Snapshot() const;

 private:
  // No lock: bounds_ is immutable after construction; the counters are independent relaxed atomics.
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

}  // namespace inferd
