// ai.inferd.Attention(Q, K, V, mask?) -> Y: multi-head scaled dot-product attention, written by
// AttentionFusion (src/optimizer/attention_fusion.cc); schema in docs/optimizer.md.
//
// Q [B, Sq, H·D], K [B, Skv, H·D], V [B, Skv, H·Dv] are the projections before the split into
// heads; Y [B, Sq, H·Dv] is the context after the heads are merged back. For each (batch, head)
// pair, in parallel: S = scale · Q_h · K_hᵀ (one sgemm reading the head's columns in place),
// S += mask, row softmax, Y_h = S · V_h (one sgemm writing the head's columns in place). Only one
// head's [Sq, Skv] scores exist at a time per thread; the head split/merge transposes never
// materialize.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

// e^x for x <= 0 (softmax after subtracting the row max), Cephes' polynomial; vectorizes.
inline float ExpNonPositive(float x) {
  x = std::max(x, -87.3f);
  const float fx = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - fx * 0.693359375f + fx * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const int32_t bits = (static_cast<int32_t>(fx) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// Softmax of one row in place, after adding the mask row (element stride mask_step, 0 = scalar).
void MaskedSoftmaxRow(float* s, int64_t n, const float* mask, int64_t mask_step) {
  if (mask != nullptr) {
    if (mask_step == 1) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) s[j] += mask[j];
    } else {
      for (int64_t j = 0; j < n; ++j) s[j] += mask[j * mask_step];
    }
  }
  float mx = s[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    s[j] = ExpNonPositive(s[j] - mx);
    sum += s[j];
  }
  const float inv = 1.f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
}

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
    if (k->dim(0) != b || v->dim(0) != b || k->dim(2) != hd || v->dim(1) != skv ||
        hd % h != 0 || hdv % h != 0) {
      return InvalidArgument(
          "{}: inconsistent shapes Q {}, K {}, V {} for {} heads", node.Describe(),
          ShapeToString(q->shape()), ShapeToString(k->shape()), ShapeToString(v->shape()), h);
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
    // Every head writes its columns of every row (sgemm with beta 0 never reads them first).
    Tensor* y = ctx.AllocateOutputUninitialized(0, DataType::kFloat32, {b, sq, hdv});
    if (b * sq * hdv == 0) return Status::Ok();
    if (skv == 0) return InvalidArgument("{}: K/V sequence is empty", node.Describe());
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(d));
    const float* qd = q->data<float>();
    const float* kd = k->data<float>();
    const float* vd = v->data<float>();
    const float* maskd = mask ? mask->data<float>() : nullptr;
    float* yd = y->data<float>();
    Status status = Status::Ok();
    ParallelFor(b * h, 1, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> scores;  // grows to the largest [Sq, Skv], then reused
      if (scores.size() < static_cast<size_t>(sq * skv)) scores.resize(sq * skv);
      float* s = scores.data();
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t bi = bh / h, hi = bh % h;
        const float* qp = qd + bi * sq * hd + hi * d;
        const float* kp = kd + bi * skv * hd + hi * d;
        const float* vp = vd + bi * skv * hdv + hi * dv;
        float* yp = yd + bi * sq * hdv + hi * dv;
        if (dnnl_sgemm('N', 'T', sq, skv, d, scale, qp, hd, kp, hd, 0.f, s, skv) !=
            dnnl_success) {
#pragma omp critical
          status = Internal("{}: sgemm failed", node.Describe());
          return;
        }
        for (int64_t i = 0; i < sq; ++i) {
          const float* mrow = maskd ? maskd + bi * ms[0] + hi * ms[1] + i * ms[2] : nullptr;
          MaskedSoftmaxRow(s + i * skv, skv, mrow, ms[3]);
        }
        if (dnnl_sgemm('N', 'N', sq, dv, skv, 1.f, s, skv, vp, hdv, 0.f, yp, hdv) !=
            dnnl_success) {
#pragma omp critical
          status = Internal("{}: sgemm failed", node.Describe());
          return;
        }
      }
    });
    return status;
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
