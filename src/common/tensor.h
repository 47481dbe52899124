// Tensor: a typed, shaped, dense row-major buffer.
//
// A Tensor either owns its memory (shared, reference-counted, 64-byte aligned) or is a view into
// memory owned by someone else (a request body, an arena). Copying a Tensor is cheap and shares the
// buffer; use Clone() for a deep copy. Tensors are not synchronized: share them read-only.
//
// String tensors (DataType::kString, ONNX STRING, KServe BYTES): the buffer is an array of
// NumElements() constructed std::string objects (arbitrary bytes, embedded NULs allowed), so a
// kernel reads and writes them as data<std::string>()[i]. Allocate() constructs them (empty) and
// the owner's deleter destroys them; Clone() copies them element by element. SizeOf(kString) and
// ByteSize() are 0, which keeps strings out of every byte-wise path: the executor's arena (it
// places only outputs with a byte size, so string outputs always come from Allocate on the heap),
// memcpy-based kernels (they dispatch on SizeOf and reject size 0) and raw-byte serialisation.
// Numeric tensors pay one dtype comparison in Allocate and Clone, nothing else.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"

namespace inferd {

using Shape = std::vector<int64_t>;

// Product of dims (1 for a scalar shape {}).
int64_t NumElements(const Shape& shape);
// "[1, 3, 224, 224]"
std::string ShapeToString(const Shape& shape);
// Row-major strides in elements.
std::vector<int64_t> StridesOf(const Shape& shape);

class Tensor {
 public:
  static constexpr size_t kAlignment = 64;

  Tensor() = default;

  // Allocates an owned, zero-initialised buffer. Shape dims must be >= 0.
  static Tensor Allocate(DataType dtype, Shape shape);
  // Wraps external memory without taking ownership; `data` must outlive every copy of the view.
  static Tensor View(DataType dtype, Shape shape, void* data);
  // Wraps external memory kept alive by `owner`.
  static Tensor Wrap(DataType dtype, Shape shape, void* data, std::shared_ptr<void> owner);
  // A scalar (shape {}) or 1-D tensor holding the given values.
  template <typename T>
  static Tensor Scalar(T v) {
    Tensor t = Allocate(DataTypeOf<T>::value, {});
    *t.data<T>() = v;
    return t;
  }
  template <typename T>
  static Tensor FromVector(const std::vector<T>& v, Shape shape = {}) {
    if (shape.empty() && v.size() != 1) shape = {static_cast<int64_t>(v.size())};
    Tensor t = Allocate(DataTypeOf<T>::value, std::move(shape));
    for (size_t i = 0; i < v.size() && i < static_cast<size_t>(t.NumElements()); ++i) {
      t.data<T>()[i] = v[i];
    }
    return t;
  }

  // A string tensor holding `values` (shape {n} unless given; the element count must match).
  static StatusOr<Tensor> FromStrings(std::vector<std::string> values, Shape shape);

  bool defined() const { return dtype_ != DataType::kUndefined; }
  bool is_string() const { return dtype_ == DataType::kString; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t NumElements() const { return inferd::NumElements(shape_); }
  size_t ByteSize() const { return static_cast<size_t>(NumElements()) * SizeOf(dtype_); }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }
  template <typename T>
  std::span<const T> values() const {
    return {data<T>(), static_cast<size_t>(NumElements())};
  }

  // Same buffer, new shape with the same element count (checked).
  StatusOr<Tensor> Reshaped(Shape shape) const;
  // Deep copy into a new owned buffer (strings are copied element by element).
  Tensor Clone() const;
  // True if this tensor owns (or shares ownership of) its buffer.
  bool owns_data() const { return owner_ != nullptr; }

  // Reads element i converted to double / int64 whatever the dtype (slow; for small tensors such as
  // shapes, axes and scalars).
  double GetAsDouble(int64_t i) const;
  int64_t GetAsInt64(int64_t i) const;
  // All elements as int64 (for shape-like inputs). Fails for non-integer types.
  StatusOr<std::vector<int64_t>> ToInt64Vector() const;

  // "float32[1, 3, 224, 224]"
  std::string DebugString() const;
  // Sum of the string lengths of a string tensor (0 for other types): its payload size.
  size_t StringBytes() const;

 private:
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

}  // namespace inferd
