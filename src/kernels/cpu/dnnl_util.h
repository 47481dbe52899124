// oneDNN helpers: the process-wide CPU engine and conversions from our types.
#pragma once

#include <dnnl.hpp>

#include "common/data_type.h"
#include "common/tensor.h"

namespace inferd::cpu {

// The CPU engine shared by all kernels (oneDNN engines are thread-safe).
dnnl::engine& DnnlEngine();
// Maps a DataType to oneDNN's; data_type::undef when oneDNN has no equivalent.
dnnl::memory::data_type ToDnnl(DataType t);
dnnl::memory::dims ToDims(const Shape& shape);

}  // namespace inferd::cpu
