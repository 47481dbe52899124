// Percentiles of a sample (latencies, timings): the one definition every benchmark in inferd uses
// (the engine bench `inferd bench --model`, the server load generator `inferd bench --url`).
//
// Convention: linear interpolation between the closest ranks, as numpy.percentile's default and
// Python's statistics.quantiles(method="inclusive") (Hyndman & Fan type 7). For n sorted samples
// x[0..n-1] the p-th percentile is at position h = p / 100 * (n - 1):
//   x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]).
// So P50 of an even count is the mean of the two middle samples (the usual median), P0 is the
// minimum and P100 the maximum.
//
//   std::vector<double> ms = ...;
//   std::sort(ms.begin(), ms.end());
//   double p90 = Percentile(ms, 90);
//
// Not to be confused with HistogramSnapshot::Percentile (common/histogram.h), which estimates a
// percentile from Prometheus buckets without the samples.
#pragma once

#include <cstdint>
#include <span>

namespace inferd {

// The p-th percentile (p in [0, 100], clamped) of `sorted` (ascending; not checked). 0 when empty.
double Percentile(std::span<const double> sorted, double p);
double Percentile(std::span<const int64_t> sorted, double p);

}  // namespace inferd
