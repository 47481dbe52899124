#include "kernels/cpu/tensor/tensor_util.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

template <typename T>
void StridedCopyTyped(const T* in, int64_t in_offset, const Shape& shape,
                      const std::vector<int64_t>& strides, T* out) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) {
    out[0] = in[in_offset];
    return;
  }
  const int64_t inner = shape[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) rows *= shape[d];
  if (rows == 0 || inner == 0) return;
  ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
              [&](int64_t begin, int64_t end) {
                std::vector<int64_t> idx(rank, 0);
                int64_t off = in_offset;
                {
                  int64_t r = begin;
                  for (int64_t d = rank - 2; d >= 0; --d) {
                    idx[d] = r % shape[d];
                    r /= shape[d];
                    off += idx[d] * strides[d];
                  }
                }
                for (int64_t row = begin; row < end; ++row) {
                  T* o = out + row * inner;
                  const T* src = in + off;
                  if (inner_stride == 1) {
                    std::memcpy(o, src, sizeof(T) * inner);
                  } else if (inner_stride == 0) {
                    std::fill(o, o + inner, *src);
                  } else {
                    for (int64_t i = 0; i < inner; ++i) o[i] = src[i * inner_stride];
                  }
                  for (int64_t d = rank - 2; d >= 0; --d) {
                    off += strides[d];
                    if (++idx[d] < shape[d]) break;
                    off -= idx[d] * strides[d];
                    idx[d] = 0;
                  }
                }
              });
}

}  // namespace

void StridedCopy(const Tensor& in, int64_t in_offset, const std::vector<int64_t>& in_strides,
                 Tensor* out) {
  if (out->NumElements() == 0) return;
  // Drop size-1 dims and merge dims that are contiguous in both views, so the inner loop is long.
  Shape shape;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < out->shape().size(); ++d) {
    int64_t n = out->shape()[d];
    if (n == 1) continue;
    if (!shape.empty() && strides.back() == in_strides[d] * n) {
      shape.back() *= n;
      strides.back() = in_strides[d];
      continue;
    }
    shape.push_back(n);
    strides.push_back(in_strides[d]);
  }
  DispatchBySize(
      in.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        StridedCopyTyped<T>(static_cast<const T*>(in.raw_data()), in_offset, shape, strides,
                            static_cast<T*>(out->raw_data()));
      },
      [] {});
}

Status CheckIndexType(const Tensor& t, const char* what) {
  if (t.dtype() != DataType::kInt32 && t.dtype() != DataType::kInt64) {
    return InvalidArgument("{} must be int32 or int64, got {}", what, DataTypeName(t.dtype()));
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> ReadIndices(const Tensor& indices, int64_t dim, const char* what) {
  RETURN_IF_ERROR(CheckIndexType(indices, what));
  const int64_t n = indices.NumElements();
  std::vector<int64_t> out(static_cast<size_t>(n));
  auto read = [&](const auto* p) -> Status {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = static_cast<int64_t>(p[i]);
      if (v < -dim || v >= dim) {
        return InvalidArgument("{} value {} is out of range [{}, {}]", what, v, -dim, dim - 1);
      }
      out[i] = v < 0 ? v + dim : v;
    }
    return Status::Ok();
  };
  if (indices.dtype() == DataType::kInt32) {
    RETURN_IF_ERROR(read(indices.data<int32_t>()));
  } else {
    RETURN_IF_ERROR(read(indices.data<int64_t>()));
  }
  return out;
}

StatusOr<std::vector<int64_t>> ReadIntList(const Tensor& t, const char* what) {
  if (t.rank() > 1) {
    return InvalidArgument("{} must be a 1-D tensor, got shape {}", what, ShapeToString(t.shape()));
  }
  if (!IsInteger(t.dtype())) {
    return InvalidArgument("{} must be an integer tensor, got {}", what, DataTypeName(t.dtype()));
  }
  return t.ToInt64Vector();
}

StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  out.reserve(axes.size());
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank) {
      return InvalidArgument("axis {} is out of range for rank {}", a, rank);
    }
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      return InvalidArgument("axis {} is repeated", a);
    }
    out.push_back(n);
  }
  return out;
}

}  // namespace inferd::cpu
