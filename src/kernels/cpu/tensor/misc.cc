// Trilu, CumSum, ReverseSequence and Unique.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernels/cpu/tensor/register.h"
#include "kernels/cpu/tensor/tensor_util.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/string_index.h"

namespace inferd::cpu {
namespace {

class TriluKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    upper_ = info.node().GetInt("upper", 1) != 0;
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    if (in.rank() < 2) return InvalidArgument("Trilu input must have rank >= 2");
    int64_t k = 0;
    if (const Tensor* kt = ctx.Input(1)) {
      if (kt->NumElements() != 1 || !IsInteger(kt->dtype())) {
        return InvalidArgument("Trilu k must be an integer scalar, got {}", kt->DebugString());
      }
      k = kt->GetAsInt64(0);
    }
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), in.shape());
    const int64_t rows = in.dim(in.rank() - 2), cols = in.dim(in.rank() - 1);
    k = std::clamp<int64_t>(k, -(rows + 1), cols + 1);  // beyond that nothing changes
    const int64_t mats = rows * cols == 0 ? 0 : in.NumElements() / (rows * cols);
    const size_t elem = SizeOf(in.dtype());
    const uint8_t* src = static_cast<const uint8_t*>(in.raw_data());
    uint8_t* dst = static_cast<uint8_t*>(out->raw_data());  // zero-initialised
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        // Kept columns: j >= i + k (upper) or j <= i + k (lower).
        int64_t j0 = upper_ ? std::clamp<int64_t>(i + k, 0, cols) : 0;
        int64_t j1 = upper_ ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
        if (j1 <= j0) continue;
        const int64_t base = (m * rows + i) * cols;
        std::memcpy(dst + (base + j0) * elem, src + (base + j0) * elem, (j1 - j0) * elem);
      }
    }
    return Status::Ok();
  }

 private:
  bool upper_ = true;
};

class CumSumKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    exclusive_ = info.node().GetInt("exclusive", 0) != 0;
    reverse_ = info.node().GetInt("reverse", 0) != 0;
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    const Tensor& axis_t = *ctx.Input(1);
    if (axis_t.NumElements() != 1) return InvalidArgument("CumSum axis must be a scalar");
    RETURN_IF_ERROR(CheckIndexType(axis_t, "CumSum axis"));
    if (in.rank() == 0) return InvalidArgument("CumSum input must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_t.GetAsInt64(0), in.rank()));
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), in.shape());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= in.dim(d);
    for (int64_t d = axis + 1; d < in.rank(); ++d) inner *= in.dim(d);
    const int64_t n = in.dim(axis);
    auto run = [&](auto tag, auto acc_tag) {
      using T = decltype(tag);
      using A = decltype(acc_tag);
      const T* x = in.data<T>();
      T* y = out->data<T>();
      ParallelFor(outer * inner, 64, [&](int64_t b, int64_t e) {
        for (int64_t w = b; w < e; ++w) {
          const int64_t base = (w / inner) * n * inner + w % inner;
          A acc = A(0);
          for (int64_t s = 0; s < n; ++s) {
            const int64_t t = reverse_ ? n - 1 - s : s;
            const int64_t off = base + t * inner;
            A v = static_cast<A>(x[off]);
            if (exclusive_) {
              y[off] = static_cast<T>(acc);
              acc = static_cast<A>(acc + v);
            } else {
              acc = static_cast<A>(acc + v);
              y[off] = static_cast<T>(acc);
            }
          }
        }
      });
    };
    switch (in.dtype()) {
      case DataType::kFloat32:
        run(float{}, float{});
        break;
      case DataType::kFloat64:
        run(double{}, double{});
        break;
      case DataType::kInt32:
        run(int32_t{}, int32_t{});
        break;
      case DataType::kInt64:
        run(int64_t{}, int64_t{});
        break;
      case DataType::kUInt32:
        run(uint32_t{}, uint32_t{});
        break;
      case DataType::kUInt64:
        run(uint64_t{}, uint64_t{});
        break;
      case DataType::kFloat16:
        run(Float16{}, float{});
        break;
      case DataType::kBFloat16:
        run(BFloat16{}, float{});
        break;
      default:
        return InvalidArgument("CumSum does not support {}", DataTypeName(in.dtype()));
    }
    return Status::Ok();
  }

 private:
  bool exclusive_ = false;
  bool reverse_ = false;
};

class ReverseSequenceKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    batch_axis_ = info.node().GetInt("batch_axis", 1);
    time_axis_ = info.node().GetInt("time_axis", 0);
    if (!((batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0))) {
      return InvalidArgument("ReverseSequence batch_axis/time_axis must be 0/1 or 1/0, got {}/{}",
                             batch_axis_, time_axis_);
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& in = *ctx.Input(0);
    const Tensor& lens_t = *ctx.Input(1);
    if (in.rank() < 2) return InvalidArgument("ReverseSequence input must have rank >= 2");
    const int64_t batch = in.dim(batch_axis_), time = in.dim(time_axis_);
    ASSIGN_OR_RETURN(std::vector<int64_t> lens, ReadIntList(lens_t, "sequence_lens"));
    if (static_cast<int64_t>(lens.size()) != batch) {
      return InvalidArgument("sequence_lens has {} entries for batch size {}", lens.size(), batch);
    }
    for (int64_t l : lens) {
      if (l < 0 || l > time) {
        return InvalidArgument("sequence length {} is outside [0, {}]", l, time);
      }
    }
    Tensor* out = ctx.AllocateOutput(0, in.dtype(), in.shape());
    const std::vector<int64_t> st = StridesOf(in.shape());
    const int64_t elem = static_cast<int64_t>(SizeOf(in.dtype()));
    const int64_t inner = st[1] * elem;  // bytes of one [2:] block
    const int64_t bs = st[batch_axis_] * elem, ts = st[time_axis_] * elem;
    const uint8_t* src = static_cast<const uint8_t*>(in.raw_data());
    uint8_t* dst = static_cast<uint8_t*>(out->raw_data());
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < time; ++t) {
        const int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
        std::memcpy(dst + b * bs + t * ts, src + b * bs + from * ts, inner);
      }
    }
    return Status::Ok();
  }

 private:
  int64_t batch_axis_ = 1, time_axis_ = 0;
};

// Unique: unique elements (no axis: of the flattened input) or unique slices along an axis, sorted
// ascending (lexicographically for slices) or in order of first occurrence.
class UniqueKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    has_axis_ = info.node().HasAttribute("axis");
    axis_ = info.node().GetInt("axis", 0);
    sorted_ = info.node().GetInt("sorted", 1) != 0;
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.Input(0);
    int64_t axis = 0;
    Shape shape = {x.NumElements()};
    if (has_axis_) {
      if (x.rank() == 0) return InvalidArgument("Unique with an axis needs rank >= 1");
      ASSIGN_OR_RETURN(axis, NormalizeAxis(axis_, x.rank()));
      shape = x.shape();
    }
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d) inner *= shape[d];
    const int64_t dim = shape[axis];
    // Slice j's elements in (outer, inner) order compare lexicographically.
    auto less = [&](auto tag) {
      using T = decltype(tag);
      using C =
          std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
      const T* p = x.data<T>();
      return [=](int64_t a, int64_t b) {
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            C va = static_cast<C>(p[(o * dim + a) * inner + i]);
            C vb = static_cast<C>(p[(o * dim + b) * inner + i]);
            if (va < vb) return -1;
            if (vb < va) return 1;
          }
        }
        return 0;
      };
    };
    std::vector<int64_t> order(dim);
    std::iota(order.begin(), order.end(), 0);
    std::vector<int64_t> group_of(dim);  // slice → unique id (in sorted order for now)
    std::vector<int64_t> firsts, counts;
    Status st = DispatchAll(
        x.dtype(),
        [&](auto tag) -> Status {
          auto cmp = less(tag);
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
          for (int64_t k = 0; k < dim; ++k) {
            if (k == 0 || cmp(order[k - 1], order[k]) != 0) {
              firsts.push_back(order[k]);
              counts.push_back(0);
            }
            group_of[order[k]] = static_cast<int64_t>(firsts.size()) - 1;
            ++counts.back();
          }
          return Status::Ok();
        },
        [&] { return InvalidArgument("Unique does not support {}", DataTypeName(x.dtype())); });
    RETURN_IF_ERROR(st);
    const int64_t u = static_cast<int64_t>(firsts.size());
    std::vector<int64_t> rank(u);  // sorted id → output position
    std::iota(rank.begin(), rank.end(), 0);
    if (!sorted_) {
      std::vector<int64_t> by_first(u);
      std::iota(by_first.begin(), by_first.end(), 0);
      std::sort(by_first.begin(), by_first.end(),
                [&](int64_t a, int64_t b) { return firsts[a] < firsts[b]; });
      for (int64_t k = 0; k < u; ++k) rank[by_first[k]] = k;
    }
    std::vector<int64_t> out_first(u), out_count(u);
    for (int64_t g = 0; g < u; ++g) {
      out_first[rank[g]] = firsts[g];
      out_count[rank[g]] = counts[g];
    }
    Shape y_shape = shape;
    y_shape[axis] = u;
    Tensor* y = ctx.AllocateOutput(0, x.dtype(), y_shape);
    const size_t block = inner * SizeOf(x.dtype());
    const uint8_t* src = static_cast<const uint8_t*>(x.raw_data());
    uint8_t* dst = static_cast<uint8_t*>(y->raw_data());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < u; ++k) {
        std::memcpy(dst + (o * u + k) * block, src + (o * dim + out_first[k]) * block, block);
      }
    }
    auto emit = [&](size_t i, const std::vector<int64_t>& v) {
      if (!ctx.OutputRequested(i)) return;
      Tensor* t = ctx.AllocateOutput(i, DataType::kInt64, {static_cast<int64_t>(v.size())});
      std::copy(v.begin(), v.end(), t->data<int64_t>());
    };
    std::vector<int64_t> inverse(dim);
    for (int64_t j = 0; j < dim; ++j) inverse[j] = rank[group_of[j]];
    emit(1, out_first);
    emit(2, inverse);
    emit(3, out_count);
    return Status::Ok();
  }

 private:
  bool has_axis_ = false;
  int64_t axis_ = 0;
  bool sorted_ = true;
};

}  // namespace

void RegisterTensorMiscKernels(KernelRegistry& r) {
  r.Add("Trilu", 14, kOpsetMax, AllTypes(), MakeKernel<TriluKernel>());
  r.Add("CumSum", 11, kOpsetMax, NumericTypes(), MakeKernel<CumSumKernel>());
  r.Add("ReverseSequence", 10, kOpsetMax, {DataType::kString},
        OnStringIndices(MakeKernel<ReverseSequenceKernel>(), {0}));
  r.Add("ReverseSequence", 10, kOpsetMax, AllTypes(), MakeKernel<ReverseSequenceKernel>());
  r.Add("Unique", 11, kOpsetMax, AllTypes(), MakeKernel<UniqueKernel>());
}

}  // namespace inferd::cpu
