// Conv and ConvTranspose on oneDNN (convolution_forward / deconvolution_forward), float32 compute.
//
// oneDNN picks the activation and weight layouts (format_tag::any): activations are reordered in
// and out of its blocked layout per call. Plans (primitives) are cached per input/weight shape;
// constant weights are reordered once per weights layout (PackedWeights) and shared by the plans.
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

#include "kernels/cpu/nn/register.h"
#include "kernels/cpu/nn/window.h"
#include "kernels/cpu/onednn/dnnl_kernel.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/onednn/packed_weights.h"
#include "kernels/cpu/onednn/plan_cache.h"
#include "kernels/cpu/onednn/post_ops.h"
#include "kernels/cpu/onednn/scratch.h"
#include "kernels/cpu/util/float32.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

Shape CacheKey(const Shape& x, const Shape& w) {
  Shape k = x;
  k.push_back(-1);
  k.insert(k.end(), w.begin(), w.end());
  return k;
}

// Scratch slots of one Compute call.
constexpr int kScratchSrc = 0, kScratchWeights = 1, kScratchDst = 2;

// State common to Conv and ConvTranspose: attributes, constant weights, the plan cache.
template <typename Plan>
class WindowedKernel : public DnnlKernel {
 protected:
  Status InitCommon(const KernelInfo& info) {
    RETURN_IF_ERROR(attrs_.Parse(info.node(), /*with_ceil_mode=*/false));
    group_ = info.node().GetInt("group", 1);
    if (group_ <= 0) return InvalidArgument("{}: group must be > 0", info.node().Describe());
    RETURN_IF_ERROR(ParseFusedActivation(info.node(), &post_ops_));
    if (const Tensor* w = info.ConstantInput(1)) {
      PackConstantInput(info, 1, *w, &const_w_);
    }
    if (const Tensor* b = info.ConstantInput(2)) {
      Tensor f = ToFloat32(*b);  // shares a float32 initializer's buffer
      const_b_ = f.owns_data() ? f : f.Clone();
    }
    return Status::Ok();
  }

  // X and W are present, X has rank 3 to 5 (N, C, spatial...) and W the same rank.
  static Status CheckXW(const Node& node, const Tensor* x, const Tensor* w) {
    if (!x || !w) return InvalidArgument("{}: X and W are required", node.Describe());
    const Shape& xs = x->shape();
    if (xs.size() < 3 || xs.size() > 5) {
      return InvalidArgument("{}: X must have rank 3 to 5 (N, C, spatial...), got {}",
                             node.Describe(), ShapeToString(xs));
    }
    if (w->rank() != x->rank()) {
      return InvalidArgument("{}: W rank {} differs from X rank {}", node.Describe(), w->rank(),
                             x->rank());
    }
    return Status::Ok();
  }

  // X and W in the layouts the plan's primitive wants, reordered into per-thread scratch where
  // they differ. A non-constant W is first converted to float32 into *w_storage.
  static void SourceAndWeights(const Plan& plan, Tensor& x, const Tensor& w_in, dnnl::stream& s,
                               memory* src, memory* weights, Tensor* w_storage) {
    dnnl::engine& eng = DnnlEngine();
    *src = ReorderIfNeeded(memory(plan.user_src_md, eng, x.raw_data()), plan.src_md, s,
                           kScratchSrc);
    *weights = plan.weights;
    if (!*weights) {
      *w_storage = ToFloat32(w_in);
      *weights = ReorderIfNeeded(memory(plan.user_weights_md, eng, w_storage->raw_data()),
                                 plan.weights_md, s, kScratchWeights);
    }
  }

  // The memories of one run of the plan's primitive.
  struct RunMemories {
    memory user_dst;  // the caller's output buffer, in the plan's plain output layout
    memory dst;       // user_dst when the primitive wants that layout, else per-thread scratch
    Tensor w;         // a non-constant W converted to float32 (SourceAndWeights)
    std::unordered_map<int, memory> args;  // SRC, WEIGHTS and DST
  };

  // Binds X, W (as SourceAndWeights) and the output buffer `out`, whose layout is `user_dst_md`.
  static RunMemories BindMemories(const Plan& plan, Tensor& x, const Tensor& w_in, dnnl::stream& s,
                                  const memory::desc& user_dst_md, void* out) {
    RunMemories m;
    memory src, weights;
    SourceAndWeights(plan, x, w_in, s, &src, &weights, &m.w);
    m.user_dst = memory(user_dst_md, DnnlEngine(), out);
    m.dst = plan.dst_md == user_dst_md ? m.user_dst : ScratchMemory(plan.dst_md, kScratchDst);
    m.args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, m.dst}};
    return m;
  }

  // Returns the cached plan for `key`, building it with `build` on a miss.
  template <typename Build>
  StatusOr<std::shared_ptr<const Plan>> GetPlan(const Shape& key, Build&& build) const {
    return plans_.Get(key, std::forward<Build>(build));
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  dnnl::post_ops post_ops_;
  // A constant weight, packed once per oneDNN layout and shared by every shape's plan.
  PackedWeights const_w_;
  Tensor const_b_;  // float32 constant bias (undefined otherwise)

 private:
  PlanCache<Shape, Plan> plans_;
};

// ---------------------------------------------------------------------------------------------
// Conv

struct ConvPlan {
  dnnl::convolution_forward prim;
  memory::desc src_md, weights_md, dst_md;  // layouts the primitive wants
  memory::desc user_src_md, user_weights_md, user_dst_md;
  memory weights;  // constant weights already in weights_md (empty when not constant)
  Shape out_shape;
};

class ConvKernel final : public WindowedKernel<ConvPlan> {
 public:
  Status Init(const KernelInfo& info) override {
    // ai.inferd.Conv (residual-Add fusion, src/optimizer): an optional 4th input Z is added to
    // the result before the fused activation, through oneDNN's sum post-op (first in the list).
    has_sum_ = info.NumInputs() > 3 && !info.node().inputs[3].empty();
    if (has_sum_) post_ops_.append_sum(1.f);
    return InitCommon(info);
  }

 private:
  Status Run(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x_in = ctx.Input(0);
    const Tensor* w_in = ctx.Input(1);
    RETURN_IF_ERROR(CheckXW(node, x_in, w_in));
    const Shape& xs = x_in->shape();
    const Shape& ws = w_in->shape();
    const int64_t n = xs[0], c = xs[1], m = ws[0];
    if (ws[1] * group_ != c) {
      return InvalidArgument("{}: X has {} channels but W expects {} x group {}", node.Describe(),
                             c, ws[1], group_);
    }
    if (m % group_ != 0) {
      return InvalidArgument("{}: output channels {} not divisible by group {}", node.Describe(),
                             m, group_);
    }
    const Tensor* b_in = ctx.Input(2);
    if (b_in && (b_in->rank() != 1 || b_in->dim(0) != m)) {
      return InvalidArgument("{}: B must have shape [{}], got {}", node.Describe(), m,
                             ShapeToString(b_in->shape()));
    }
    std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) {
      return InvalidArgument("{}: kernel_shape does not match W {}", node.Describe(),
                             ShapeToString(ws));
    }
    ASSIGN_OR_RETURN(auto plan, GetPlan(CacheKey(xs, ws), [&] {
                       return BuildPlan(node, xs, ws, b_in != nullptr);
                     }));
    const DataType dtype = x_in->dtype();
    const Tensor* z = has_sum_ ? ctx.Input(3) : nullptr;
    if (has_sum_ && (!z || dtype != DataType::kFloat32 || z->dtype() != DataType::kFloat32 ||
                     z->shape() != plan->out_shape)) {
      return InvalidArgument("{}: the fused residual input must be float32 of shape {}",
                             node.Describe(), ShapeToString(plan->out_shape));
    }
    if (n == 0 || NumElements(plan->out_shape) == 0) {
      ctx.AllocateOutput(0, dtype, plan->out_shape);
      return Status::Ok();
    }
    Tensor x = ToFloat32(*x_in);
    Tensor y = dtype == DataType::kFloat32
                   ? *ctx.AllocateOutputUninitialized(0, dtype, plan->out_shape)
                   : Tensor::Allocate(DataType::kFloat32, plan->out_shape);
    dnnl::engine& eng = DnnlEngine();
    dnnl::stream s(eng);
    RunMemories mem = BindMemories(*plan, x, *w_in, s, plan->user_dst_md, y.raw_data());
    memory& user_dst = mem.user_dst;
    memory& dst = mem.dst;
    std::unordered_map<int, memory>& args = mem.args;
    Tensor b;
    if (b_in) {
      b = const_b_.defined() ? const_b_ : ToFloat32(*b_in);
      args[DNNL_ARG_BIAS] = memory(PlainDesc({m}), eng, b.raw_data());
    }
    if (z) {  // the sum post-op accumulates onto what dst holds: Z, in the primitive's layout
      memory user_z(plan->user_dst_md, eng, const_cast<void*>(z->raw_data()));
      if (dst != user_dst) {
        dnnl::reorder(user_z, dst).execute(s, user_z, dst);
      } else if (z->raw_data() != y.raw_data()) {
        std::memcpy(y.raw_data(), z->raw_data(), z->NumElements() * sizeof(float));
      }
    }
    ExecutePrimitive(plan->prim, s, args);
    if (dst != user_dst) dnnl::reorder(dst, user_dst).execute(s, dst, user_dst);
    s.wait();
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

  StatusOr<std::shared_ptr<const ConvPlan>> BuildPlan(const Node& node, const Shape& xs,
                                                       const Shape& ws, bool has_bias) const {
    std::vector<int64_t> in(xs.begin() + 2, xs.end()), kernel(ws.begin() + 2, ws.end());
    ASSIGN_OR_RETURN(WindowGeometry g, ResolveWindow(attrs_, in, kernel, node.Describe()));
    auto plan = std::make_shared<ConvPlan>();
    plan->out_shape = {xs[0], ws[0]};
    plan->out_shape.insert(plan->out_shape.end(), g.out.begin(), g.out.end());
    memory::dims wdims;
    if (group_ > 1) {
      wdims = {group_, ws[0] / group_, ws[1]};
      wdims.insert(wdims.end(), kernel.begin(), kernel.end());
    } else {
      wdims = ToDims(ws);
    }
    const auto f32 = memory::data_type::f32;
    plan->user_src_md = PlainDesc(ToDims(xs));
    plan->user_weights_md = PlainDesc(wdims);
    plan->user_dst_md = PlainDesc(ToDims(plan->out_shape));
    memory::desc src_any(ToDims(xs), f32, tag::any), w_any(wdims, f32, tag::any),
        dst_any(ToDims(plan->out_shape), f32, tag::any), bias_md({ws[0]}, f32, tag::a);
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    const memory::dims strides = ToDims(g.strides), dil = DnnlDilations(g.dilations),
                       pl = ToDims(g.pad_begin), pr = ToDims(g.pad_end);
    auto conv_desc = [&](const memory::desc& src, const memory::desc& dst) {
      return has_bias ? dnnl::convolution_forward::desc(prop, alg, src, w_any, bias_md, dst,
                                                        strides, dil, pl, pr)
                      : dnnl::convolution_forward::desc(prop, alg, src, w_any, dst, strides, dil,
                                                        pl, pr);
    };
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops_);
    // A first layer (2-D, ungrouped, fewer than 16 input channels: an image's 3) reads its input
    // as it is (NCHW) and writes oneDNN's channel-blocked layout, whose reorder back to NCHW is
    // cheap. Left to choose (`any`), oneDNN picks NHWC for both, and the reorder of the NHWC
    // output back to NCHW cost more than the convolution's own gain: ResNet-50's stem on an Intel
    // Xeon (AVX-512, 2 threads, ONEDNN_VERBOSE) 0.06 + 0.79 + 0.57 ms (input reorder,
    // convolution, output reorder) against 0.72 + 0.17 ms. Taken only when oneDNN has a real
    // kernel for it (not its reference one), else the `any` choice as for every other layer.
    std::optional<dnnl::convolution_forward::primitive_desc> first;
    if (xs.size() == 4 && group_ == 1 && xs[1] < 16) {
      const memory::desc src_plain(ToDims(xs), f32, tag::abcd),
          dst_blocked(ToDims(plan->out_shape), f32, DnnlHasAvx512() ? tag::aBcd16b : tag::aBcd8b);
      dnnl::convolution_forward::primitive_desc fpd(conv_desc(src_plain, dst_blocked),
                                                    UserScratchpad(attr), DnnlEngine(),
                                                    /*allow_empty=*/true);
      if (DnnlHasKernel(fpd)) first = fpd;
    }
    dnnl::convolution_forward::primitive_desc pd =
        first ? *first
              : dnnl::convolution_forward::primitive_desc(conv_desc(src_any, dst_any),
                                                          UserScratchpad(attr), DnnlEngine());
    plan->prim = dnnl::convolution_forward(pd);
    plan->src_md = pd.src_desc();
    plan->weights_md = pd.weights_desc();
    plan->dst_md = pd.dst_desc();
    if (const_w_.defined()) plan->weights = const_w_.Get(plan->user_weights_md, plan->weights_md);
    return std::shared_ptr<const ConvPlan>(std::move(plan));
  }

  bool has_sum_ = false;  // ai.inferd.Conv with a residual input Z (input 3)
};

// ---------------------------------------------------------------------------------------------
// ConvTranspose

struct DeconvPlan {
  dnnl::deconvolution_forward prim;
  memory::desc src_md, weights_md, dst_md;
  memory::desc user_src_md, user_weights_md, prim_dst_md;  // prim_dst_md: plain, what prim writes
  memory weights;
  Shape out_shape;   // the node's output
  Shape prim_shape;  // what the primitive produces (== out_shape unless cropping)
  // When the output is not exactly the primitive's result (negative pads, output_padding), the
  // primitive runs unpadded and the output takes prim[o + crop_begin], zero outside, plus bias.
  bool crop = false;
  std::vector<int64_t> crop_begin;
};

class ConvTransposeKernel final : public WindowedKernel<DeconvPlan> {
 public:
  Status Init(const KernelInfo& info) override {
    RETURN_IF_ERROR(InitCommon(info));
    output_padding_ = info.node().GetInts("output_padding");
    output_shape_ = info.node().GetInts("output_shape");
    return Status::Ok();
  }

 private:
  Status Run(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x_in = ctx.Input(0);
    const Tensor* w_in = ctx.Input(1);
    RETURN_IF_ERROR(CheckXW(node, x_in, w_in));
    const Shape& xs = x_in->shape();
    const Shape& ws = w_in->shape();
    if (ws[0] != xs[1] || xs[1] % group_ != 0) {
      return InvalidArgument("{}: X has {} channels but W has {} input channels (group {})",
                             node.Describe(), xs[1], ws[0], group_);
    }
    const int64_t m = ws[1] * group_;
    const Tensor* b_in = ctx.Input(2);
    if (b_in && (b_in->rank() != 1 || b_in->dim(0) != m)) {
      return InvalidArgument("{}: B must have shape [{}], got {}", node.Describe(), m,
                             ShapeToString(b_in->shape()));
    }
    ASSIGN_OR_RETURN(auto plan, GetPlan(CacheKey(xs, ws), [&] {
                       return BuildPlan(node, xs, ws, b_in != nullptr);
                     }));
    const DataType dtype = x_in->dtype();
    if (NumElements(plan->out_shape) == 0) {
      ctx.AllocateOutput(0, dtype, plan->out_shape);
      return Status::Ok();
    }
    Tensor x = ToFloat32(*x_in);
    Tensor y = dtype == DataType::kFloat32 ? *ctx.AllocateOutput(0, dtype, plan->out_shape)
                                           : Tensor::Allocate(DataType::kFloat32, plan->out_shape);
    Tensor b;
    if (b_in) b = const_b_.defined() ? const_b_ : ToFloat32(*b_in);
    Tensor full = plan->crop ? Tensor::Allocate(DataType::kFloat32, plan->prim_shape) : y;
    dnnl::engine& eng = DnnlEngine();
    dnnl::stream s(eng);
    RunMemories mem = BindMemories(*plan, x, *w_in, s, plan->prim_dst_md, full.raw_data());
    memory& user_dst = mem.user_dst;
    memory& dst = mem.dst;
    std::unordered_map<int, memory>& args = mem.args;
    if (b_in && !plan->crop) args[DNNL_ARG_BIAS] = memory(PlainDesc({m}), eng, b.raw_data());
    ExecutePrimitive(plan->prim, s, args);
    if (dst != user_dst) dnnl::reorder(dst, user_dst).execute(s, dst, user_dst);
    s.wait();
    if (plan->crop) Crop(*plan, full, b_in ? b.data<float>() : nullptr, &y);
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

  static void Crop(const DeconvPlan& plan, const Tensor& full, const float* bias, Tensor* y) {
    const Shape& os = plan.out_shape;
    const Shape& fs = plan.prim_shape;
    const int64_t r = static_cast<int64_t>(os.size()) - 2;
    const int64_t planes = os[0] * os[1];
    const int64_t out_plane = NumElements(Shape(os.begin() + 2, os.end()));
    const int64_t full_plane = NumElements(Shape(fs.begin() + 2, fs.end()));
    const std::vector<int64_t> fstrides = StridesOf(Shape(fs.begin() + 2, fs.end()));
    const float* src = full.data<float>();
    float* dst = y->data<float>();
    ParallelFor(planes, 1, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> idx(r);
      for (int64_t p = begin; p < end; ++p) {
        const float bv = bias ? bias[p % os[1]] : 0.f;
        const float* fp = src + p * full_plane;
        float* yp = dst + p * out_plane;
        std::fill(idx.begin(), idx.end(), 0);
        for (int64_t o = 0; o < out_plane; ++o) {
          int64_t off = 0;
          bool inside = true;
          for (int64_t d = 0; d < r; ++d) {
            const int64_t f = idx[d] + plan.crop_begin[d];
            if (f < 0 || f >= fs[d + 2]) {
              inside = false;
              break;
            }
            off += f * fstrides[d];
          }
          yp[o] = (inside ? fp[off] : 0.f) + bv;
          for (int64_t d = r - 1; d >= 0; --d) {
            if (++idx[d] < os[d + 2]) break;
            idx[d] = 0;
          }
        }
      }
    });
  }

  StatusOr<std::shared_ptr<const DeconvPlan>> BuildPlan(const Node& node, const Shape& xs,
                                                         const Shape& ws, bool has_bias) const {
    const size_t r = xs.size() - 2;
    std::vector<int64_t> in(xs.begin() + 2, xs.end()), kernel(ws.begin() + 2, ws.end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) {
      return InvalidArgument("{}: kernel_shape does not match W {}", node.Describe(),
                             ShapeToString(ws));
    }
    auto pick = [&](const std::vector<int64_t>& v, int64_t def,
                    const char* name) -> StatusOr<std::vector<int64_t>> {
      if (v.empty()) return std::vector<int64_t>(r, def);
      if (v.size() != r) {
        return InvalidArgument("{}: {} has {} values, expected {}", node.Describe(), name,
                               v.size(), r);
      }
      return v;
    };
    ASSIGN_OR_RETURN(std::vector<int64_t> strides, pick(attrs_.strides, 1, "strides"));
    ASSIGN_OR_RETURN(std::vector<int64_t> dilations, pick(attrs_.dilations, 1, "dilations"));
    ASSIGN_OR_RETURN(std::vector<int64_t> out_pad, pick(output_padding_, 0, "output_padding"));
    std::vector<int64_t> pads = attrs_.pads;
    if (pads.empty()) pads.assign(2 * r, 0);
    if (pads.size() != 2 * r) return InvalidArgument("{}: pads must have {} values", node.Describe(), 2 * r);
    std::vector<int64_t> out_spatial;
    if (!output_shape_.empty()) {
      if (output_shape_.size() < r) {
        return InvalidArgument("{}: output_shape needs {} values", node.Describe(), r);
      }
      out_spatial.assign(output_shape_.end() - r, output_shape_.end());
    } else if (attrs_.auto_pad == "SAME_UPPER" || attrs_.auto_pad == "SAME_LOWER") {
      for (size_t i = 0; i < r; ++i) out_spatial.push_back(in[i] * strides[i]);
    }
    auto plan = std::make_shared<DeconvPlan>();
    std::vector<int64_t> pb(r), pe(r), full(r), out(r);
    for (size_t i = 0; i < r; ++i) {
      full[i] = strides[i] * (in[i] - 1) + (kernel[i] - 1) * dilations[i] + 1;
      if (!out_spatial.empty()) {
        out[i] = out_spatial[i];
        const int64_t total = full[i] + out_pad[i] - out[i];
        if (total <= 0) {
          pb[i] = 0;
        } else {
          // As the ONNX spec (and its backend tests): SAME_UPPER puts the odd pad at the end.
          pb[i] = attrs_.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        }
      } else {
        if (attrs_.auto_pad != "VALID") pb[i] = pads[i];
        out[i] = full[i] + out_pad[i] - pb[i] - (attrs_.auto_pad == "VALID" ? 0 : pads[i + r]);
      }
      if (out[i] < 0) return InvalidArgument("{}: negative output size", node.Describe());
      pe[i] = full[i] - pb[i] - out[i];
      if (pe[i] < 0) plan->crop = true;
    }
    const int64_t m = ws[1] * group_;
    plan->out_shape = {xs[0], m};
    plan->out_shape.insert(plan->out_shape.end(), out.begin(), out.end());
    plan->prim_shape = plan->out_shape;
    if (plan->crop) {
      plan->crop_begin = pb;
      for (size_t i = 0; i < r; ++i) plan->prim_shape[i + 2] = full[i];
      std::fill(pb.begin(), pb.end(), 0);
      std::fill(pe.begin(), pe.end(), 0);
      has_bias = false;
    }
    if (NumElements(plan->out_shape) == 0) return std::shared_ptr<const DeconvPlan>(plan);
    // ONNX W is [C, M/group, k...] = (g, ic, oc, k...) in memory; oneDNN's logical order is
    // (g, oc, ic, k...), so the user descriptor permutes through strides.
    const int64_t icg = ws[0] / group_, ocg = ws[1];
    const int64_t ksize = NumElements(kernel);
    memory::dims wdims, wstrides;
    const memory::dims kstrides = PlainStrides(ToDims(kernel));
    if (group_ > 1) {
      wdims = {group_, ocg, icg};
      wstrides = {icg * ocg * ksize, ksize, ocg * ksize};
    } else {
      wdims = {ocg, icg};
      wstrides = {ksize, ocg * ksize};
    }
    wdims.insert(wdims.end(), kernel.begin(), kernel.end());
    wstrides.insert(wstrides.end(), kstrides.begin(), kstrides.end());
    const auto f32 = memory::data_type::f32;
    plan->user_src_md = PlainDesc(ToDims(xs));
    plan->user_weights_md = memory::desc(wdims, f32, wstrides);
    plan->prim_dst_md = PlainDesc(ToDims(plan->prim_shape));
    memory::desc src_any(ToDims(xs), f32, tag::any), w_any(wdims, f32, tag::any),
        dst_any(ToDims(plan->prim_shape), f32, tag::any), bias_md({m}, f32, tag::a);
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::deconvolution_direct;
    const memory::dims st = ToDims(strides), dil = DnnlDilations(dilations), pl = ToDims(pb),
                       pr = ToDims(pe);
    auto desc = has_bias ? dnnl::deconvolution_forward::desc(prop, alg, src_any, w_any, bias_md,
                                                            dst_any, st, dil, pl, pr)
                         : dnnl::deconvolution_forward::desc(prop, alg, src_any, w_any, dst_any,
                                                            st, dil, pl, pr);
    dnnl::primitive_attr attr;
    if (!plan->crop) attr.set_post_ops(post_ops_);
    dnnl::deconvolution_forward::primitive_desc pd(desc, UserScratchpad(attr), DnnlEngine());
    plan->prim = dnnl::deconvolution_forward(pd);
    plan->src_md = pd.src_desc();
    plan->weights_md = pd.weights_desc();
    plan->dst_md = pd.dst_desc();
    if (const_w_.defined()) plan->weights = const_w_.Get(plan->user_weights_md, plan->weights_md);
    return std::shared_ptr<const DeconvPlan>(std::move(plan));
  }

  std::vector<int64_t> output_padding_;
  std::vector<int64_t> output_shape_;
};

}  // namespace

void RegisterConvKernels(KernelRegistry& r) {
  const std::vector<DataType> types = {DataType::kFloat32, DataType::kFloat16,
                                       DataType::kBFloat16, DataType::kFloat64};
  r.Add("Conv", 1, kOpsetMax, types, MakeKernel<ConvKernel>());
  r.Add("ConvTranspose", 1, kOpsetMax, types, MakeKernel<ConvTransposeKernel>());
}

}  // namespace inferd::cpu
