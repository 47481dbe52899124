// ai.inferd.BlockedConv: a 2-D convolution whose input, residual and/or output tensors stay in
// oneDNN's channel-blocked layout (nChw16c with AVX-512, nChw8c without; see Block()) between
// convolutions, written by LayoutPropagation
// (src/optimizer/layout_propagation.cc, level "all"); schema in docs/optimizer.md.
//
// A blocked tensor of logical shape [N, C, H, W] is stored as nChw<B>c with C rounded up to a
// multiple of the block B (padding channels zero, as oneDNN writes them); its Tensor shape is
// [N, roundB(C), H, W] so the arena sizes it right. Its true C is known from the weights: the
// reader's W gives its input channels, the writer's W its output channels. Plain inputs and
// outputs are reordered at the boundary, inside the kernel. float32, constant weights.
//
// With inputs 4 and 5 (DepthwiseFusion, level "all") a 1x1 convolution is followed by a 3x3
// depthwise convolution (pad 1, stride `dw_stride`, activation `dw_activation`): MobileNet's
// expand + depthwise pair. oneDNN's fused depthwise post-op computes the depthwise rows while the
// 1x1 rows are still in cache, so the wide intermediate never goes to memory; for shapes where
// oneDNN only offers its reference fusion (small spatial sizes) the two run back to back through
// a per-thread intermediate buffer.
//
// bf16 compute (attributes from optimizer/bf16_compute.h, not with a depthwise fusion):
// compute_bf16 = 1 packs W as bf16 and runs oneDNN's bf16 convolution (f32 accumulation, f32
// bias); x_bf16 / z_bf16 / y_bf16 = 1 mean that blocked X / Z / Y hold bf16 values in NHWC
// (DataType::kBFloat16, same tensor shape; see SideTag), so chains of bf16 convolutions move half
// the bytes.
// float32 sides are converted by the boundary reorders. On CPUs without native bf16 the kernel
// ignores these attributes and computes in FP32.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/nn/window.h"
#include "kernels/cpu/onednn/dnnl_kernel.h"
#include "kernels/cpu/onednn/bf16_choice.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/onednn/packed_weights.h"
#include "kernels/cpu/onednn/post_ops.h"
#include "kernels/cpu/onednn/scratch.h"

namespace inferd::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// The channel block of the blocked layout: 16 (nChw16c) where oneDNN runs AVX-512 convolutions,
// else 8 (nChw8c, the block of its AVX2 kernels). oneDNN 2.6 has no AVX2 jit convolution on
// nChw16c and falls back to its reference kernel: ResNet-50 took 225 s per image that way on an
// AVX2-only AMD EPYC (Zen 3), against ~0.1 s with nChw8c. The block is fixed per process, so every
// BlockedConv writing a tensor and every one reading it agree.
int64_t Block() { return DnnlHasAvx512() ? 16 : 8; }
memory::format_tag BlockedTag() {
  return Block() == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
}
int64_t RoundUp(int64_t c) { return (c + Block() - 1) / Block() * Block(); }

struct Plan {
  dnnl::convolution_forward prim;
  memory::desc src_md, dst_md;             // what the primitive reads and writes
  memory::desc given_src_md, out_dst_md;   // how X arrives and how Y leaves
  memory weights;
  Shape out_logical;  // [N, M, OH, OW]
  // Depthwise fusion: the fused primitive's depthwise weights (fused), or a second primitive
  // reading the 1x1 result `mid_md` (unfused fallback).
  bool dw_fused = false;
  std::optional<dnnl::convolution_forward> dw_prim;
  memory::desc mid_md;
  memory dw_weights;
};

class BlockedConvKernel final : public DnnlKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    RETURN_IF_ERROR(attrs_.Parse(node, /*with_ceil_mode=*/false));
    group_ = node.GetInt("group", 1);
    x_blocked_ = node.GetInt("x_blocked", 0) != 0;
    z_blocked_ = node.GetInt("z_blocked", 0) != 0;
    y_blocked_ = node.GetInt("y_blocked", 0) != 0;
    bf16_ = node.GetInt("compute_bf16", 0) != 0;
    x_bf16_ = node.GetInt("x_bf16", 0) != 0;
    z_bf16_ = node.GetInt("z_bf16", 0) != 0;
    y_bf16_ = node.GetInt("y_bf16", 0) != 0;
    if ((x_bf16_ && !x_blocked_) || (z_bf16_ && !z_blocked_) || (y_bf16_ && !y_blocked_) ||
        (!bf16_ && (x_bf16_ || z_bf16_ || y_bf16_)) || (bf16_ && node.HasInput(4))) {
      return InvalidArgument(
          "{}: bf16 X/Z/Y need that side blocked and compute_bf16, which excludes a depthwise "
          "fusion",
          node.Describe());
    }
    // Where bf16 does not pay (onednn/bf16_choice.h: no native bf16 — oneDNN would emulate it or
    // has no bf16 convolution at all — or native bf16 measured slower than FP32 here): compute in
    // FP32 from W (the bf16 weights, widened to float32 at load). The bf16 X/Z/Y between such
    // convolutions become float32 as well: every compute_bf16 convolution in the process decides
    // alike, and only they read those tensors.
    if (bf16_ && !Bf16ComputeChoice().conv) bf16_ = x_bf16_ = z_bf16_ = y_bf16_ = false;
    has_sum_ = node.HasInput(3);
    if (has_sum_) post_ops_.append_sum(1.f);
    RETURN_IF_ERROR(ParseFusedActivation(node, &post_ops_));
    has_dw_ = node.HasInput(4);
    if (has_dw_) RETURN_IF_ERROR(InitDepthwise(info));
    const Tensor* w = info.ConstantInput(1);
    if (group_ <= 0 || w == nullptr || w->dtype() != DataType::kFloat32 || w->rank() != 4) {
      return InvalidArgument("{}: needs group > 0 and a constant float32 4-D W",
                             node.Describe());
    }
    w_shape_ = w->shape();
    PackConstantInput(info, 1, *w, &w_);
    if (node.HasInput(2)) {
      const Tensor* b = info.ConstantInput(2);
      if (b == nullptr || b->dtype() != DataType::kFloat32 || b->NumElements() != w_shape_[0]) {
        return InvalidArgument("{}: B must be a constant float32 [{}]", node.Describe(),
                               w_shape_[0]);
      }
      b_ = b->owns_data() ? *b : b->Clone();  // initializers are immutable: share them
    }
    return Status::Ok();
  }

  Status InitDepthwise(const KernelInfo& info) {
    const Node& node = info.node();
    const Tensor* w = info.ConstantInput(1);
    const Tensor* dw = info.ConstantInput(4);
    dw_stride_ = node.GetInt("dw_stride", 1);
    const int64_t m = w->dim(0);
    if (has_sum_ || group_ != 1 || w->dim(2) != 1 || w->dim(3) != 1 || dw == nullptr ||
        dw->dtype() != DataType::kFloat32 || dw->shape() != Shape{m, 1, 3, 3} ||
        (dw_stride_ != 1 && dw_stride_ != 2)) {
      return InvalidArgument("{}: a depthwise fusion needs a 1x1 convolution without Z and a "
                             "constant float32 depthwise W [{}, 1, 3, 3] with dw_stride 1 or 2",
                             node.Describe(), m);
    }
    PackConstantInput(info, 4, *dw, &dw_w_);
    if (node.HasInput(5)) {
      const Tensor* b = info.ConstantInput(5);
      if (b == nullptr || b->dtype() != DataType::kFloat32 || b->NumElements() != m) {
        return InvalidArgument("{}: depthwise B must be a constant float32 [{}]", node.Describe(),
                               m);
      }
      dw_b_ = b->owns_data() ? *b : b->Clone();
    } else {
      dw_b_ = Tensor::Allocate(DataType::kFloat32, {m});  // zeros
    }
    RETURN_IF_ERROR(ParseFusedActivation(node, &dw_post_ops_, "dw_activation"));
    // The fused primitive's chain: 1x1 activation, depthwise, depthwise activation. (post_ops is
    // a shared handle: copying post_ops_ and appending would change post_ops_ too.)
    const auto f32 = dnnl::memory::data_type::f32;
    RETURN_IF_ERROR(ParseFusedActivation(node, &fused_post_ops_));
    fused_post_ops_.append_dw(f32, f32, f32, 3, dw_stride_, 1, 0, {});
    return ParseFusedActivation(node, &fused_post_ops_, "dw_activation");
  }

  // Y may take over the residual Z's buffer when both have the same layout: the sum post-op then
  // accumulates onto Z where it lies instead of copying it into Y first.
  int InPlaceInput(size_t output) const override {
    return output == 0 && has_sum_ && z_blocked_ == y_blocked_ && z_bf16_ == y_bf16_ ? 3 : -1;
  }

 private:
  Status Run(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    const Tensor* z = has_sum_ ? ctx.Input(3) : nullptr;
    const int64_t c = w_shape_[1] * group_, m = w_shape_[0];
    const DataType x_type = x_bf16_ ? DataType::kBFloat16 : DataType::kFloat32;
    if (!x || x->dtype() != x_type || x->rank() != 4 ||
        x->dim(1) != (x_blocked_ ? RoundUp(c) : c)) {
      return InvalidArgument("{}: X must be {} [N, {}, H, W]{}", node.Describe(),
                             DataTypeName(x_type), x_blocked_ ? RoundUp(c) : c,
                             x_blocked_ ? (Block() == 16 ? " (nChw16c)" : " (nChw8c)") : "");
    }
    if (m % group_ != 0) return InvalidArgument("{}: M not divisible by group", node.Describe());
    const Shape xs = {x->dim(0), c, x->dim(2), x->dim(3)};
    ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, GetPlan(node, xs));
    const Shape& os = plan->out_logical;
    const Shape y_shape = {os[0], y_blocked_ ? RoundUp(m) : m, os[2], os[3]};
    if (has_sum_) {
      const Shape z_shape = {os[0], z_blocked_ ? RoundUp(m) : m, os[2], os[3]};
      const DataType z_type = z_bf16_ ? DataType::kBFloat16 : DataType::kFloat32;
      if (!z || z->dtype() != z_type || z->shape() != z_shape) {
        return InvalidArgument("{}: residual Z must be {} {}", node.Describe(),
                               DataTypeName(z_type), ShapeToString(z_shape));
      }
    }
    Tensor* y = ctx.AllocateOutputUninitialized(
        0, y_bf16_ ? DataType::kBFloat16 : DataType::kFloat32, y_shape);
    if (NumElements(os) == 0) return Status::Ok();
    dnnl::engine& eng = DnnlEngine();
    dnnl::stream s(eng);
    // Boundary reorders go through per-thread scratch (slots 0-2), not a fresh buffer per call.
    const memory src = ReorderIfNeeded(
        memory(plan->given_src_md, eng, const_cast<void*>(x->raw_data())), plan->src_md, s, 0);
    memory out(plan->out_dst_md, eng, y->raw_data());
    memory dst = plan->dst_md == plan->out_dst_md ? out : ScratchMemory(plan->dst_md, 1);
    if (z) {  // the sum post-op accumulates onto what dst holds: Z in the primitive's layout
      const memory::desc z_md =
          z_blocked_ ? memory::desc(ToDims(os), Type(z_bf16_), SideTag(z_bf16_))
                     : PlainDesc(ToDims(os));
      if (z_md == plan->dst_md) {
        if (dst.get_data_handle() != z->raw_data()) {  // not in place (InPlaceInput)
          std::memcpy(dst.get_data_handle(), z->raw_data(), z_md.get_size());
        }
      } else {
        memory zm(z_md, eng, const_cast<void*>(z->raw_data()));
        dnnl::reorder(zm, dst).execute(s, zm, dst);
      }
    }
    const memory bias =
        b_.defined() ? memory(PlainDesc({m}), eng, const_cast<void*>(b_.raw_data())) : memory();
    const memory dw_bias =
        has_dw_ ? memory(PlainDesc({m}), eng, const_cast<void*>(dw_b_.raw_data())) : memory();
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, plan->weights}};
    if (bias) args[DNNL_ARG_BIAS] = bias;
    if (plan->dw_prim) {  // unfused depthwise: 1x1 into the scratch intermediate, then depthwise
      memory mid = ScratchMemory(plan->mid_md, 2);
      args[DNNL_ARG_DST] = mid;
      ExecutePrimitive(plan->prim, s, std::move(args));
      ExecutePrimitive(*plan->dw_prim, s,
                       {{DNNL_ARG_SRC, mid},
                        {DNNL_ARG_WEIGHTS, plan->dw_weights},
                        {DNNL_ARG_BIAS, dw_bias},
                        {DNNL_ARG_DST, dst}});
    } else {
      args[DNNL_ARG_DST] = dst;
      if (plan->dw_fused) {
        args[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS] = plan->dw_weights;
        args[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS] = dw_bias;
      }
      ExecutePrimitive(plan->prim, s, std::move(args));
    }
    if (dst != out) dnnl::reorder(dst, out).execute(s, dst, out);
    s.wait();
    return Status::Ok();
  }

  StatusOr<std::shared_ptr<const Plan>> GetPlan(const Node& node, const Shape& xs) const {
    Shape key = xs;
    key.push_back(PrimitiveThreads());  // its primitives run on the threads they were made for
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    const std::vector<int64_t> in = {xs[2], xs[3]}, kernel = {w_shape_[2], w_shape_[3]};
    ASSIGN_OR_RETURN(WindowGeometry g, ResolveWindow(attrs_, in, kernel, node.Describe()));
    auto plan = std::make_shared<Plan>();
    const int64_t m = w_shape_[0];
    const Shape conv_out = {xs[0], m, g.out[0], g.out[1]};
    plan->out_logical = conv_out;
    if (has_dw_) {  // 3x3, pad 1: ceil(size / stride)
      plan->out_logical[2] = (conv_out[2] - 1) / dw_stride_ + 1;
      plan->out_logical[3] = (conv_out[3] - 1) / dw_stride_ + 1;
    }
    const auto f32 = memory::data_type::f32, compute = Type(bf16_);
    memory::dims wdims = ToDims(w_shape_);
    if (group_ > 1) wdims = {group_, m / group_, w_shape_[1], w_shape_[2], w_shape_[3]};
    plan->given_src_md = x_blocked_ ? memory::desc(ToDims(xs), Type(x_bf16_), SideTag(x_bf16_))
                                    : PlainDesc(ToDims(xs));
    plan->out_dst_md =
        y_blocked_ ? memory::desc(ToDims(plan->out_logical), Type(y_bf16_), SideTag(y_bf16_))
                   : PlainDesc(ToDims(plan->out_logical));
    // Blocked sides are fixed to nChw16c so neighbours agree without talking; a plain side lets
    // oneDNN choose and is reordered at the boundary. A depthwise pair keeps its intermediate
    // blocked.
    // bf16 compute reads bf16: a float32 X (plain or blocked) is converted by the source reorder.
    const memory::desc src_md =
        x_blocked_ && x_bf16_ == bf16_
            ? plan->given_src_md
            : memory::desc(ToDims(xs), compute, tag::any);
    const memory::desc dst_md =
        has_dw_ ? memory::desc(ToDims(conv_out), f32, BlockedTag())
        : y_blocked_ ? plan->out_dst_md
                     : memory::desc(ToDims(conv_out), f32, tag::any);
    const memory::desc w_any(wdims, compute, tag::any), bias_md({m}, f32, tag::a);
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    const memory::dims st = ToDims(g.strides), dil = DnnlDilations(g.dilations),
                       pl = ToDims(g.pad_begin), pr = ToDims(g.pad_end);
    auto conv_desc = [&](dnnl::algorithm a) {
      return b_.defined() ? dnnl::convolution_forward::desc(prop, a, src_md, w_any, bias_md,
                                                            dst_md, st, dil, pl, pr)
                          : dnnl::convolution_forward::desc(prop, a, src_md, w_any, dst_md, st,
                                                            dil, pl, pr);
    };
    const auto desc = conv_desc(alg);
    const memory::dims dw_plain = {m, 1, 1, 3, 3};
    std::optional<dnnl::convolution_forward::primitive_desc> pd;
    if (has_dw_) {
      // oneDNN's own fused kernel when it has one; its reference fusion is slower than two
      // primitives, so then the pair runs unfused.
      dnnl::primitive_attr attr;
      attr.set_post_ops(fused_post_ops_);
      dnnl::convolution_forward::primitive_desc fused(desc, UserScratchpad(attr), DnnlEngine(),
                                                      /*allow_empty=*/true);
      if (DnnlHasKernel(fused)) {
        pd = fused;
        plan->dw_fused = true;
        plan->dw_weights = dw_w_.Get(
            PlainDesc(dw_plain),
            fused.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS));
      } else {
        plan->mid_md = dst_md;
        const memory::desc dw_dst =
            y_blocked_ ? plan->out_dst_md
                       : memory::desc(ToDims(plan->out_logical), f32, tag::any);
        const memory::dims dw_st = {dw_stride_, dw_stride_}, one = {1, 1}, zero = {0, 0};
        dnnl::convolution_forward::desc dw_desc(prop, alg, dst_md,
                                                memory::desc(dw_plain, f32, tag::any), bias_md,
                                                dw_dst, dw_st, zero, one, one);
        dnnl::primitive_attr dw_attr;
        dw_attr.set_post_ops(dw_post_ops_);
        dnnl::convolution_forward::primitive_desc dw_pd(dw_desc, UserScratchpad(dw_attr),
                                                        DnnlEngine());
        plan->dw_prim = dnnl::convolution_forward(dw_pd);
        plan->dw_weights = dw_w_.Get(PlainDesc(dw_plain), dw_pd.weights_desc());
        plan->dst_md = dw_pd.dst_desc();
      }
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops_);
    if (!pd && !bf16_ && group_ == 1 && w_shape_[2] == 3 && w_shape_[3] == 3 && st[0] == 1 &&
        st[1] == 1 && dil[0] == 0 && dil[1] == 0) {
      // 3x3, stride 1: Winograd (F(2x2,3x3) / F(4x4,3x3)) needs 2.25-4x fewer multiplications
      // than the direct convolution; oneDNN's avx512 kernels take these shapes with the
      // sum/eltwise post-ops. Measured per layer (ResNet-50 shapes, alternating, 1 thread):
      // 0.27-0.73x the direct kernel's time. Error stays within the float32 model tests'
      // tolerance (tests/models). Direct when oneDNN has no Winograd kernel for the shape.
      dnnl::convolution_forward::primitive_desc wpd(
          conv_desc(dnnl::algorithm::convolution_winograd), UserScratchpad(attr), DnnlEngine(),
          /*allow_empty=*/true);
      if (wpd) pd = wpd;
    }
    if (!pd) pd.emplace(desc, UserScratchpad(attr), DnnlEngine());
    plan->prim = dnnl::convolution_forward(*pd);
    plan->src_md = pd->src_desc();
    if (!plan->dw_prim) plan->dst_md = pd->dst_desc();
    plan->weights = w_.Get(PlainDesc(wdims), pd->weights_desc());
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.emplace(std::move(key), std::move(plan)).first->second;
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  static memory::data_type Type(bool bf16) {
    return bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  }
  // bf16 values between bf16 convolutions are NHWC (oneDNN 2.6's brgemm bf16 convolutions want
  // it; on nChw16c it falls back to its older jit_bf16 kernels); float32 ones nChw16c.
  static tag SideTag(bool bf16) { return bf16 ? tag::acdb : BlockedTag(); }

  bool x_blocked_ = false, z_blocked_ = false, y_blocked_ = false, has_sum_ = false;
  bool bf16_ = false, x_bf16_ = false, z_bf16_ = false, y_bf16_ = false;
  dnnl::post_ops post_ops_;
  Shape w_shape_;
  PackedWeights w_;  // one packed copy per layout, shared by every shape's plan
  Tensor b_;
  bool has_dw_ = false;  // depthwise fusion (inputs 4, 5)
  int64_t dw_stride_ = 1;
  dnnl::post_ops dw_post_ops_, fused_post_ops_;
  PackedWeights dw_w_;
  Tensor dw_b_;
  mutable std::mutex mu_;
  mutable std::map<Shape, std::shared_ptr<const Plan>> cache_;  // by shape + threads; mu_
};

}  // namespace

void RegisterBlockedConvKernel(KernelRegistry& r) {
  KernelDef def;
  def.domain = kInferdDomain;
  def.op_type = "BlockedConv";
  def.types = {DataType::kFloat32, DataType::kBFloat16};  // X: bf16 between bf16 convolutions
  def.factory = MakeKernel<BlockedConvKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
