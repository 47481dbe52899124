#include "tools/memory_policy.h"

#include <malloc.h>

#include <cstdlib>

namespace inferd::tools {

void UseFixedMmapThreshold() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, 1 << 20);  // setting it also turns the dynamic adjustment off
}

}  // namespace inferd::tools
