// The one numpy-broadcasting engine of the CPU kernels.
//
// PlanBroadcast() right-aligns the input shapes against the output, drops size-1 output dims and
// merges adjacent dims where every input either steps contiguously or stays put. The plan maps a
// flat row-major output index to one element offset per input, and its innermost dim has stride
// 1 or 0 for each input, so the common patterns all end in one tight loop:
//   same shape         [N,C] + [N,C]     → one dim, strides (1, 1)
//   scalar             [N,C] + []        → one dim, strides (1, 0)
//   row (bias)         [N,C] + [C]       → dims [N, C], inner strides (1, 1)
//   column / channel   [N,C,HW] + [C,1]  → dims [N, C, HW], inner strides (1, 0)
// A plan is walked in one of two ways:
//   ForEachSegment()   splits the output across OpenMP threads (also inside a single long row)
//                      and calls a function per contiguous segment: the element-wise kernels.
//   BroadcastIterator  steps one output element at a time, sequentially (or from a Seek()
//                      position): kernels that gather per element or accumulate into an input.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {

// Numpy (multidirectional) broadcast of two or more shapes.
StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes);

// Broadcast output shape of the given tensors, with the op name in the error.
StatusOr<Shape> BroadcastOutputShape(const char* op, const std::vector<const Tensor*>& inputs);

// For an input of shape `in` broadcast to `out` (same or lower rank, right-aligned), the element
// strides to use when walking `out` in row-major order (0 for broadcast dims), uncollapsed.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

struct BroadcastPlan {
  Shape dims;                                 // collapsed output dims; never empty
  std::vector<std::vector<int64_t>> strides;  // per input, per collapsed dim (innermost 0 or 1)
  int64_t total = 0;                          // output element count
};

// `out` must be the broadcast of `inputs` (see BroadcastShapes).
BroadcastPlan PlanBroadcast(const Shape& out, const std::vector<Shape>& inputs);

// Calls seg(offsets, out_offset, len) over the whole output, in parallel; offsets[k] is input k's
// element offset of the segment's first element and inner_stride(k) (0 or 1) its step.
template <size_t N, typename Seg>
void ForEachSegment(const BroadcastPlan& plan, int64_t grain, Seg&& seg) {
  const int64_t inner = plan.dims.back();
  const int64_t rank = static_cast<int64_t>(plan.dims.size());
  ParallelFor(plan.total, grain, [&](int64_t begin, int64_t end) {
    // Position the multi-index (without the inner dim) at begin's row.
    int64_t row = begin / inner, col = begin % inner;
    std::vector<int64_t> index(rank, 0);
    std::array<int64_t, N> base{};
    int64_t r = row;
    for (int64_t d = rank - 2; d >= 0; --d) {
      index[d] = r % plan.dims[d];
      r /= plan.dims[d];
      for (size_t k = 0; k < N; ++k) base[k] += index[d] * plan.strides[k][d];
    }
    int64_t pos = begin;
    while (pos < end) {
      int64_t len = std::min(inner - col, end - pos);
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = base[k] + col * plan.strides[k][rank - 1];
      seg(off, pos, len);
      pos += len;
      col = 0;
      // Next row: odometer over the outer dims.
      for (int64_t d = rank - 2; d >= 0; --d) {
        ++index[d];
        for (size_t k = 0; k < N; ++k) base[k] += plan.strides[k][d];
        if (index[d] < plan.dims[d]) break;
        for (size_t k = 0; k < N; ++k) base[k] -= index[d] * plan.strides[k][d];
        index[d] = 0;
      }
    }
  });
}

// Walks a plan's output in row-major order one element at a time, keeping each input's element
// offset. Starts at output element 0. Usage:
//   BroadcastIterator it(PlanBroadcast(out_shape, {a_shape, b_shape}));
//   for (int64_t i = 0; i < n; ++i, it.Next()) c[i] = a[it.offset(0)] + b[it.offset(1)];
// Not thread safe; parallel loops make one iterator per chunk and Seek() it.
class BroadcastIterator {
 public:
  explicit BroadcastIterator(BroadcastPlan plan);
  // Positions the iterator at flat output index `linear`.
  void Seek(int64_t linear);
  int64_t offset(size_t input) const { return offsets_[input]; }
  void Next();

 private:
  BroadcastPlan plan_;
  std::vector<int64_t> index_;
  std::vector<int64_t> offsets_;
};

}  // namespace inferd::cpu
