#include "common/stats.h"

#include <algorithm>
#include <cstddef>

namespace inferd {

namespace {

template <class T>
double Interpolated(std::span<const T> sorted, double p) {
  if (sorted.empty()) return 0;
  const double h = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(h);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double a = static_cast<double>(sorted[lo]), b = static_cast<double>(sorted[hi]);
  return a + (b - a) * (h - static_cast<double>(lo));
}

}  // namespace

double Percentile(std::span<const double> sorted, double p) { return Interpolated(sorted, p); }

double Percentile(std::span<const int64_t> sorted, double p) { return Interpolated(sorted, p); }

}  // namespace inferd
