// Per-thread scratch memory for layout conversions around oneDNN primitives (an activation
// reordered into a blocked layout and back).
#pragma once

#include <dnnl.hpp>

#include <cstddef>

namespace inferd::cpu {

// Slot `which` (0..3) grows to the largest request seen on this thread and is reused, so
// steady-state calls allocate nothing; it stays valid until the next call with the same slot on the
// same thread. Null when the memory is not available.
void* ThreadScratch(int which, size_t bytes);
// A oneDNN memory for `md` in ThreadScratch slot `which`; throws std::bad_alloc when there is none
// (kernels run inside DnnlTry).
dnnl::memory ScratchMemory(const dnnl::memory::desc& md, int which);
// `src` reordered into `md` (in scratch slot `which`), or `src` itself when it has that layout.
dnnl::memory ReorderIfNeeded(const dnnl::memory& src, const dnnl::memory::desc& md,
                             dnnl::stream& s, int which);

}  // namespace inferd::cpu
