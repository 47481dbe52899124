// Memory planning of a graph's activations, apart from running the graph: value lifetimes,
// in-place aliasing and arena offsets. GraphExecutor (graph_executor.h) drives it:
//
//   1. Once per graph, ComputeLifetimes says after which step each produced value dies.
//   2. The first run of an input shape signature allocates on the heap; a MemoryRecorder notes
//      every output buffer (size, producing step, last step) and which outputs are views of one
//      (Reshape, Identity: their readers extend the viewed buffer's life) or take over an input's
//      buffer in place (OpKernel::InPlaceInput, when that input dies at the step).
//   3. MemoryRecorder::Build places the buffers with PlaceBuffers and returns the MemoryPlan:
//      per step output, an arena offset and the range a view may point into.
//
// Pure data and functions, no locking; a recorder is used by one run at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/tensor.h"

namespace inferd {

// ---- Lifetimes ----

// The value slots one step reads (its inputs and the values its subgraphs capture) and writes;
// -1 entries are omitted optional values.
struct StepValues {
  std::vector<int> reads;
  std::vector<int> writes;
};

struct Lifetimes {
  // Per slot: the step after which it is released. Graph outputs, graph inputs, constants and
  // captured values are never released: num_steps.
  std::vector<int> last_step;
  // Per step: the slots released after it, in the order the steps produce them.
  std::vector<std::vector<int>> release_after;
};

// A produced slot dies after its last reader, or right after its producer if nothing reads it.
Lifetimes ComputeLifetimes(std::span<const StepValues> steps, size_t num_slots,
                           std::span<const int> graph_outputs);

// ---- Offsets ----

// A buffer of `bytes` that must stay intact from step `first` to step `last` (inclusive).
struct BufferRequest {
  size_t bytes = 0;
  int first = 0;  // first step that writes the buffer
  int last = 0;   // last step that reads it (>= first)
};

struct BufferLayout {
  std::vector<size_t> offsets;  // one per request, multiples of the alignment
  size_t arena_bytes = 0;       // the arena size the offsets need
  size_t sum_bytes = 0;         // sum of all (aligned) request sizes: the cost without reuse
};

// Places buffers into one arena; two may share memory when their lifetimes do not intersect.
// Largest first, each into the smallest free gap between already placed buffers that overlap it
// in time (best fit), else at the end; usually close to the peak of live bytes. O(n^2).
//
//   std::vector<BufferRequest> reqs = {{4096, 0, 1}, {4096, 1, 2}, {4096, 2, 3}};
//   BufferLayout l = PlaceBuffers(reqs);  // buffers 0 and 2 share offset 0: arena_bytes == 8192
BufferLayout PlaceBuffers(std::span<const BufferRequest> requests, size_t alignment = 64);

// ---- The plan ----

// Statistics of one plan.
struct MemoryPlanStats {
  size_t arena_bytes = 0;       // planned peak: the arena size
  size_t sum_tensor_bytes = 0;  // what the planned tensors would take without reuse
  size_t planned_tensors = 0;
};

// Where one step output lives in a planned run.
struct PlannedOutput {
  int64_t offset = -1;  // into the arena; -1: heap
  size_t bytes = 0;
  // For outputs recorded as views of a planned buffer (Reshape, Identity, ...): the range they may
  // point into. Any other arena pointer in an output is unexpected and must be copied.
  int64_t alias_begin = -1;
  int64_t alias_end = -1;
  bool in_place = false;  // shares the buffer of an input that dies at this step

  // Whether an output pointing at arena offset `offset` (not its own storage) is a known view.
  bool AllowsView(int64_t offset) const {
    return alias_begin >= 0 && offset >= alias_begin && offset < alias_end;
  }
};

struct MemoryPlan {
  std::vector<std::vector<PlannedOutput>> outputs;  // [step][output]
  MemoryPlanStats stats;
};

// What the recording run of a new signature learns, step by step, and the plan built from it.
class MemoryRecorder {
 public:
  // Starts a recording of a graph of `num_steps` steps (reuses the vectors' capacity).
  void Reset(size_t num_steps);
  // Step `step`, with `num_outputs` outputs, has run; its outputs are recorded next.
  void BeginStep(int step, size_t num_outputs);
  // Output `output` of `step` got `bytes` of storage at `data` from the step's allocation, live
  // until step `last`. When `in_place_input` >= 0 the kernel may have written it over that input:
  // it takes over the input's buffer if that buffer starts at the input's data, dies at this step,
  // is large enough, and no other input of the step reads it. `inputs`: the step's inputs (null
  // for omitted ones).
  void RecordAllocated(int step, int output, const void* data, size_t bytes, int last,
                       std::span<const Tensor* const> inputs, int in_place_input);
  // Output `output` of `step` points at `data` without being its own storage (a view, or a tensor
  // passed through): if `data` lies in a recorded buffer, that buffer lives until step `last`.
  void RecordView(int step, int output, const void* data, int last);

  // Places the recorded buffers (an in-place output has no request of its own: it lives at the
  // offset of the buffer it took over; views may point anywhere inside the buffer they view).
  MemoryPlan Build(size_t alignment) const;

 private:
  struct Buffer {
    const char* ptr;
    size_t bytes;
    int first, last;
    int root;  // itself, or the buffer whose storage this in-place output takes over
  };
  // Buffer b must stay intact until step `last`; so must the storage it shares.
  void Extend(int b, int last);
  // The newest buffer whose range holds p (a freed buffer's address may be reused by a newer one;
  // a stale match only lengthens a lifetime, which is safe); -1 if none.
  int Find(const void* p) const;
  bool TakesOverInput(int step, int b, std::span<const Tensor* const> inputs, int k) const;

  std::vector<Buffer> buffers_;
  std::vector<std::vector<int>> own_;    // [step][output] -> buffer or -1
  std::vector<std::vector<int>> alias_;  // [step][output] -> buffer or -1
};

}  // namespace inferd
