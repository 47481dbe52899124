// ai.inferd.Attention(Q, K, V, mask?) -> Y: multi-head scaled dot-product attention, written by
// AttentionFusion (src/optimizer/attention_fusion.cc); schema in docs/optimizer.md.
//
// Q [B, Sq, H·D], K [B, Skv, H·D], V [B, Skv, H·Dv] are the projections before the split into
// heads; Y [B, Sq, H·Dv] is the context after the heads are merged back. Computed by
// attention/dense_attention.h's MultiHeadAttention: per (batch, head), in parallel, the head's K/V
// packed once into register-tile panels, then query tiles of 48 rows through Q·Kᵀ, a vectorized
// softmax and P·V; each head's columns of Q/K/V are read and its columns of Y written in place, so
// the head split/merge transposes never materialize.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention/dense_attention.h"
#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

class AttentionKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    num_heads_ = node.GetInt("num_heads", 0);
    if (num_heads_ <= 0) {
      return InvalidArgument("{}: num_heads must be a positive integer", node.Describe());
    }
    scale_ = node.GetFloat("scale", 0.f);  // 0: 1/sqrt(head size), resolved per call
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* q = ctx.Input(0);
    const Tensor* k = ctx.Input(1);
    const Tensor* v = ctx.Input(2);
    const Tensor* mask = ctx.Input(3);
    if (!q || !k || !v) return InvalidArgument("{}: Q, K and V are required", node.Describe());
    for (const Tensor* t : {q, k, v, mask}) {
      if (t && t->dtype() != DataType::kFloat32) {
        return InvalidArgument("{}: inputs must be float32, got {}", node.Describe(),
                               DataTypeName(t->dtype()));
      }
    }
    if (q->rank() != 3 || k->rank() != 3 || v->rank() != 3) {
      return InvalidArgument("{}: Q, K, V must be [batch, seq, hidden], got {}, {}, {}",
                             node.Describe(), ShapeToString(q->shape()), ShapeToString(k->shape()),
                             ShapeToString(v->shape()));
    }
    const int64_t b = q->dim(0), sq = q->dim(1), hd = q->dim(2);
    const int64_t skv = k->dim(1), hdv = v->dim(2), h = num_heads_;
    if (k->dim(0) != b || v->dim(0) != b || k->dim(2) != hd || v->dim(1) != skv || hd % h != 0 ||
        hdv % h != 0) {
      return InvalidArgument("{}: inconsistent shapes Q {}, K {}, V {} for {} heads",
                             node.Describe(), ShapeToString(q->shape()), ShapeToString(k->shape()),
                             ShapeToString(v->shape()), h);
    }
    const int64_t d = hd / h, dv = hdv / h;
    // The mask, right-aligned to [B, H, Sq, Skv]; a stride of 0 broadcasts.
    int64_t ms[4] = {0, 0, 0, 0};
    if (mask) {
      if (mask->rank() > 4) {
        return InvalidArgument("{}: mask rank must be at most 4", node.Describe());
      }
      const int64_t full[4] = {b, h, sq, skv};
      const int64_t off = 4 - mask->rank();
      int64_t stride = 1;
      for (int64_t i = 3; i >= off; --i) {
        const int64_t md = mask->dim(i - off);
        if (md != 1 && md != full[i]) {
          return InvalidArgument("{}: mask {} does not broadcast to [{}, {}, {}, {}]",
                                 node.Describe(), ShapeToString(mask->shape()), b, h, sq, skv);
        }
        ms[i] = md == 1 ? 0 : stride;
        stride *= md;
      }
    }
    // Every head writes its columns of every row.
    Tensor* y = ctx.AllocateOutputUninitialized(0, DataType::kFloat32, {b, sq, hdv});
    if (b * sq * hdv == 0) return Status::Ok();
    if (skv == 0) return InvalidArgument("{}: K/V sequence is empty", node.Describe());
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(d));
    MultiHeadAttentionArgs args;
    args.q = q->data<float>();
    args.k = k->data<float>();
    args.v = v->data<float>();
    args.y = y->data<float>();
    args.batch = b;
    args.q_seq = sq;
    args.kv_seq = skv;
    args.heads = h;
    args.head_dim = d;
    args.value_dim = dv;
    args.scale = scale;
    if (mask) {
      args.mask = mask->data<float>();
      std::copy(ms, ms + 4, args.mask_strides);
    }
    MultiHeadAttention(args);
    return Status::Ok();
  }

 private:
  int64_t num_heads_ = 0;
  float scale_ = 0.f;
};

}  // namespace

void RegisterAttentionKernel(KernelRegistry& r) {
  KernelDef def;
  def.domain = kInferdDomain;
  def.op_type = "Attention";
  def.types = {DataType::kFloat32};
  def.factory = MakeKernel<AttentionKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
