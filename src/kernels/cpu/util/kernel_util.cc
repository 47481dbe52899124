#include "kernels/cpu/util/kernel_util.h"

#include <algorithm>

namespace inferd::cpu {

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1)) {
    return InvalidArgument("axis {} is out of range for rank {}", axis, rank);
  }
  return a;
}

}  // namespace inferd::cpu
