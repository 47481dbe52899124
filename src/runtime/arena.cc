#include "runtime/arena.h"

namespace inferd {

bool Arena::Reserve(size_t bytes) {
  if (bytes <= capacity_) return true;
  data_.reset();
  capacity_ = 0;
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  char* p = static_cast<char*>(std::aligned_alloc(kAlignment, rounded));
  if (p == nullptr) return false;
  data_.reset(p);
  capacity_ = rounded;
  return true;
}

}  // namespace inferd
