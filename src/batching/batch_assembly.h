// Batch assembly: pure functions that turn per-request tensors into one batched tensor and the
// batched outputs back into per-request tensors. They know nothing about models or scheduling.
//
//   // requests of 2 and 3 rows, sequence lengths 5 and 7, padded with 0 to 7:
//   ASSIGN_OR_RETURN(Tensor batch, ConcatBatch(parts, {.allow_ragged = true, .pad_value = 0}));
//   ...run...
//   ASSIGN_OR_RETURN(auto pieces, SplitBatch(out, {2, 3}, {{2, 5, -1}, {3, 7, -1}}));
//
// Every element type works, strings (BYTES) included: their elements are copied as std::string.
// All functions are thread-safe (no shared state) and return INVALID_ARGUMENT on inconsistent
// input (mismatched dtypes or ranks, rows that do not add up), never crash.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd::batching {

struct ConcatOptions {
  // false: every part must have the same dims after dim 0. true: parts may differ in any dim after
  // dim 0; each is padded at the end of those dims up to the largest size among the parts.
  bool allow_ragged = false;
  // Value written into padding, converted to the element type (bool: != 0). String tensors
  // (BYTES) are padded with empty strings whatever the value.
  double pad_value = 0.0;
};

// Concatenates `parts` (rank >= 1, same dtype and rank) along dim 0. A single part that needs no
// padding is returned as is (sharing its buffer); otherwise the result owns a new buffer.
StatusOr<Tensor> ConcatBatch(std::span<const Tensor> parts, const ConcatOptions& options = {});
// The same over pointers: the serving worker gathers each request's tensor where it lies instead
// of copying 64 Tensor objects (a shape vector and a reference count each) into a vector first.
StatusOr<Tensor> ConcatBatch(std::span<const Tensor* const> parts,
                             const ConcatOptions& options = {});

// Splits `batched` along dim 0 into pieces of rows[i] rows (the rows must sum to dim 0). When
// `shapes` is given (one per piece, same rank as `batched`), piece i is cropped to shapes[i]:
// dim 0 must equal rows[i]; a dim of -1 keeps the batched size; other dims must not exceed it.
// Pieces own their memory (copies), except a single uncropped piece, which shares `batched`.
StatusOr<std::vector<Tensor>> SplitBatch(const Tensor& batched, std::span<const int64_t> rows,
                                         std::span<const Shape> shapes = {});

// Splits `batched` along dim 0 into pieces of rows[i] rows that share its buffer: each piece is a
// view of its rows keeping the whole batch alive (one reference-counted holder for the batch, no
// allocation or copy per piece). `batched` must own its buffer (INVALID_ARGUMENT otherwise: a
// view could outlive memory it does not keep alive). The pieces are read-only in practice: they
// share memory with each other's neighbours.
StatusOr<std::vector<Tensor>> SplitBatchShared(const Tensor& batched,
                                               std::span<const int64_t> rows);

// Copies the leading corner of `src` of size `region` (per dim <= both shapes) into `dst` at
// row offset `dst_row` (dim 0). Same dtype and rank. Exposed for callers building batches in
// place.
Status CopyRegion(const Tensor& src, const Shape& region, Tensor* dst, int64_t dst_row);

}  // namespace inferd::batching
