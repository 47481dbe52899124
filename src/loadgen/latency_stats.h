// Pure measurement math for the server load generator: latency percentiles, window stability,
// the open-loop arrival schedule and range/duration parsing. No I/O, so all of it is unit-tested.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd::loadgen {

// Latency distribution of the successful requests of one window (or a merge of windows), in µs.
struct LatencySummary {
  int64_t count = 0;
  double avg_us = 0;
  int64_t p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0, max_us = 0;
};

// Percentiles by common/stats.h's convention (linear interpolation between the closest ranks,
// numpy's default), rounded to whole µs. Sorts `latencies_us` in place. Empty input gives all
// zeros.
LatencySummary Summarize(std::vector<int64_t>& latencies_us);

// perf_analyzer's rule: the last `n` values are stable when max <= min * (1 + percentage / 100)
// and none is zero. Fewer than `n` values are never stable.
bool LastAgree(const std::vector<double>& values, double percentage, size_t n = 3);

// Open-loop send times: request i is intended at start + offset(i). Constant spacing 1/rate or
// Poisson arrivals (exponential gaps with mean 1/rate), deterministic for a seed. With
// `burstiness` != 1, Poisson becomes vLLM's bursty arrivals: gamma-distributed gaps of shape
// `burstiness` and the same mean 1/rate (below 1: burstier, coefficient of variation
// 1/sqrt(burstiness)). burstiness must be > 0.
class ArrivalSchedule {
 public:
  enum class Distribution { kConstant, kPoisson };
  ArrivalSchedule(double rate_per_s, Distribution distribution, uint64_t seed = 1,
                  double burstiness = 1.0);
  // The gap before the next request.
  std::chrono::nanoseconds NextGap();

 private:
  double rate_;
  Distribution distribution_;
  double burstiness_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> exp_;
  std::gamma_distribution<double> gamma_;
};
StatusOr<ArrivalSchedule::Distribution> ParseDistribution(std::string_view text);

// "A:B:STEP" (or "A", or "A:B" with step 1) into the list of levels A, A+STEP, ... <= B.
// A > 0, B >= A, STEP > 0; at most 1000 levels.
StatusOr<std::vector<double>> ParseRange(std::string_view text);

// "30m", "45s", "1500ms", "2h", "90" (seconds). Must be positive.
StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text);

}  // namespace inferd::loadgen
