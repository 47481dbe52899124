// The ai.inferd.PagedAttention kernel: shape and index checks, then paged_attention.h's
// PagedAttention. Inputs 3 and 4 (the caches) are views onto the model runner's KV pool and are
// written in place (the contract of the op: GEN.md section 2, docs/optimizer.md).
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
    for (int i = 0; i < 9; ++i) {
      in[i] = ctx.Input(i);
      if (in[i] == nullptr) {
        return InvalidArgument("{}: input {} ({}) is required", node.Describe(), i, kInputNames[i]);
      }
      const DataType want = i < 5 ? DataType::kFloat32 : DataType::kInt64;
      if (in[i]->dtype() != want || in[i]->rank() != kRanks[i]) {
        return InvalidArgument("{}: {} must be a rank-{} {} tensor, got {} {}", node.Describe(),
                               kInputNames[i], kRanks[i], DataTypeName(want),
                               DataTypeName(in[i]->dtype()), ShapeToString(in[i]->shape()));
      }
    }
    PagedAttentionArgs args;
    RETURN_IF_ERROR(Describe(node, in, &args));
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
    a->key_cache = const_cast<float*>(kc.data<float>());
    a->value_cache = const_cast<float*>(vc.data<float>());
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
