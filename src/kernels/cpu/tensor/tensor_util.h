// Helpers shared by the shape and data-movement kernels (tensor/*.cc): strided copies,
// transposes, and reading index and axis lists.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd::cpu {

// Copies a strided view of `in` into the dense tensor `out` (same dtype):
//   out[i0, ..., ik] = in[in_offset + sum_d i_d * in_strides[d]]
// `in_strides` has one entry per dim of out->shape() and may hold 0 (broadcast) or negative
// values. The caller guarantees every addressed element lies inside `in`.
void StridedCopy(const Tensor& in, int64_t in_offset, const std::vector<int64_t>& in_strides,
                 Tensor* out);

// Transposes `in` by `perm` (a valid permutation of its dims) into `out`, which the caller has
// allocated with the permuted shape. Size-1 dims are dropped and adjacent dims merged first; the
// general case swaps the two contiguous dims in cache-sized tiles.
void TransposeInto(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out);

// Reads an index tensor (int32 or int64) as int64, wrapping negatives by `dim`; fails with
// InvalidArgument naming `what` when a value is outside [-dim, dim-1] or the type is wrong.
StatusOr<std::vector<int64_t>> ReadIndices(const Tensor& indices, int64_t dim, const char* what);

// Reads a 1-D (or scalar) integer tensor as int64 values; `what` names it in errors.
StatusOr<std::vector<int64_t>> ReadIntList(const Tensor& t, const char* what);

// Normalizes a list of axes against `rank` (negatives wrap); fails on out-of-range or duplicates.
StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank);

// Element type check helper: fails unless `t` is int32 or int64.
Status CheckIndexType(const Tensor& t, const char* what);

}  // namespace inferd::cpu
