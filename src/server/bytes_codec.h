// The KServe/Triton wire form of BYTES tensors outside JSON: every element as a 4-byte
// little-endian length followed by that many bytes, elements in row-major order, nothing between
// them. The HTTP binary extension and gRPC raw_input_contents / raw_output_contents both use it.
// Pure functions; a string tensor is DataType::kString (common/tensor.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd::server {

// Decodes exactly NumElements(shape) elements that must use all of `bytes`. INVALID_ARGUMENT
// naming `where` for a truncated length prefix, an element running past the end, trailing bytes
// or a missing element; never reads outside `bytes`.
StatusOr<Tensor> DecodeLengthPrefixed(std::string_view bytes, const Shape& shape,
                                      std::string_view where);

// Encoded size of a string tensor: 4 bytes per element plus the string bytes.
size_t LengthPrefixedSize(const Tensor& strings);

// Appends the encoding of a string tensor to `out`.
void AppendLengthPrefixed(const Tensor& strings, std::string* out);

}  // namespace inferd::server
