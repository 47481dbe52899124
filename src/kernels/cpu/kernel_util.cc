#include "kernels/cpu/kernel_util.h"

#include <algorithm>

namespace inferd::cpu {

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1)) {
    return InvalidArgument("axis {} is out of range for rank {}", axis, rank);
  }
  return a;
}

StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (const Shape& x : shapes) all += ShapeToString(x) + " ";
      return InvalidArgument("shapes {}cannot be broadcast together", all);
    }
  }
  return out;
}

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  std::vector<int64_t> in_strides = StridesOf(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    strides[off + i] = in[i] == 1 ? 0 : in_strides[i];
  }
  return strides;
}

BroadcastIterator::BroadcastIterator(const Shape& out, std::vector<std::vector<int64_t>> strides)
    : out_(out), strides_(std::move(strides)), index_(out.size(), 0), offsets_(strides_.size(), 0) {}

void BroadcastIterator::Seek(int64_t linear) {
  std::fill(offsets_.begin(), offsets_.end(), 0);
  for (int64_t d = static_cast<int64_t>(out_.size()) - 1; d >= 0; --d) {
    int64_t dim = out_[d] == 0 ? 1 : out_[d];
    index_[d] = linear % dim;
    linear /= dim;
    for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] += index_[d] * strides_[k][d];
  }
}

void BroadcastIterator::Next() {
  for (int64_t d = static_cast<int64_t>(out_.size()) - 1; d >= 0; --d) {
    ++index_[d];
    for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] += strides_[k][d];
    if (index_[d] < out_[d]) return;
    for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] -= index_[d] * strides_[k][d];
    index_[d] = 0;
  }
}

}  // namespace inferd::cpu
