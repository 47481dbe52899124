#include "loadgen/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "common/stats.h"

namespace inferd::loadgen {

LatencySummary Summarize(std::vector<int64_t>& latencies_us) {
  LatencySummary s;
  if (latencies_us.empty()) return s;
  std::sort(latencies_us.begin(), latencies_us.end());
  s.count = static_cast<int64_t>(latencies_us.size());
  s.avg_us = std::accumulate(latencies_us.begin(), latencies_us.end(), 0.0) /
             static_cast<double>(s.count);
  auto pct = [&](double p) { return std::llround(Percentile(latencies_us, p)); };
  s.p50_us = pct(50);
  s.p90_us = pct(90);
  s.p95_us = pct(95);
  s.p99_us = pct(99);
  s.max_us = latencies_us.back();
  return s;
}

bool LastAgree(const std::vector<double>& values, double percentage, size_t n) {
  if (n == 0 || values.size() < n) return false;
  auto first = values.end() - static_cast<std::ptrdiff_t>(n);
  auto [lo, hi] = std::minmax_element(first, values.end());
  if (*lo <= 0) return false;
  return *hi <= *lo * (1.0 + percentage / 100.0);
}

ArrivalSchedule::ArrivalSchedule(double rate_per_s, Distribution distribution, uint64_t seed,
                                 double burstiness)
    : rate_(rate_per_s),
      distribution_(distribution),
      burstiness_(burstiness),
      rng_(seed),
      exp_(rate_per_s),
      gamma_(burstiness, 1.0 / (rate_per_s * burstiness)) {}

std::chrono::nanoseconds ArrivalSchedule::NextGap() {
  double seconds = 1.0 / rate_;
  if (distribution_ == Distribution::kPoisson) {
    seconds = burstiness_ == 1.0 ? exp_(rng_) : gamma_(rng_);
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}

StatusOr<ArrivalSchedule::Distribution> ParseDistribution(std::string_view text) {
  if (text == "constant") return ArrivalSchedule::Distribution::kConstant;
  if (text == "poisson") return ArrivalSchedule::Distribution::kPoisson;
  return InvalidArgument("--distribution must be 'poisson' or 'constant', got '{}'", text);
}

namespace {

StatusOr<double> ParseNumber(std::string_view text, std::string_view what) {
  std::string s(text);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    return InvalidArgument("bad number '{}' in {}", s, what);
  }
  return v;
}

}  // namespace

StatusOr<std::vector<double>> ParseRange(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (true) {
    size_t colon = text.find(':', pos);
    parts.push_back(text.substr(pos, colon == std::string_view::npos ? colon : colon - pos));
    if (colon == std::string_view::npos) break;
    pos = colon + 1;
  }
  const std::string where = "range '" + std::string(text) + "' (expected A:B:STEP)";
  if (parts.size() > 3) return InvalidArgument("too many fields in {}", where);
  ASSIGN_OR_RETURN(double a, ParseNumber(parts[0], where));
  double b = a, step = 1;
  if (parts.size() > 1) {
    ASSIGN_OR_RETURN(b, ParseNumber(parts[1], where));
  }
  if (parts.size() > 2) {
    ASSIGN_OR_RETURN(step, ParseNumber(parts[2], where));
  }
  if (a <= 0 || b < a || step <= 0) {
    return InvalidArgument("need 0 < A <= B and STEP > 0 in {}", where);
  }
  if ((b - a) / step >= 1000) return InvalidArgument("more than 1000 levels in {}", where);
  std::vector<double> levels;
  for (double v = a; v <= b * (1 + 1e-9); v += step) levels.push_back(v);
  return levels;
}

StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double ms;
  };
  static constexpr Unit kUnits[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
  double scale = 1000;
  std::string_view number = text;
  for (const Unit& u : kUnits) {
    if (text.size() > u.suffix.size() && text.ends_with(u.suffix)) {  // "ms" is tried first
      number = text.substr(0, text.size() - u.suffix.size());
      scale = u.ms;
      break;
    }
  }
  const std::string where = "duration '" + std::string(text) + "' (e.g. 30m, 45s, 1500ms)";
  ASSIGN_OR_RETURN(double v, ParseNumber(number, where));
  if (v <= 0) return InvalidArgument("need a positive {}", where);
  return std::chrono::milliseconds(static_cast<int64_t>(v * scale));
}

}  // namespace inferd::loadgen
