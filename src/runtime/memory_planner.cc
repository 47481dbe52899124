#include "runtime/memory_planner.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace inferd {

MemoryPlan PlanMemory(std::span<const BufferRequest> requests, size_t alignment) {
  const size_t n = requests.size();
  auto align = [&](size_t b) { return (b + alignment - 1) / alignment * alignment; };
  MemoryPlan plan;
  plan.offsets.assign(n, 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Largest first (ties: earliest first) keeps big buffers packed at low offsets.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    return requests[a].first < requests[b].first;
  });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of placed buffers alive together
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    const size_t size = align(std::max<size_t>(r.bytes, 1));
    plan.sum_bytes += size;
    busy.clear();
    for (size_t p : placed) {
      const BufferRequest& q = requests[p];
      if (q.last < r.first || r.last < q.first) continue;
      busy.emplace_back(plan.offsets[p], plan.offsets[p] + align(std::max<size_t>(q.bytes, 1)));
    }
    std::sort(busy.begin(), busy.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [b, e] : busy) {
      if (b > cursor && b - cursor >= size && b - cursor < best_gap) {
        best = cursor;
        best_gap = b - cursor;
      }
      cursor = std::max(cursor, e);
    }
    if (best == SIZE_MAX) best = cursor;  // past every overlapping buffer
    plan.offsets[idx] = best;
    plan.arena_bytes = std::max(plan.arena_bytes, best + size);
    placed.push_back(idx);
  }
  return plan;
}

}  // namespace inferd
