#include "kernels/cpu/util/broadcast.h"

#include <algorithm>
#include <string>
#include <utility>

namespace inferd::cpu {

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

StatusOr<Shape> BroadcastOutputShape(const char* op, const std::vector<const Tensor*>& inputs) {
  std::vector<Shape> shapes;
  shapes.reserve(inputs.size());
  for (const Tensor* t : inputs) shapes.push_back(t->shape());
  StatusOr<Shape> out = BroadcastShapes(shapes);
  if (!out.ok()) return out.status().WithContext(op);
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

BroadcastPlan PlanBroadcast(const Shape& out, const std::vector<Shape>& inputs) {
  const size_t n = inputs.size();
  std::vector<std::vector<int64_t>> full(n);
  for (size_t k = 0; k < n; ++k) full[k] = BroadcastStrides(inputs[k], out);

  BroadcastPlan plan;
  plan.total = NumElements(out);
  plan.strides.assign(n, {});
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;  // contributes nothing to any offset
    bool merge = !plan.dims.empty();
    for (size_t k = 0; merge && k < n; ++k) {
      // Merging outer dim (last kept) with d requires outer stride == stride[d] * out[d].
      merge = plan.strides[k].back() == full[k][d] * out[d];
    }
    if (merge) {
      plan.dims.back() *= out[d];
      for (size_t k = 0; k < n; ++k) plan.strides[k].back() = full[k][d];
    } else {
      plan.dims.push_back(out[d]);
      for (size_t k = 0; k < n; ++k) plan.strides[k].push_back(full[k][d]);
    }
  }
  if (plan.dims.empty()) {  // scalar output or all dims 1
    plan.dims.push_back(1);
    for (size_t k = 0; k < n; ++k) plan.strides[k].push_back(0);
  }
  return plan;
}

BroadcastIterator::BroadcastIterator(BroadcastPlan plan)
    : plan_(std::move(plan)), index_(plan_.dims.size(), 0), offsets_(plan_.strides.size(), 0) {}

void BroadcastIterator::Seek(int64_t linear) {
  std::fill(offsets_.begin(), offsets_.end(), 0);
  const Shape& dims = plan_.dims;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    int64_t dim = dims[d] == 0 ? 1 : dims[d];
    index_[d] = linear % dim;
    linear /= dim;
    for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] += index_[d] * plan_.strides[k][d];
  }
}

void BroadcastIterator::Next() {
  const Shape& dims = plan_.dims;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    ++index_[d];
    for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] += plan_.strides[k][d];
    if (index_[d] < dims[d]) return;
    for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] -= index_[d] * plan_.strides[k][d];
    index_[d] = 0;
  }
}

}  // namespace inferd::cpu
