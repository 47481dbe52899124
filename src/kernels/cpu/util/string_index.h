// String tensors through the numeric data-movement kernels.
//
// A data-movement op (Transpose, Gather, Slice, Concat, Split, Expand, Tile, ...) only chooses
// which input element lands where, so on string tensors it can run its own numeric kernel on
// int64 element indices and then copy the strings those indices name. OnStringIndices() wraps a
// numeric kernel factory that way: every string tensor among the data inputs becomes an int64
// tensor of the same shape holding global element numbers (input k's numbers follow input k-1's),
// the numeric kernel runs on them, and every int64 output is turned back into strings. Register
// the wrapped factory for {DataType::kString} before the numeric one: a node whose input type is
// known numeric never sees the wrapper, and one whose type is unknown gets a wrapper that calls
// the numeric kernel directly when no data input is a string.
//
// Only ops whose every output element is a copy of a data-input element qualify (not Pad with a
// constant, not Unique, not Resize's interpolation).
#pragma once

#include <vector>

#include "runtime/op_kernel.h"

namespace inferd::cpu {

// `data_inputs`: the input indices that carry elements (empty: all inputs).
KernelFactory OnStringIndices(KernelFactory numeric, std::vector<int> data_inputs = {});

// `types` plus kString: for kernels that only relabel their input's buffer (Reshape, Identity,
// Squeeze ...), which share a string tensor's elements as they share numeric bytes.
std::vector<DataType> WithString(std::vector<DataType> types);

}  // namespace inferd::cpu
