// INT4 weight-only kernels written by `inferd quantize --precision int4` (domain ai.inferd):
//
//   MatMulInt4(A[..., K] float32, B_q uint8 [N, ceil(K/2)], B_scale float32 [N, ceil(K/block)])
//     -> Y[..., N] = A · dequant(B)   attributes K, N, block_size
//   GatherInt4(data_q uint8 [V, ceil(D/2)], data_scale float32 [V, ceil(D/block)], indices)
//     -> Y[indices..., D] = dequant(data)[indices]   attributes D, block_size
//
// Weights are symmetric int4 per block of `block_size` consecutive values along K (MatMul) or D
// (Gather): value = (nibble - 8) * scale, low nibble first. MatMulInt4 dequantizes B into a
// per-call float32 buffer and runs oneDNN's f32 matmul; GatherInt4 dequantizes only the rows it
// gathers.
#include <dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>

#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/quantization/quant_util.h"
#include "kernels/cpu/quantization/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

inline float Nibble(const uint8_t* row, int64_t i) {
  uint8_t b = row[i >> 1];
  return static_cast<float>(static_cast<int>((i & 1) ? (b >> 4) : (b & 15)) - 8);
}

// Shared attribute/weight checks: packed [rows, ceil(cols/2)] and scales [rows, ceil(cols/block)].
Status CheckPacked(const Node& node, const Tensor* q, const Tensor* s, int64_t rows, int64_t cols,
                   int64_t block) {
  if (!q || !s || q->dtype() != DataType::kUInt8 || s->dtype() != DataType::kFloat32) {
    return InvalidArgument("{}: needs uint8 packed weights and float32 scales", node.Describe());
  }
  if (block < 2 || block % 2 != 0 || cols < 1 || rows < 1) {
    return InvalidArgument("{}: bad block_size {} or size {}x{}", node.Describe(), block, rows,
                           cols);
  }
  if (q->shape() != Shape{rows, (cols + 1) / 2} ||
      s->shape() != Shape{rows, (cols + block - 1) / block}) {
    return InvalidArgument("{}: packed weights {} / scales {} do not match {}x{} block {}",
                           node.Describe(), ShapeToString(q->shape()), ShapeToString(s->shape()),
                           rows, cols, block);
  }
  return Status::Ok();
}

class MatMulInt4Kernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    k_ = info.node().GetInt("K", 0);
    n_ = info.node().GetInt("N", 0);
    block_ = info.node().GetInt("block_size", 32);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.Input(0);
    RETURN_IF_ERROR(CheckPacked(node, ctx.Input(1), ctx.Input(2), n_, k_, block_));
    if (!a || a->dtype() != DataType::kFloat32 || a->rank() < 1 || a->shape().back() != k_) {
      return InvalidArgument("{}: A must be float32 [..., {}]", node.Describe(), k_);
    }
    Shape out = a->shape();
    out.back() = n_;
    Tensor* y = ctx.AllocateOutput(0, DataType::kFloat32, out);
    const int64_t m = a->NumElements() / k_;
    if (m == 0) return Status::Ok();
    // Dequantize B as [N, K] (the packing order: sequential writes); oneDNN reads it as the K x N
    // weights in "ba" layout.
    Tensor b = Tensor::Allocate(DataType::kFloat32, {n_, k_});
    const uint8_t* q = ctx.Input(1)->data<uint8_t>();
    const float* sc = ctx.Input(2)->data<float>();
    const int64_t row_bytes = (k_ + 1) / 2, blocks = (k_ + block_ - 1) / block_;
    float* bd = b.data<float>();
    ParallelFor(n_, 16, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const uint8_t* row = q + n * row_bytes;
        float* dst = bd + n * k_;
        for (int64_t kk = 0; kk < k_; ++kk)
          dst[kk] = Nibble(row, kk) * sc[n * blocks + kk / block_];
      }
    });
    return DnnlTry(node, [&]() -> Status {
      ASSIGN_OR_RETURN(auto prim, GetPrimitive(m));
      dnnl::engine& eng = DnnlEngine();
      dnnl::stream s(eng);
      using md = dnnl::memory::desc;
      const auto f32 = dnnl::memory::data_type::f32;
      const auto ab = dnnl::memory::format_tag::ab;
      dnnl::memory src(md({m, k_}, f32, ab), eng, const_cast<void*>(a->raw_data()));
      dnnl::memory wei(md({k_, n_}, f32, dnnl::memory::format_tag::ba), eng, b.raw_data());
      dnnl::memory dst(md({m, n_}, f32, ab), eng, y->raw_data());
      ExecutePrimitive(*prim, s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
      s.wait();
      return Status::Ok();
    });
  }

 private:
  StatusOr<std::shared_ptr<const dnnl::matmul>> GetPrimitive(int64_t m) const {
    std::lock_guard<std::mutex> lock(mu_);
    const std::pair<int, int64_t> key(PrimitiveThreads(), m);  // a primitive keeps its threads
    auto it = prims_.find(key);
    if (it != prims_.end()) return it->second;
    using md = dnnl::memory::desc;
    const auto f32 = dnnl::memory::data_type::f32;
    const auto ab = dnnl::memory::format_tag::ab;
    dnnl::matmul::desc d(md({m, k_}, f32, ab), md({k_, n_}, f32, dnnl::memory::format_tag::ba),
                         md({m, n_}, f32, ab));
    auto prim = std::make_shared<const dnnl::matmul>(dnnl::matmul::primitive_desc(d, UserScratchpad(), DnnlEngine()));
    return prims_.emplace(key, prim).first->second;
  }

  int64_t k_ = 0, n_ = 0, block_ = 32;
  mutable std::mutex mu_;
  // By thread count and rows; guarded by mu_.
  mutable std::map<std::pair<int, int64_t>, std::shared_ptr<const dnnl::matmul>> prims_;
};

class GatherInt4Kernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    d_ = info.node().GetInt("D", 0);
    block_ = info.node().GetInt("block_size", 32);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* q = ctx.Input(0);
    const Tensor* idx = ctx.Input(2);
    const int64_t v = q ? q->dim(0) : 0;
    RETURN_IF_ERROR(CheckPacked(node, q, ctx.Input(1), std::max<int64_t>(v, 1), d_, block_));
    if (!idx || (idx->dtype() != DataType::kInt64 && idx->dtype() != DataType::kInt32)) {
      return InvalidArgument("{}: indices must be int32/int64", node.Describe());
    }
    Shape out = idx->shape();
    out.push_back(d_);
    Tensor* y = ctx.AllocateOutput(0, DataType::kFloat32, out);
    const int64_t row_bytes = (d_ + 1) / 2, blocks = (d_ + block_ - 1) / block_;
    const uint8_t* qd = q->data<uint8_t>();
    const float* sc = ctx.Input(1)->data<float>();
    for (int64_t i = 0; i < idx->NumElements(); ++i) {
      int64_t r = idx->GetAsInt64(i);
      if (r < -v || r >= v) {
        return InvalidArgument("{}: index {} out of range for {} rows", node.Describe(), r, v);
      }
      if (r < 0) r += v;
      const uint8_t* row = qd + r * row_bytes;
      float* dst = y->data<float>() + i * d_;
      for (int64_t j = 0; j < d_; ++j) dst[j] = Nibble(row, j) * sc[r * blocks + j / block_];
    }
    return Status::Ok();
  }

 private:
  int64_t d_ = 0, block_ = 32;
};

}  // namespace

void RegisterQuantInt4Kernels(KernelRegistry& r) {
  RegisterInferdOp(r, "MatMulInt4", MakeKernel<MatMulInt4Kernel>(), 0);
  RegisterInferdOp(r, "GatherInt4", MakeKernel<GatherInt4Kernel>(), 0);
}

}  // namespace inferd::cpu
