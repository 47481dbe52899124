#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace inferd {

Lifetimes ComputeLifetimes(std::span<const StepValues> steps, size_t num_slots,
                           std::span<const int> graph_outputs) {
  std::vector<int> last_use(num_slots, -1);
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int slot : steps[s].reads) {
      if (slot >= 0) last_use[slot] = static_cast<int>(s);
    }
  }
  Lifetimes lt;
  lt.last_step.assign(num_slots, static_cast<int>(steps.size()));
  lt.release_after.resize(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int slot : steps[s].writes) {
      if (slot < 0) continue;
      if (std::find(graph_outputs.begin(), graph_outputs.end(), slot) != graph_outputs.end()) {
        continue;
      }
      const int lu = last_use[slot];
      const int release = lu >= 0 ? lu : static_cast<int>(s);
      lt.release_after[release].push_back(slot);
      lt.last_step[slot] = release;
    }
  }
  return lt;
}

BufferLayout PlaceBuffers(std::span<const BufferRequest> requests, size_t alignment) {
  const size_t n = requests.size();
  auto align = [&](size_t b) { return (b + alignment - 1) / alignment * alignment; };
  BufferLayout layout;
  layout.offsets.assign(n, 0);
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
    layout.sum_bytes += size;
    busy.clear();
    for (size_t p : placed) {
      const BufferRequest& q = requests[p];
      if (q.last < r.first || r.last < q.first) continue;
      busy.emplace_back(layout.offsets[p],
                        layout.offsets[p] + align(std::max<size_t>(q.bytes, 1)));
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
    layout.offsets[idx] = best;
    layout.arena_bytes = std::max(layout.arena_bytes, best + size);
    placed.push_back(idx);
  }
  return layout;
}

void MemoryRecorder::Reset(size_t num_steps) {
  buffers_.clear();
  own_.assign(num_steps, {});
  alias_.assign(num_steps, {});
}

void MemoryRecorder::BeginStep(int step, size_t num_outputs) {
  own_[step].assign(num_outputs, -1);
  alias_[step].assign(num_outputs, -1);
}

void MemoryRecorder::Extend(int b, int last) {
  buffers_[b].last = std::max(buffers_[b].last, last);
  Buffer& r = buffers_[buffers_[b].root];
  r.last = std::max(r.last, last);
}

int MemoryRecorder::Find(const void* p) const {
  const char* c = static_cast<const char*>(p);
  for (int b = static_cast<int>(buffers_.size()) - 1; b >= 0; --b) {
    if (c >= buffers_[b].ptr && c < buffers_[b].ptr + buffers_[b].bytes) return b;
  }
  return -1;
}

// Whether new buffer b may take over the buffer of input k: that input's data starts a recorded
// buffer whose storage (root) dies at this step, is large enough, and no other input of the step
// reads that storage while the output is written.
bool MemoryRecorder::TakesOverInput(int step, int b, std::span<const Tensor* const> inputs,
                                    int k) const {
  const void* data = inputs[k]->raw_data();
  const int in_b = Find(data);
  if (in_b < 0 || in_b == b || buffers_[in_b].ptr != data) return false;
  const int root = buffers_[in_b].root;
  for (size_t j = 0; j < inputs.size(); ++j) {
    if (static_cast<int>(j) == k || inputs[j] == nullptr) continue;
    const int jb = Find(inputs[j]->raw_data());
    if (jb >= 0 && buffers_[jb].root == root) return false;
  }
  const Buffer& r = buffers_[root];
  return r.last == step && buffers_[b].bytes <= r.bytes;
}

void MemoryRecorder::RecordAllocated(int step, int output, const void* data, size_t bytes,
                                     int last, std::span<const Tensor* const> inputs,
                                     int in_place_input) {
  const int b = static_cast<int>(buffers_.size());
  own_[step][output] = b;
  buffers_.push_back({static_cast<const char*>(data), bytes, step, last, b});
  const int k = in_place_input;
  if (k < 0 || inputs[k] == nullptr || !TakesOverInput(step, b, inputs, k)) return;
  // In place: the input's whole buffer (and all it shares) now lives as long as this output.
  buffers_[b].root = buffers_[Find(inputs[k]->raw_data())].root;
  Extend(b, last);
}

void MemoryRecorder::RecordView(int step, int output, const void* data, int last) {
  if (const int b = Find(data); b >= 0) {
    alias_[step][output] = b;
    Extend(b, last);
  }
}

MemoryPlan MemoryRecorder::Build(size_t alignment) const {
  std::vector<BufferRequest> requests;
  std::vector<int> request_of(buffers_.size(), -1);
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const Buffer& buf = buffers_[b];
    if (buf.root != static_cast<int>(b)) continue;
    request_of[b] = static_cast<int>(requests.size());
    requests.push_back({buf.bytes, buf.first, buf.last});
  }
  const BufferLayout layout = PlaceBuffers(requests, alignment);
  auto offset_of = [&](int b) {
    return static_cast<int64_t>(layout.offsets[request_of[buffers_[b].root]]);
  };
  MemoryPlan plan;
  plan.outputs.resize(own_.size());
  for (size_t s = 0; s < own_.size(); ++s) {
    plan.outputs[s].resize(own_[s].size());
    for (size_t o = 0; o < own_[s].size(); ++o) {
      PlannedOutput& po = plan.outputs[s][o];
      if (const int b = own_[s][o]; b >= 0) {
        po.offset = offset_of(b);
        po.bytes = buffers_[b].bytes;
        po.in_place = buffers_[b].root != b;
      }
      if (const int b = alias_[s][o]; b >= 0) {
        po.alias_begin = offset_of(b);
        po.alias_end = po.alias_begin + static_cast<int64_t>(buffers_[b].bytes);
      }
    }
  }
  plan.stats = {layout.arena_bytes, layout.sum_bytes, requests.size()};
  return plan;
}

}  // namespace inferd
