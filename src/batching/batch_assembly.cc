#include "batching/batch_assembly.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace inferd::batching {
namespace {

// Bytes between consecutive elements of the buffer: a string tensor's buffer is an array of
// std::string objects (common/tensor.h), which are copied by assignment, never by memcpy.
size_t ElementStride(DataType t) {
  return t == DataType::kString ? sizeof(std::string) : SizeOf(t);
}

// Copies n elements (consecutive in both buffers).
void CopyElements(const uint8_t* src, uint8_t* dst, int64_t n, size_t esize, bool strings) {
  if (strings) {
    std::copy_n(reinterpret_cast<const std::string*>(src), n, reinterpret_cast<std::string*>(dst));
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n) * esize);
  }
}

// Recursive strided copy of `region` elements; the innermost dim is one memcpy.
void CopyBlock(const uint8_t* src, const int64_t* src_strides, uint8_t* dst,
               const int64_t* dst_strides, const int64_t* region, size_t rank, size_t esize,
               bool strings) {
  if (rank == 1) {
    CopyElements(src, dst, region[0], esize, strings);
    return;
  }
  for (int64_t i = 0; i < region[0]; ++i) {
    CopyBlock(src + i * src_strides[0] * esize, src_strides + 1, dst + i * dst_strides[0] * esize,
              dst_strides + 1, region + 1, rank - 1, esize, strings);
  }
}

void Fill(Tensor* t, double value) {
  DispatchAll(
      t->dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        T v;
        if constexpr (std::is_same_v<T, bool>) {
          v = value != 0.0;
        } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          v = T(static_cast<float>(value));
        } else {
          v = static_cast<T>(value);
        }
        std::fill_n(t->data<T>(), t->NumElements(), v);
      },
      [] {});
}

}  // namespace

Status CopyRegion(const Tensor& src, const Shape& region, Tensor* dst, int64_t dst_row) {
  if (src.dtype() != dst->dtype()) return InvalidArgument("CopyRegion: dtype mismatch");
  if (src.rank() != dst->rank() || static_cast<int64_t>(region.size()) != src.rank() ||
      src.rank() < 1) {
    return InvalidArgument("CopyRegion: rank mismatch");
  }
  for (size_t d = 0; d < region.size(); ++d) {
    const int64_t dst_limit = d == 0 ? dst->dim(0) - dst_row : dst->dim(d);
    if (region[d] < 0 || region[d] > src.dim(d) || region[d] > dst_limit || dst_row < 0) {
      return InvalidArgument("CopyRegion: region {} does not fit source {} / destination {}",
                             ShapeToString(region), ShapeToString(src.shape()),
                             ShapeToString(dst->shape()));
    }
  }
  if (NumElements(region) == 0) return Status::Ok();
  const auto src_strides = StridesOf(src.shape());
  const auto dst_strides = StridesOf(dst->shape());
  const size_t esize = ElementStride(src.dtype());
  auto* out = static_cast<uint8_t*>(dst->raw_data()) + dst_row * dst_strides[0] * esize;
  CopyBlock(static_cast<const uint8_t*>(src.raw_data()), src_strides.data(), out,
            dst_strides.data(), region.data(), region.size(), esize, src.is_string());
  return Status::Ok();
}

StatusOr<Tensor> ConcatBatch(std::span<const Tensor> parts, const ConcatOptions& options) {
  std::vector<const Tensor*> ptrs;
  ptrs.reserve(parts.size());
  for (const Tensor& p : parts) ptrs.push_back(&p);
  return ConcatBatch(std::span<const Tensor* const>(ptrs), options);
}

StatusOr<Tensor> ConcatBatch(std::span<const Tensor* const> parts, const ConcatOptions& options) {
  if (parts.empty()) return InvalidArgument("ConcatBatch: no tensors");
  const Tensor& first = *parts[0];
  if (first.rank() < 1) return InvalidArgument("ConcatBatch: tensors need a batch dimension");
  if (ElementStride(first.dtype()) == 0) {
    return InvalidArgument("ConcatBatch: unsupported element type {}", DataTypeName(first.dtype()));
  }
  Shape out_shape = first.shape();
  out_shape[0] = 0;
  bool padded = false;
  for (const Tensor* pp : parts) {
    const Tensor& p = *pp;
    if (p.dtype() != first.dtype()) {
      return InvalidArgument("ConcatBatch: element type {} differs from {}",
                             DataTypeName(p.dtype()), DataTypeName(first.dtype()));
    }
    if (p.rank() != first.rank()) {
      return InvalidArgument("ConcatBatch: shape {} has a different rank than {}",
                             ShapeToString(p.shape()), ShapeToString(first.shape()));
    }
    out_shape[0] += p.dim(0);
    for (int64_t d = 1; d < p.rank(); ++d) {
      if (p.dim(d) == out_shape[d]) continue;
      if (!options.allow_ragged) {
        return InvalidArgument("ConcatBatch: shape {} differs from {} after the batch dimension",
                               ShapeToString(p.shape()), ShapeToString(first.shape()));
      }
      out_shape[d] = std::max(out_shape[d], p.dim(d));
    }
  }
  for (const Tensor* pp : parts) {
    const Tensor& p = *pp;
    for (int64_t d = 1; d < p.rank(); ++d) padded |= p.dim(d) != out_shape[d];
  }
  if (parts.size() == 1 && !padded) return first;
  Tensor out = Tensor::Allocate(first.dtype(), out_shape);
  if (!padded) {
    // Same trailing dims everywhere: the parts are consecutive row blocks of the output (tensors
    // are dense row-major), one memcpy each. This is the common case; the strided copy below
    // cost more in bookkeeping than in copying for small batch-1 requests.
    auto* dst = static_cast<uint8_t*>(out.raw_data());
    const size_t esize = ElementStride(first.dtype());
    for (const Tensor* pp : parts) {
      const Tensor& p = *pp;
      if (p.NumElements() == 0) continue;
      CopyElements(static_cast<const uint8_t*>(p.raw_data()), dst, p.NumElements(), esize,
                   p.is_string());
      dst += static_cast<size_t>(p.NumElements()) * esize;
    }
    return out;
  }
  // Strings pad with the empty string (pad_value is a number).
  if (options.pad_value != 0.0 && !out.is_string()) Fill(&out, options.pad_value);
  int64_t row = 0;
  for (const Tensor* pp : parts) {
    const Tensor& p = *pp;
    RETURN_IF_ERROR(CopyRegion(p, p.shape(), &out, row));
    row += p.dim(0);
  }
  return out;
}

namespace {
// The piece row counts of a split: none negative, summing to the batch's rows.
Status CheckSplitRows(const Tensor& batched, std::span<const int64_t> rows) {
  int64_t total = 0;
  for (int64_t r : rows) {
    if (r < 0) return InvalidArgument("SplitBatch: negative row count");
    total += r;
  }
  if (total != batched.dim(0)) {
    return InvalidArgument("SplitBatch: rows sum to {} but the batch has {} (shape {})", total,
                           batched.dim(0), ShapeToString(batched.shape()));
  }
  return Status::Ok();
}
}  // namespace

StatusOr<std::vector<Tensor>> SplitBatch(const Tensor& batched, std::span<const int64_t> rows,
                                         std::span<const Shape> shapes) {
  if (batched.rank() < 1) return InvalidArgument("SplitBatch: tensor has no batch dimension");
  if (!shapes.empty() && shapes.size() != rows.size()) {
    return InvalidArgument("SplitBatch: {} shapes for {} pieces", shapes.size(), rows.size());
  }
  RETURN_IF_ERROR(CheckSplitRows(batched, rows));
  std::vector<Shape> targets;
  for (size_t i = 0; i < rows.size(); ++i) {
    Shape s = batched.shape();
    s[0] = rows[i];
    if (!shapes.empty()) {
      const Shape& want = shapes[i];
      if (static_cast<int64_t>(want.size()) != batched.rank() || want[0] != rows[i]) {
        return InvalidArgument("SplitBatch: shape {} for piece {} does not match {} rows of {}",
                               ShapeToString(want), i, rows[i], ShapeToString(batched.shape()));
      }
      for (size_t d = 1; d < want.size(); ++d) {
        if (want[d] < 0) continue;
        if (want[d] > s[d]) {
          return InvalidArgument("SplitBatch: shape {} for piece {} exceeds the batch's {}",
                                 ShapeToString(want), i, ShapeToString(batched.shape()));
        }
        s[d] = want[d];
      }
    }
    targets.push_back(std::move(s));
  }
  std::vector<Tensor> pieces;
  if (rows.size() == 1 && targets[0] == batched.shape()) {
    pieces.push_back(batched);
    return pieces;
  }
  const auto strides = StridesOf(batched.shape());
  const size_t esize = ElementStride(batched.dtype());
  int64_t row = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Tensor piece = Tensor::Allocate(batched.dtype(), targets[i]);
    const auto* base = static_cast<const uint8_t*>(batched.raw_data());
    if (std::equal(targets[i].begin() + 1, targets[i].end(), batched.shape().begin() + 1)) {
      // Not cropped: the piece is a contiguous block of rows.
      if (piece.NumElements() > 0) {
        CopyElements(base + row * strides[0] * esize, static_cast<uint8_t*>(piece.raw_data()),
                     piece.NumElements(), esize, piece.is_string());
      }
      pieces.push_back(std::move(piece));
      row += rows[i];
      continue;
    }
    // View the rows of this piece, then copy its leading corner.
    Shape view_shape = batched.shape();
    view_shape[0] = rows[i];
    Tensor rows_view = Tensor::View(batched.dtype(), view_shape,
                                    const_cast<uint8_t*>(base) + row * strides[0] * esize);
    RETURN_IF_ERROR(CopyRegion(rows_view, targets[i], &piece, 0));
    pieces.push_back(std::move(piece));
    row += rows[i];
  }
  return pieces;
}

}  // namespace inferd::batching

namespace inferd::batching {

StatusOr<std::vector<Tensor>> SplitBatchShared(const Tensor& batched,
                                               std::span<const int64_t> rows) {
  if (batched.rank() < 1) return InvalidArgument("SplitBatch: tensor has no batch dimension");
  if (!batched.owns_data()) {
    return InvalidArgument("SplitBatchShared: the batch does not own its buffer");
  }
  RETURN_IF_ERROR(CheckSplitRows(batched, rows));
  std::vector<Tensor> pieces;
  pieces.reserve(rows.size());
  if (rows.size() == 1) {
    pieces.push_back(batched);
    return pieces;
  }
  // One holder for the batch: every piece's owner is an aliasing pointer to it, so the batch's
  // buffer lives until the last piece is gone (the responses are encoded later, on other threads).
  auto holder = std::make_shared<const Tensor>(batched);
  const size_t row_bytes = static_cast<size_t>(batched.dim(0) == 0 ? 0
                                               : batched.NumElements() / batched.dim(0)) *
                           ElementStride(batched.dtype());
  auto* base = static_cast<uint8_t*>(const_cast<void*>(holder->raw_data()));
  int64_t row = 0;
  for (int64_t r : rows) {
    Shape shape = batched.shape();
    shape[0] = r;
    void* data = base + static_cast<size_t>(row) * row_bytes;
    pieces.push_back(Tensor::Wrap(batched.dtype(), std::move(shape), data,
                                  std::shared_ptr<void>(holder, data)));
    row += r;
  }
  return pieces;
}

}  // namespace inferd::batching
