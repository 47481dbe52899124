// Reading and writing numpy .npy files (format versions 1.0, 2.0 and 3.0).
//
// The parser is hand-written: Debian ships no maintained C++ .npy library (cnpy and xtensor's
// reader are not packaged with a stable API), and the format is small: a magic string, a version,
// a little-endian header length, a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// and the raw C-order data.
//
// Supported element types: bool (|b1), int8/16/32/64, uint8/16/32/64, float16 (<f2), float32,
// float64. Only little-endian data ('<', '|', or '=' on this little-endian host) and C order.
// Big-endian data, Fortran order, structured/complex/object dtypes, bad magic, truncated headers
// and a data size that does not match the shape all fail with INVALID_ARGUMENT naming the file.
//
// numpy has no bfloat16: SerializeNpy/SaveNpy reject it with UNIMPLEMENTED (convert to float32
// first, e.g. with ToNpyCompatible()).
//
//   ASSIGN_OR_RETURN(Tensor x, LoadNpy("input.npy"));
//   RETURN_IF_ERROR(SaveNpy(ToNpyCompatible(y), "out/y.npy"));
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd {

// Reads a .npy file into an owned tensor.
StatusOr<Tensor> LoadNpy(const std::filesystem::path& path);
// Parses the bytes of a .npy file; `source` names it in error messages.
StatusOr<Tensor> ParseNpy(std::string_view bytes, std::string_view source = "<memory>");

// Serializes a tensor as .npy (version 1.0, or 2.0 when the header needs it). The header is padded
// so the data starts at a multiple of 64 bytes, as numpy does.
StatusOr<std::string> SerializeNpy(const Tensor& tensor);
// Writes SerializeNpy(tensor) to `path` (the folder must exist).
Status SaveNpy(const Tensor& tensor, const std::filesystem::path& path);

// The numpy descr string for a dtype ("<f4", "|b1", ...); empty if numpy cannot hold it.
std::string NpyDescr(DataType dtype);
// Returns `tensor` unchanged unless numpy cannot hold its type: bfloat16 becomes float32 (exact).
Tensor ToNpyCompatible(const Tensor& tensor);

}  // namespace inferd
