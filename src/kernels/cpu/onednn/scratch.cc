#include "kernels/cpu/onednn/scratch.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <new>

#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {

void* ThreadScratch(int which, size_t bytes) {
  struct Slot {
    struct Free {
      void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<void, Free> data;
    size_t capacity = 0;
  };
  thread_local std::array<Slot, 4> slots;
  if (which < 0 || which >= static_cast<int>(slots.size())) return nullptr;
  Slot& slot = slots[which];
  if (bytes > slot.capacity) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    slot.data.reset(std::aligned_alloc(64, rounded));
    slot.capacity = slot.data ? rounded : 0;
  }
  return slot.data.get();
}

dnnl::memory ScratchMemory(const dnnl::memory::desc& md, int which) {
  void* p = ThreadScratch(which, md.get_size());
  if (p == nullptr) throw std::bad_alloc();
  return dnnl::memory(md, DnnlEngine(), p);
}

dnnl::memory ReorderIfNeeded(const dnnl::memory& src, const dnnl::memory::desc& md,
                             dnnl::stream& s, int which) {
  if (src.get_desc() == md) return src;
  dnnl::memory dst = ScratchMemory(md, which);
  dnnl::reorder(src, dst).execute(s, const_cast<dnnl::memory&>(src), dst);
  return dst;
}

}  // namespace inferd::cpu
