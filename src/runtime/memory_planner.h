// Memory planner: places tensors with known sizes and lifetimes into one arena.
//
// Each request is a buffer of `bytes` that must stay intact from step `first` to step `last`
// (inclusive; steps are the executor's node order). Two buffers may share memory when their
// lifetimes do not intersect. PlanMemory places the largest buffers first, each into the
// smallest free gap between already placed buffers that overlap it in time (best fit), else at the
// end; offsets are aligned. The result is usually close to the peak of live bytes.
//
//   std::vector<BufferRequest> reqs = {{4096, 0, 1}, {4096, 1, 2}, {4096, 2, 3}};
//   MemoryPlan p = PlanMemory(reqs);  // buffers 0 and 2 share offset 0: arena_bytes == 8192
//
// Pure function, no state; cheap enough to run once per new input shape (O(n^2) in the number of
// buffers, a few thousand at most for real models).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace inferd {

struct BufferRequest {
  size_t bytes = 0;
  int first = 0;  // first step that writes the buffer
  int last = 0;   // last step that reads it (>= first)
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, multiples of the alignment
  size_t arena_bytes = 0;       // the arena size the offsets need
  size_t sum_bytes = 0;         // sum of all (aligned) request sizes: the cost without reuse
};

MemoryPlan PlanMemory(std::span<const BufferRequest> requests, size_t alignment = 64);

}  // namespace inferd
