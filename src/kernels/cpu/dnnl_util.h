// oneDNN helpers: the process-wide CPU engine and conversions from our types.
#pragma once

#include <dnnl.hpp>

#include <unordered_map>

#include "common/data_type.h"
#include "common/tensor.h"

namespace inferd::cpu {

// The CPU engine shared by all kernels (oneDNN engines are thread-safe).
dnnl::engine& DnnlEngine();
// Maps a DataType to oneDNN's; data_type::undef when oneDNN has no equivalent.
dnnl::memory::data_type ToDnnl(DataType t);
dnnl::memory::dims ToDims(const Shape& shape);

// Thread-safety of cached primitives. Debian's oneDNN 2.6 is built with
// DNNL_ENABLE_CONCURRENT_EXEC=OFF: in the default (library) scratchpad mode all primitives of a
// thread share one scratchpad, so a primitive must not run from two threads at once nor move
// between threads — yet our kernels cache primitives per shape and Session::Run is concurrent
// (and server instances run one session from several worker threads). So every primitive a kernel
// caches is created with a user-managed scratchpad (UserScratchpad) and executed through
// ExecutePrimitive, which passes a buffer owned by the calling thread.
dnnl::primitive_attr UserScratchpad(dnnl::primitive_attr attr = dnnl::primitive_attr());
void ExecutePrimitive(const dnnl::primitive& prim, dnnl::stream& s,
                      std::unordered_map<int, dnnl::memory> args);

}  // namespace inferd::cpu
