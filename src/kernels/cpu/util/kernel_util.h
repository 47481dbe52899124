// Small helpers shared by CPU kernels: axis handling, parallel loops, float conversion.
// Broadcasting is util/broadcast.h.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd::cpu {

// Maps a possibly negative axis into [0, rank); fails if out of range.
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

// Runs fn(begin, end) over [0, n) split across OpenMP threads when n is large enough.
template <typename Fn>
void ParallelFor(int64_t n, int64_t min_chunk, Fn&& fn) {
  if (n <= 0) return;
  int threads = omp_get_max_threads();
  if (threads <= 1 || n < 2 * min_chunk || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, n / min_chunk);
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks;
    int64_t end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

// Converts a float value to T (rounding rules of static_cast, plus Float16/BFloat16).
template <typename T>
inline T FromFloat(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace inferd::cpu
