// Weight-only 4/8-bit kernels written by `inferd quantize --precision int4|int8` for decoders
// (quantize/nbits_weights.h), domain ai.inferd; layout and math in nbits_gemm.h:
//
//   MatMulNBits(A float32 [..., K], B [N, NBitsRowBytes(bits, K)], scales float32 [N, G],
//               zero_points [N, G] optional) -> Y [..., N] = A · dequant(B)ᵀ
//   GatherNBits(data [V, NBitsRowBytes(bits, K)], scales float32 [V, G], indices int32/int64,
//               zero_points [V, G] optional) -> Y [indices..., K] = dequant(data)[indices]
//   attributes: K, bits (4 | 8), block_size (32 | 64 | 128), N (MatMulNBits only);
//   G = ceil(K / block_size); B/data and zero_points uint8 for 4 bits, int8 for 8 bits.
//
// Constant weights are checked once when the kernel is created, so a corrupt model fails its load
// with the node and the mismatch named; weights fed at run time are checked on every call.
#include <algorithm>

#include "kernels/cpu/quantization/nbits_gemm.h"
#include "kernels/cpu/quantization/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

struct NBitsAttrs {
  int64_t k = 0, bits = 0, block = 0;
};

Status ParseAttrs(const Node& node, NBitsAttrs* a) {
  a->k = node.GetInt("K", 0);
  a->bits = node.GetInt("bits", 0);
  a->block = node.GetInt("block_size", 0);
  if (a->bits != 4 && a->bits != 8) {
    return InvalidArgument("{}: bits must be 4 or 8, got {}", node.Describe(), a->bits);
  }
  if (a->block != 32 && a->block != 64 && a->block != 128) {
    return InvalidArgument("{}: block_size must be 32, 64 or 128, got {}", node.Describe(),
                           a->block);
  }
  if (a->k < 1) return InvalidArgument("{}: K must be positive, got {}", node.Describe(), a->k);
  return Status::Ok();
}

// The packed weights (inputs q, s, z of the node; z may be absent) as a view of `rows` rows,
// or the reason they do not match the attributes.
StatusOr<NBitsWeights> View(const Node& node, const NBitsAttrs& a, const Tensor* q,
                            const Tensor* s, const Tensor* z, int64_t rows) {
  const DataType code = a.bits == 4 ? DataType::kUInt8 : DataType::kInt8;
  const char* code_name = a.bits == 4 ? "uint8" : "int8";
  if (!q || !s || q->dtype() != code || s->dtype() != DataType::kFloat32) {
    return InvalidArgument("{}: needs {} packed weights and float32 scales for {} bits",
                           node.Describe(), code_name, a.bits);
  }
  if (rows < 0) rows = q->rank() == 2 ? q->dim(0) : 0;
  const Shape packed{rows, NBitsRowBytes(static_cast<int>(a.bits), a.k)};
  const Shape scales{rows, NBitsGroups(a.k, a.block)};
  if (rows < 1 || q->shape() != packed || s->shape() != scales) {
    return InvalidArgument(
        "{}: packed weights {} / scales {} do not match K {}, {} bits, block_size {} (expected "
        "{} / {})",
        node.Describe(), ShapeToString(q->shape()), ShapeToString(s->shape()), a.k, a.bits,
        a.block, ShapeToString(packed), ShapeToString(scales));
  }
  if (z && (z->dtype() != code || z->shape() != scales)) {
    return InvalidArgument("{}: zero points must be {} {}, got {}", node.Describe(), code_name,
                           ShapeToString(scales), z->DebugString());
  }
  NBitsWeights w;
  w.bits = static_cast<int>(a.bits);
  w.n = rows;
  w.k = a.k;
  w.group = a.block;
  w.data = static_cast<const uint8_t*>(q->raw_data());
  w.scales = s->data<float>();
  w.zero_points = z ? static_cast<const uint8_t*>(z->raw_data()) : nullptr;
  if (w.data == nullptr || w.scales == nullptr) {
    return InvalidArgument("{}: packed weights have no data", node.Describe());
  }
  return w;
}

// Optional input i: null when absent.
const Tensor* Optional(KernelContext& ctx, size_t i) {
  return ctx.node().HasInput(i) ? ctx.Input(i) : nullptr;
}
const Tensor* OptionalConstant(const KernelInfo& info, size_t i) {
  return info.node().HasInput(i) ? info.ConstantInput(i) : nullptr;
}

class MatMulNBitsKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    RETURN_IF_ERROR(ParseAttrs(node, &attrs_));
    n_ = node.GetInt("N", 0);
    if (n_ < 1) return InvalidArgument("{}: N must be positive, got {}", node.Describe(), n_);
    const Tensor* q = info.ConstantInput(1);
    const Tensor* s = info.ConstantInput(2);
    const Tensor* z = OptionalConstant(info, 3);
    if (q && s) {  // constant weights: check them now, at load
      ASSIGN_OR_RETURN(NBitsWeights w, View(node, attrs_, q, s, z, n_));
      // Repacked once for the decode kernel, when the zero points (if any) are constant too.
      if (!node.HasInput(3) || z != nullptr) decode_ = NBitsDecodeWeights(w);
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(NBitsWeights w,
                     View(node, attrs_, ctx.Input(1), ctx.Input(2), Optional(ctx, 3), n_));
    const Tensor* a = ctx.Input(0);
    if (!a || a->dtype() != DataType::kFloat32 || a->rank() < 1 || a->shape().back() != attrs_.k) {
      return InvalidArgument("{}: A must be float32 [..., {}], got {}", node.Describe(), attrs_.k,
                             a ? a->DebugString() : "nothing");
    }
    Shape out = a->shape();
    out.back() = n_;
    Tensor* y = ctx.AllocateOutput(0, DataType::kFloat32, out);
    const int64_t m = a->NumElements() / attrs_.k;
    // The repacked copy is of the constant inputs, which are the ones View() just read.
    NBitsMatMul(a->data<float>(), m, w, decode_.defined() ? &decode_ : nullptr, y->data<float>());
    return Status::Ok();
  }

 private:
  NBitsAttrs attrs_;
  int64_t n_ = 0;
  NBitsDecodeWeights decode_;  // constant weights repacked at load; else undefined
};

class GatherNBitsKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    RETURN_IF_ERROR(ParseAttrs(info.node(), &attrs_));
    const Tensor* q = info.ConstantInput(0);
    const Tensor* s = info.ConstantInput(1);
    if (q && s) {
      RETURN_IF_ERROR(View(info.node(), attrs_, q, s, OptionalConstant(info, 3), -1).status());
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(NBitsWeights w,
                     View(node, attrs_, ctx.Input(0), ctx.Input(1), Optional(ctx, 3), -1));
    const Tensor* idx = ctx.Input(2);
    if (!idx || (idx->dtype() != DataType::kInt64 && idx->dtype() != DataType::kInt32)) {
      return InvalidArgument("{}: indices must be int32 or int64", node.Describe());
    }
    const int64_t v = w.n, count = idx->NumElements();
    for (int64_t i = 0; i < count; ++i) {  // all checked before anything is written
      const int64_t r = idx->GetAsInt64(i);
      if (r < -v || r >= v) {
        return InvalidArgument("{}: index {} out of range for {} rows", node.Describe(), r, v);
      }
    }
    Shape out = idx->shape();
    out.push_back(attrs_.k);
    Tensor* y = ctx.AllocateOutput(0, DataType::kFloat32, out);
    float* dst = y->data<float>();
    ParallelFor(count, std::max<int64_t>(1, 4096 / attrs_.k), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        int64_t r = idx->GetAsInt64(i);
        if (r < 0) r += v;
        DequantizeNBitsRow(w, r, dst + i * attrs_.k);
      }
    });
    return Status::Ok();
  }

 private:
  NBitsAttrs attrs_;
};

}  // namespace

void RegisterQuantNBitsKernels(KernelRegistry& r) {
  RegisterInferdOp(r, "MatMulNBits", MakeKernel<MatMulNBitsKernel>(), 0);
  RegisterInferdOp(r, "GatherNBits", MakeKernel<GatherNBitsKernel>(), 0);
}

}  // namespace inferd::cpu
