// The ai.inferd.PagedAttention kernel: shape and index checks, then paged_attention.h's
// PagedAttention. Inputs 3 and 4 (the caches) are views onto the model runner's KV pool and are
// written in place (the contract of the op: GEN.md section 2, docs/optimizer.md). With INT8
// caches (int8 inputs 3 and 4), inputs 9 and 10 are their scales (paged_attention.h), also
// written in place.
#include <cmath>

#include "kernels/cpu/attention/paged_attention.h"
#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

constexpr const char* kInputNames[] = {"query",       "key",          "value",
                                       "key_cache",   "value_cache",  "slot_mapping",
                                       "query_start", "context_lens", "block_tables"};
constexpr int kRanks[] = {4, 4, 4, 4, 4, 1, 1, 1, 2};
constexpr const char* kScaleNames[] = {"key_scales", "value_scales"};

class PagedAttentionKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    num_heads_ = node.GetInt("num_heads", 0);
    num_kv_heads_ = node.GetInt("num_kv_heads", 0);
    scale_ = node.GetFloat("scale", 0.f);  // 0: 1/sqrt(head_dim), resolved per call
    if (num_heads_ < 0 || num_kv_heads_ < 0 || !std::isfinite(scale_)) {
      return InvalidArgument("{}: num_heads, num_kv_heads must be positive and scale finite",
                             node.Describe());
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* in[9];
    // INT8 caches when key_cache is int8 (then value_cache too, and the scales follow).
    const bool int8 = ctx.Input(3) != nullptr && ctx.Input(3)->dtype() == DataType::kInt8;
    for (int i = 0; i < 9; ++i) {
      in[i] = ctx.Input(i);
      if (in[i] == nullptr) {
        return InvalidArgument("{}: input {} ({}) is required", node.Describe(), i, kInputNames[i]);
      }
      const DataType want = i >= 5                        ? DataType::kInt64
                            : int8 && (i == 3 || i == 4) ? DataType::kInt8
                                                         : DataType::kFloat32;
      if (in[i]->dtype() != want || in[i]->rank() != kRanks[i]) {
        return InvalidArgument("{}: {} must be a rank-{} {} tensor, got {} {}", node.Describe(),
                               kInputNames[i], kRanks[i], DataTypeName(want),
                               DataTypeName(in[i]->dtype()), ShapeToString(in[i]->shape()));
      }
    }
    PagedAttentionArgs args;
    RETURN_IF_ERROR(Describe(node, in, &args));
    if (int8) RETURN_IF_ERROR(DescribeScales(ctx, *in[3], &args));
    RETURN_IF_ERROR(CheckPagedAttentionArgs(args));
    Tensor* out = ctx.AllocateOutputUninitialized(
        0, DataType::kFloat32, {1, args.num_heads, args.num_tokens, args.head_dim});
    if (args.num_tokens > 0) PagedAttention(args, out->data<float>());
    return Status::Ok();
  }

 private:
  // Fills args from the inputs, checking that their shapes agree with each other and with the
  // attributes.
  Status Describe(const Node& node, const Tensor* const* in, PagedAttentionArgs* a) const {
    const Tensor &q = *in[0], &k = *in[1], &v = *in[2], &kc = *in[3], &vc = *in[4];
    const int64_t h = q.dim(1), t = q.dim(2), d = q.dim(3), hkv = k.dim(1);
    const int64_t s = in[7]->dim(0);
    const bool ok = q.dim(0) == 1 && k.shape() == v.shape() && k.dim(0) == 1 && k.dim(2) == t &&
                    k.dim(3) == d && kc.shape() == vc.shape() && kc.dim(1) == hkv &&
                    kc.dim(3) == d && kc.dim(2) > 0 && hkv > 0 && h % hkv == 0 &&
                    in[5]->dim(0) == t && in[6]->dim(0) == s + 1 && in[8]->dim(0) == s &&
                    (num_heads_ == 0 || num_heads_ == h) &&
                    (num_kv_heads_ == 0 || num_kv_heads_ == hkv);
    if (!ok) {
      return InvalidArgument(
          "{}: inconsistent shapes: query {}, key {}, value {}, key_cache {}, value_cache {}, "
          "slot_mapping {}, query_start {}, context_lens {}, block_tables {} (num_heads {}, "
          "num_kv_heads {}; expected query [1, H, T, D], key/value [1, Hkv, T, D], caches "
          "[blocks, Hkv, block_size, D], [T], [S+1], [S], [S, max_blocks], H a multiple of Hkv)",
          node.Describe(), ShapeToString(q.shape()), ShapeToString(k.shape()),
          ShapeToString(v.shape()), ShapeToString(kc.shape()), ShapeToString(vc.shape()),
          ShapeToString(in[5]->shape()), ShapeToString(in[6]->shape()),
          ShapeToString(in[7]->shape()), ShapeToString(in[8]->shape()), num_heads_, num_kv_heads_);
    }
    a->query = q.data<float>();
    a->key = k.data<float>();
    a->value = v.data<float>();
    // The caches are the runner's pool, handed in as views: the op's contract is to write them.
    if (kc.dtype() == DataType::kFloat32) {
      a->key_cache = const_cast<float*>(kc.data<float>());
      a->value_cache = const_cast<float*>(vc.data<float>());
    }
    a->slot_mapping = in[5]->data<int64_t>();
    a->query_start = in[6]->data<int64_t>();
    a->context_lens = in[7]->data<int64_t>();
    a->block_tables = in[8]->data<int64_t>();
    a->num_heads = h;
    a->num_kv_heads = hkv;
    a->head_dim = d;
    a->num_tokens = t;
    a->num_seqs = s;
    a->num_blocks = kc.dim(0);
    a->block_size = kc.dim(2);
    a->max_blocks_per_seq = in[8]->dim(1);
    a->scale =
        scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(std::max<int64_t>(d, 1)));
    return Status::Ok();
  }

  // The INT8 caches' scale inputs 9 and 10: float32 [num_blocks, Hkv, block_size] each.
  static Status DescribeScales(KernelContext& ctx, const Tensor& cache, PagedAttentionArgs* a) {
    const Shape want = {cache.dim(0), cache.dim(1), cache.dim(2)};
    float* scales[2];
    for (int i = 0; i < 2; ++i) {
      const Tensor* t = ctx.Input(9 + i);
      if (t == nullptr || t->dtype() != DataType::kFloat32 || t->shape() != want) {
        return InvalidArgument(
            "{}: int8 caches need input {} ({}), float32 {}, got {}", ctx.node().Describe(), 9 + i,
            kScaleNames[i], ShapeToString(want),
            t == nullptr ? std::string("none")
                         : fmt::format("{} {}", DataTypeName(t->dtype()), ShapeToString(t->shape())));
      }
      // Views onto the runner's pool, written in place like the caches.
      scales[i] = const_cast<float*>(t->data<float>());
    }
    a->key_cache_i8 = const_cast<int8_t*>(ctx.Input(3)->data<int8_t>());
    a->value_cache_i8 = const_cast<int8_t*>(ctx.Input(4)->data<int8_t>());
    a->key_cache = a->value_cache = nullptr;
    a->key_scales = scales[0];
    a->value_scales = scales[1];
    return Status::Ok();
  }

  int64_t num_heads_ = 0, num_kv_heads_ = 0;
  float scale_ = 0.f;
};

}  // namespace

void RegisterAttentionKernels(KernelRegistry& r) {
  KernelDef def;
  def.domain = kInferdDomain;
  def.op_type = "PagedAttention";
  def.types = {DataType::kFloat32};
  def.factory = MakeKernel<PagedAttentionKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
