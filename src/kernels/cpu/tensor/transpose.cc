// Transpose and the ops that are a transpose of a reshaped view (DepthToSpace, SpaceToDepth).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernels/cpu/tensor/register.h"
#include "kernels/cpu/tensor/tensor_util.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/string_index.h"

namespace inferd::cpu {
namespace {

// Swaps the input's contiguous dim (at output position j) with the output's contiguous dim (input
// dim q) in square tiles, so that both reads and writes stay within a few cache lines.
template <typename T>
void TiledTranspose(const T* in, T* out, const Shape& in_shape, const std::vector<int64_t>& perm) {
  constexpr int64_t kTile = 16;
  const int64_t r = static_cast<int64_t>(in_shape.size());
  Shape out_shape(r);
  for (int64_t i = 0; i < r; ++i) out_shape[i] = in_shape[perm[i]];
  std::vector<int64_t> is = StridesOf(in_shape), os = StridesOf(out_shape);
  const int64_t j = std::find(perm.begin(), perm.end(), r - 1) - perm.begin();
  const int64_t q = perm[r - 1];
  const int64_t a_size = in_shape[r - 1], b_size = in_shape[q];
  const int64_t in_b_stride = is[q], out_a_stride = os[j];
  std::vector<int64_t> outer_pos;  // output positions of the remaining dims
  for (int64_t i = 0; i < r - 1; ++i) {
    if (i != j) outer_pos.push_back(i);
  }
  int64_t outer = 1;
  for (int64_t p : outer_pos) outer *= out_shape[p];
  const int64_t ta = (a_size + kTile - 1) / kTile, tb = (b_size + kTile - 1) / kTile;
  const int64_t items = outer * ta * tb;
  ParallelFor(items, 16, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t t_b = item % tb;
      int64_t t_a = (item / tb) % ta;
      int64_t o = item / (tb * ta);
      int64_t in_base = 0, out_base = 0;
      for (int64_t k = static_cast<int64_t>(outer_pos.size()) - 1; k >= 0; --k) {
        int64_t p = outer_pos[k];
        int64_t idx = o % out_shape[p];
        o /= out_shape[p];
        out_base += idx * os[p];
        in_base += idx * is[perm[p]];
      }
      const int64_t a0 = t_a * kTile, a1 = std::min(a0 + kTile, a_size);
      const int64_t b0 = t_b * kTile, b1 = std::min(b0 + kTile, b_size);
      for (int64_t a = a0; a < a1; ++a) {
        T* dst = out + out_base + a * out_a_stride;
        const T* src = in + in_base + a;
        for (int64_t b = b0; b < b1; ++b) dst[b] = src[b * in_b_stride];
      }
    }
  });
}

}  // namespace

// Transposes `in` by `perm` (a valid permutation) into `out`, allocated with the permuted shape.
void TransposeInto(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out) {
  if (in.NumElements() == 0) return;
  // Drop size-1 dims, then merge runs of input dims that stay adjacent and in order in the output.
  std::vector<int64_t> q;
  for (int64_t p : perm) {
    if (in.dim(p) != 1) q.push_back(p);
  }
  std::vector<std::vector<int64_t>> groups;  // in output order
  for (int64_t p : q) {
    if (!groups.empty() && groups.back().back() + 1 == p) {
      groups.back().push_back(p);
    } else if (!groups.empty()) {
      // Input dims between groups that were size 1 don't break adjacency.
      int64_t last = groups.back().back();
      bool adjacent = p > last;
      for (int64_t d = last + 1; adjacent && d < p; ++d) adjacent = in.dim(d) == 1;
      if (adjacent) {
        groups.back().push_back(p);
      } else {
        groups.push_back({p});
      }
    } else {
      groups.push_back({p});
    }
  }
  const int64_t r = static_cast<int64_t>(groups.size());
  std::vector<int64_t> order(r);  // groups sorted by input position
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return groups[a][0] < groups[b][0]; });
  Shape in_shape(r);
  std::vector<int64_t> rank_of_group(r);
  for (int64_t i = 0; i < r; ++i) {
    int64_t size = 1;
    for (int64_t d : groups[order[i]]) size *= in.dim(d);
    in_shape[i] = size;
    rank_of_group[order[i]] = i;
  }
  std::vector<int64_t> new_perm(r);
  for (int64_t i = 0; i < r; ++i) new_perm[i] = rank_of_group[i];
  bool identity = true;
  for (int64_t i = 0; i < r; ++i) identity &= new_perm[i] == i;
  if (identity) {
    std::memcpy(out->raw_data(), in.raw_data(), in.ByteSize());
    return;
  }
  if (new_perm[r - 1] == r - 1) {
    std::vector<int64_t> is = StridesOf(in_shape), strides(r);
    Shape os(r);
    for (int64_t i = 0; i < r; ++i) {
      strides[i] = is[new_perm[i]];
      os[i] = in_shape[new_perm[i]];
    }
    Tensor out_view = *out;
    auto reshaped = out_view.Reshaped(os);
    if (reshaped.ok()) {
      Tensor v = *reshaped;
      StridedCopy(in, 0, strides, &v);
    }
    return;
  }
  DispatchBySize(
      in.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        TiledTranspose<T>(static_cast<const T*>(in.raw_data()), static_cast<T*>(out->raw_data()),
                          in_shape, new_perm);
      },
      [] {});
}

namespace {

class TransposeKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    has_perm_ = info.node().HasAttribute("perm");
    perm_ = info.node().GetInts("perm");
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    const int64_t r = in.rank();
    std::vector<int64_t> perm = perm_;
    if (!has_perm_) {
      perm.resize(r);
      for (int64_t i = 0; i < r; ++i) perm[i] = r - 1 - i;
    }
    if (static_cast<int64_t>(perm.size()) != r) {
      return InvalidArgument("Transpose perm has {} entries for rank {}", perm.size(), r);
    }
    std::vector<bool> seen(r, false);
    for (int64_t p : perm) {
      if (p < 0 || p >= r || seen[p]) {
        return InvalidArgument("Transpose perm is not a permutation of 0..{}", r - 1);
      }
      seen[p] = true;
    }
    Shape out_shape(r);
    for (int64_t i = 0; i < r; ++i) out_shape[i] = in.dim(perm[i]);
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), out_shape);
    TransposeInto(in, perm, out);
    return Status::Ok();
  }

 private:
  bool has_perm_ = false;
  std::vector<int64_t> perm_;
};

// DepthToSpace (DCR/CRD) and SpaceToDepth as a transpose of a 6-D view of the input.
class SpaceDepthKernel final : public OpKernel {
 public:
  explicit SpaceDepthKernel(bool to_space) : to_space_(to_space) {}
  Status Init(const KernelInfo& info) override {
    block_ = info.node().GetInt("blocksize", 0);
    if (block_ <= 0) return InvalidArgument("blocksize must be positive, got {}", block_);
    std::string mode = info.node().GetString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return InvalidArgument("unknown mode '{}'", mode);
    crd_ = mode == "CRD";
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    if (in.rank() != 4) return InvalidArgument("input must be 4-D, got {}", in.DebugString());
    const int64_t n = in.dim(0), c = in.dim(1), h = in.dim(2), w = in.dim(3), b = block_;
    Shape view, out_shape;
    std::vector<int64_t> perm;
    if (to_space_) {
      if (c % (b * b) != 0) {
        return InvalidArgument("channels {} are not divisible by blocksize^2 = {}", c, b * b);
      }
      int64_t c2 = c / (b * b);
      if (crd_) {
        view = {n, c2, b, b, h, w};
        perm = {0, 1, 4, 2, 5, 3};
      } else {
        view = {n, b, b, c2, h, w};
        perm = {0, 3, 4, 1, 5, 2};
      }
      out_shape = {n, c2, h * b, w * b};
    } else {
      if (h % b != 0 || w % b != 0) {
        return InvalidArgument("spatial dims {}x{} are not divisible by blocksize {}", h, w, b);
      }
      view = {n, c, h / b, b, w / b, b};
      perm = {0, 3, 5, 1, 2, 4};
      out_shape = {n, c * b * b, h / b, w / b};
    }
    ASSIGN_OR_RETURN(Tensor v, in.Reshaped(view));
    Shape tshape(6);
    for (int i = 0; i < 6; ++i) tshape[i] = view[perm[i]];
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), tshape);
    TransposeInto(v, perm, out);
    ASSIGN_OR_RETURN(Tensor o, out->Reshaped(out_shape));
    ctx.SetOutput(0, std::move(o));
    return Status::Ok();
  }

 private:
  bool to_space_;
  int64_t block_ = 0;
  bool crd_ = false;
};

template <bool kToSpace>
StatusOr<std::unique_ptr<OpKernel>> MakeSpaceDepth(const KernelInfo& info) {
  auto k = std::make_unique<SpaceDepthKernel>(kToSpace);
  RETURN_IF_ERROR(k->Init(info));
  return std::unique_ptr<OpKernel>(std::move(k));
}

}  // namespace

void RegisterTransposeKernels(KernelRegistry& r) {
  r.Add("Transpose", 1, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<TransposeKernel>()));
  r.Add("DepthToSpace", 1, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeSpaceDepth<true>, {0}));
  r.Add("SpaceToDepth", 1, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeSpaceDepth<false>, {0}));
  r.Add("Transpose", 1, kOpsetMax, AllTypes(), MakeKernel<TransposeKernel>());
  r.Add("DepthToSpace", 1, kOpsetMax, AllTypes(), MakeSpaceDepth<true>);
  r.Add("SpaceToDepth", 1, kOpsetMax, AllTypes(), MakeSpaceDepth<false>);
}

}  // namespace inferd::cpu
