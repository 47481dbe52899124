#include "kernels/cpu/quantization/conv_dnnl.h"

#include <dnnl.hpp>

#include <cstring>

#include "kernels/cpu/nn/window.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/onednn/scratch.h"
#include "kernels/cpu/quantization/quant_util.h"

namespace inferd::cpu {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

struct DnnlQConv::Plan {
  dnnl::convolution_forward prim;
  memory::desc src_md, dst_md, user_src_md, user_dst_md;
  memory weights, bias, src_zp, dst_zp;
  Shape out_shape;  // in y's layout
};

Shape ChannelsLastShape(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }
Shape ChannelsFirstShape(const Shape& s) { return {s[0], s[3], s[1], s[2]}; }

StatusOr<std::unique_ptr<DnnlQConv>> DnnlQConv::Create(QConvParams p) {
  if (p.weights.dtype() != DataType::kInt8 || p.weights.rank() < 3 || p.weights.rank() > 5) {
    return InvalidArgument("oneDNN int8 conv needs int8 weights of rank 3-5");
  }
  if (!IsQuantType(p.x_type) || !IsQuantType(p.y_type)) {
    return InvalidArgument("oneDNN int8 conv needs uint8/int8 activations");
  }
  if ((p.x_channels_last || p.y_channels_last) && p.weights.rank() != 4) {
    return InvalidArgument("channels-last int8 conv needs a 2-D convolution");
  }
  if (p.relu && !p.residual) return InvalidArgument("relu is only fused with a residual join");
  const int64_t m = p.weights.dim(0);
  if (p.w_scales.size() != 1 && static_cast<int64_t>(p.w_scales.size()) != m) {
    return InvalidArgument("weight scales must be per tensor or per output channel");
  }
  if (!p.bias.empty() && static_cast<int64_t>(p.bias.size()) != m) {
    return InvalidArgument("bias must have one value per output channel");
  }
  if (p.group < 1 || m % p.group != 0) return InvalidArgument("bad group");
  if (!DnnlInt8IsExact(p.x_type, p.weights)) {
    return Unimplemented("oneDNN int8 conv would saturate on this CPU (no AVX-512 VNNI)");
  }
  return std::unique_ptr<DnnlQConv>(new DnnlQConv(std::move(p)));
}

StatusOr<Shape> DnnlQConv::OutputShape(const Node& node, const Shape& x) const {
  ASSIGN_OR_RETURN(auto plan, GetPlan(node, x));
  return plan->out_shape;
}

StatusOr<std::shared_ptr<const DnnlQConv::Plan>> DnnlQConv::GetPlan(const Node& node,
                                                                    const Shape& x_phys) const {
  Shape key = x_phys;
  key.push_back(PrimitiveThreads());  // its primitives run on the threads they were made for
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }
  const Shape& ws = p_.weights.shape();
  if (p_.x_channels_last && x_phys.size() != 4) {
    return InvalidArgument("{}: channels-last input must be rank 4, got {}", node.Describe(),
                           ShapeToString(x_phys));
  }
  const Shape xs = p_.x_channels_last ? ChannelsFirstShape(x_phys) : x_phys;
  if (xs.size() != ws.size() || xs[1] != ws[1] * p_.group) {
    return InvalidArgument("{}: input {} does not fit weight {} with group {}", node.Describe(),
                           ShapeToString(x_phys), ShapeToString(ws), p_.group);
  }
  std::vector<int64_t> in(xs.begin() + 2, xs.end()), kernel(ws.begin() + 2, ws.end());
  ASSIGN_OR_RETURN(WindowGeometry g, ResolveWindow(p_.window, in, kernel, node.Describe()));
  auto plan = std::make_shared<Plan>();
  Shape ys = {xs[0], ws[0]};
  ys.insert(ys.end(), g.out.begin(), g.out.end());
  plan->out_shape = p_.y_channels_last ? ChannelsLastShape(ys) : ys;
  memory::dims wdims;
  if (p_.group > 1) {
    wdims = {p_.group, ws[0] / p_.group, ws[1]};
    wdims.insert(wdims.end(), kernel.begin(), kernel.end());
  } else {
    wdims = ToDims(ws);
  }
  const auto xt = ToDnnl(p_.x_type);
  const auto yt = p_.residual ? memory::data_type::f32 : ToDnnl(p_.y_type);
  const auto s8 = memory::data_type::s8, s32 = memory::data_type::s32;
  plan->user_src_md = p_.x_channels_last ? memory::desc(ToDims(xs), xt, tag::nhwc)
                                         : PlainDesc(ToDims(xs), xt);
  plan->user_dst_md = p_.y_channels_last ? memory::desc(ToDims(ys), yt, tag::nhwc)
                                         : PlainDesc(ToDims(ys), yt);
  // Channels-last sides are fixed to NHWC (what the int8 kernels use anyway); plain sides let
  // oneDNN choose and are reordered per call.
  memory::desc src_md = p_.x_channels_last ? plan->user_src_md : memory::desc(ToDims(xs), xt, tag::any);
  memory::desc dst_md = p_.y_channels_last ? plan->user_dst_md : memory::desc(ToDims(ys), yt, tag::any);
  memory::desc w_any(wdims, s8, tag::any), bias_md({ws[0]}, s32, tag::a);
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto alg = dnnl::algorithm::convolution_direct;
  const memory::dims strides = ToDims(g.strides), dil = DnnlDilations(g.dilations),
                     pl = ToDims(g.pad_begin), pr = ToDims(g.pad_end);
  const bool has_bias = !p_.bias.empty();
  auto desc = has_bias ? dnnl::convolution_forward::desc(prop, alg, src_md, w_any, bias_md,
                                                         dst_md, strides, dil, pl, pr)
                       : dnnl::convolution_forward::desc(prop, alg, src_md, w_any, dst_md,
                                                         strides, dil, pl, pr);
  dnnl::primitive_attr attr;
  std::vector<float> scales(p_.w_scales.size());
  for (size_t i = 0; i < scales.size(); ++i) {
    scales[i] = p_.x_scale * p_.w_scales[i] / p_.y_scale;
  }
  attr.set_output_scales(scales.size() > 1 ? 2 : 0, scales);
  if (p_.x_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (p_.residual) {
    // round(v) then saturate as the quantized type would (q - zp within [qmin - zp, qmax - zp]),
    // dequantize, add Z (already in dst), activation.
    const float qmin = p_.y_type == DataType::kUInt8 ? 0.f : -128.f;
    const float qmax = p_.y_type == DataType::kUInt8 ? 255.f : 127.f;
    const float zp = static_cast<float>(p_.y_zero_point);
    dnnl::post_ops po;
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_round, 0.f, 0.f);
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, qmin - zp, qmax - zp);
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, p_.y_scale, 0.f);
    po.append_sum(1.f);
    if (p_.relu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
  } else if (p_.y_zero_point != 0) {
    attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  }
  dnnl::engine& eng = DnnlEngine();
  dnnl::convolution_forward::primitive_desc pd(desc, UserScratchpad(attr), eng);
  plan->prim = dnnl::convolution_forward(pd);
  plan->src_md = pd.src_desc();
  plan->dst_md = pd.dst_desc();
  dnnl::stream s(eng);
  {
    // One packed copy per weights layout, shared by the plans of all input shapes.
    std::lock_guard<std::mutex> lock(mu_);
    for (const memory& w : packed_weights_) {
      if (w.get_desc() == pd.weights_desc()) plan->weights = w;
    }
    if (!plan->weights) {
      memory user_w(PlainDesc(wdims, s8), eng, const_cast<void*>(p_.weights.raw_data()));
      plan->weights = memory(pd.weights_desc(), eng);
      dnnl::reorder(user_w, plan->weights).execute(s, user_w, plan->weights);
      s.wait();
      packed_weights_.push_back(plan->weights);
    }
  }
  if (has_bias) {
    plan->bias = memory(bias_md, eng);
    std::memcpy(plan->bias.get_data_handle(), p_.bias.data(), p_.bias.size() * sizeof(int32_t));
  }
  auto zp_mem = [&](int32_t v) {
    memory mem(memory::desc({1}, s32, tag::a), eng);
    *static_cast<int32_t*>(mem.get_data_handle()) = v;
    return mem;
  };
  if (p_.x_zero_point != 0) plan->src_zp = zp_mem(p_.x_zero_point);
  if (p_.y_zero_point != 0 && !p_.residual) plan->dst_zp = zp_mem(p_.y_zero_point);
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.emplace(std::move(key), std::move(plan)).first->second;
}

Status DnnlQConv::Run(const Node& node, const Tensor& x, const Tensor* z, Tensor* y) const {
  return DnnlTry(node, [&]() -> Status {
    ASSIGN_OR_RETURN(auto plan, GetPlan(node, x.shape()));
    if (y->shape() != plan->out_shape)
      return Internal("{}: output shape mismatch", node.Describe());
    if (p_.residual) {
      if (z == nullptr || z->dtype() != DataType::kFloat32 || z->shape() != y->shape()) {
        return InvalidArgument("{}: residual Z must be float32 of shape {}, got {}",
                               node.Describe(), ShapeToString(y->shape()),
                               z ? z->DebugString() : std::string("none"));
      }
    }
    if (x.NumElements() == 0 || y->NumElements() == 0) return Status::Ok();
    dnnl::engine& eng = DnnlEngine();
    dnnl::stream s(eng);
    memory user_src(plan->user_src_md, eng, const_cast<void*>(x.raw_data()));
    const memory src = ReorderIfNeeded(user_src, plan->src_md, s, 0);
    memory user_dst(plan->user_dst_md, eng, y->raw_data());
    memory dst = plan->dst_md == plan->user_dst_md
                     ? user_dst
                     : ScratchMemory(plan->dst_md, 1);
    if (p_.residual) {
      // The sum post-op accumulates onto dst: put Z there first (nothing to do when y took over
      // Z's buffer and dst is y).
      memory user_z(plan->user_dst_md, eng, const_cast<void*>(z->raw_data()));
      if (dst != user_dst) {
        dnnl::reorder(user_z, dst).execute(s, user_z, dst);
      } else if (z->raw_data() != y->raw_data()) {
        std::memcpy(y->raw_data(), z->raw_data(), z->ByteSize());
      }
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, plan->weights}, {DNNL_ARG_DST, dst}};
    if (plan->bias) args[DNNL_ARG_BIAS] = plan->bias;
    if (plan->src_zp) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = plan->src_zp;
    if (plan->dst_zp) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = plan->dst_zp;
    ExecutePrimitive(plan->prim, s, args);
    if (dst != user_dst) dnnl::reorder(dst, user_dst).execute(s, dst, user_dst);
    s.wait();
    return Status::Ok();
  });
}

}  // namespace inferd::cpu
