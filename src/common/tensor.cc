#include "common/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace inferd {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::vector<int64_t> StridesOf(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

namespace {

// An owned array of n constructed std::string objects, destroyed with the last owner.
void AllocateStrings(size_t n, void** data, std::shared_ptr<void>* owner) {
  void* p = std::aligned_alloc(Tensor::kAlignment, std::max<size_t>(
      (n * sizeof(std::string) + Tensor::kAlignment - 1) / Tensor::kAlignment * Tensor::kAlignment,
      Tensor::kAlignment));
  if (p == nullptr) throw std::bad_alloc();
  auto* s = static_cast<std::string*>(p);
  for (size_t i = 0; i < n; ++i) new (s + i) std::string();
  *owner = std::shared_ptr<void>(p, [n](void* q) {
    auto* strings = static_cast<std::string*>(q);
    for (size_t i = 0; i < n; ++i) strings[i].~basic_string();
    std::free(q);
  });
  *data = p;
}

}  // namespace

Tensor Tensor::Allocate(DataType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  if (dtype == DataType::kString) {
    AllocateStrings(static_cast<size_t>(std::max<int64_t>(t.NumElements(), 0)), &t.data_,
                    &t.owner_);
    return t;
  }
  size_t bytes = t.ByteSize();
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::View(DataType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::Wrap(DataType dtype, Shape shape, void* data, std::shared_ptr<void> owner) {
  Tensor t = View(dtype, std::move(shape), data);
  t.owner_ = std::move(owner);
  return t;
}

StatusOr<Tensor> Tensor::Reshaped(Shape shape) const {
  if (inferd::NumElements(shape) != NumElements()) {
    return InvalidArgument("cannot reshape {} to {}", ShapeToString(shape_), ShapeToString(shape));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

StatusOr<Tensor> Tensor::FromStrings(std::vector<std::string> values, Shape shape) {
  if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
  if (inferd::NumElements(shape) != static_cast<int64_t>(values.size())) {
    return InvalidArgument("{} strings do not fill shape {}", values.size(), ShapeToString(shape));
  }
  Tensor t = Allocate(DataType::kString, std::move(shape));
  std::string* s = t.data<std::string>();
  for (size_t i = 0; i < values.size(); ++i) s[i] = std::move(values[i]);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = Allocate(dtype_, shape_);
  if (dtype_ == DataType::kString) {
    std::copy_n(data<std::string>(), NumElements(), t.data<std::string>());
    return t;
  }
  if (ByteSize() > 0) std::memcpy(t.data_, data_, ByteSize());
  return t;
}

double Tensor::GetAsDouble(int64_t i) const {
  return DispatchAll(
      dtype_, [&](auto tag) { return static_cast<double>(static_cast<const decltype(tag)*>(data_)[i]); },
      [] { return 0.0; });
}

int64_t Tensor::GetAsInt64(int64_t i) const {
  return DispatchAll(
      dtype_,
      [&](auto tag) -> int64_t {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          return static_cast<int64_t>(static_cast<float>(static_cast<const T*>(data_)[i]));
        } else {
          return static_cast<int64_t>(static_cast<const T*>(data_)[i]);
        }
      },
      [] { return int64_t{0}; });
}

StatusOr<std::vector<int64_t>> Tensor::ToInt64Vector() const {
  if (!IsInteger(dtype_)) {
    return InvalidArgument("expected an integer tensor, got {}", DataTypeName(dtype_));
  }
  std::vector<int64_t> out(static_cast<size_t>(NumElements()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = GetAsInt64(static_cast<int64_t>(i));
  return out;
}

size_t Tensor::StringBytes() const {
  if (dtype_ != DataType::kString || data_ == nullptr) return 0;
  size_t n = 0;
  for (const std::string& s : values<std::string>()) n += s.size();
  return n;
}

std::string Tensor::DebugString() const {
  return fmt::format("{}{}", DataTypeName(dtype_), ShapeToString(shape_));
}

}  // namespace inferd
