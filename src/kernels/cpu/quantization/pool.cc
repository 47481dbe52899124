// ai.inferd.MaxPool: MaxPool over uint8/int8 tensors on oneDNN's int8 pooling, NCHW or NHWC per
// side (attributes x_channels_last / y_channels_last, the [N, H, W, C] layout of
// Int8LayoutPropagation). Written by QdqFusion for DequantizeLinear → MaxPool → QuantizeLinear
// with equal parameters (max commutes with a monotonic quantization, so the pool runs on the
// quantized values exactly). Attributes otherwise as ONNX MaxPool for 2-D windows, without the
// Indices output and with storage_order 0.
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cpu/nn/window.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/quantization/conv_dnnl.h"
#include "kernels/cpu/quantization/quant_util.h"
#include "kernels/cpu/quantization/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

class QMaxPoolKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    RETURN_IF_ERROR(attrs_.Parse(node, true));
    if (attrs_.kernel_shape.size() != 2) {
      return InvalidArgument("{}: needs a 2-D kernel_shape", node.Describe());
    }
    if (node.outputs.size() > 1 || node.GetInt("storage_order", 0) != 0) {
      return InvalidArgument("{}: no Indices output or storage_order", node.Describe());
    }
    x_cl_ = node.GetInt("x_channels_last", 0) != 0;
    y_cl_ = node.GetInt("y_channels_last", 0) != 0;
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr || !IsQuantType(x->dtype()) || x->rank() != 4) {
      return InvalidArgument("{}: x must be a rank-4 uint8/int8 tensor", ctx.node().Describe());
    }
    return DnnlTry(ctx.node(), [&]() -> Status {
      ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, GetPlan(ctx.node(), *x));
      Tensor* y = ctx.AllocateOutputUninitialized(0, x->dtype(), plan->out_shape);
      if (x->NumElements() == 0 || y->NumElements() == 0) return Status::Ok();
      dnnl::engine& eng = DnnlEngine();
      dnnl::stream s(eng);
      memory src(plan->src_md, eng, const_cast<void*>(x->raw_data()));
      memory dst(plan->dst_md, eng, y->raw_data());
      ExecutePrimitive(plan->prim, s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
      s.wait();
      return Status::Ok();
    });
  }

 private:
  struct Plan {
    dnnl::pooling_v2_forward prim;
    memory::desc src_md, dst_md;
    Shape out_shape;
  };

  StatusOr<std::shared_ptr<const Plan>> GetPlan(const Node& node, const Tensor& x) const {
    const Shape& phys = x.shape();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = plans_.find(std::make_pair(phys, x.dtype()));
      if (it != plans_.end()) return it->second;
    }
    const Shape xs = x_cl_ ? ChannelsFirstShape(phys) : phys;
    ASSIGN_OR_RETURN(WindowGeometry g, ResolveWindow(attrs_, {xs[2], xs[3]}, attrs_.kernel_shape,
                                                     node.Describe()));
    const Shape ys = {xs[0], xs[1], g.out[0], g.out[1]};
    auto plan = std::make_shared<Plan>();
    plan->out_shape = y_cl_ ? ChannelsLastShape(ys) : ys;
    const auto dt = ToDnnl(x.dtype());
    plan->src_md = memory::desc(ToDims(xs), dt, x_cl_ ? tag::nhwc : tag::nchw);
    plan->dst_md = memory::desc(ToDims(ys), dt, y_cl_ ? tag::nhwc : tag::nchw);
    dnnl::pooling_v2_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, plan->src_md,
        plan->dst_md, ToDims(g.strides), ToDims(g.kernel), DnnlDilations(g.dilations),
        ToDims(g.pad_begin), ToDims(g.pad_end));
    dnnl::pooling_v2_forward::primitive_desc pd(desc, UserScratchpad(), DnnlEngine());
    plan->prim = dnnl::pooling_v2_forward(pd);
    std::lock_guard<std::mutex> lock(mu_);
    return plans_.emplace(std::make_pair(phys, x.dtype()), std::move(plan)).first->second;
  }

  WindowAttrs attrs_;
  bool x_cl_ = false, y_cl_ = false;
  mutable std::mutex mu_;
  mutable std::map<std::pair<Shape, DataType>, std::shared_ptr<const Plan>> plans_;  // mu_
};

}  // namespace

void RegisterQuantPoolKernels(KernelRegistry& r) {
  KernelDef def;
  def.domain = "ai.inferd";
  def.op_type = "MaxPool";
  def.since_version = 1;
  def.until_version = kOpsetMax;
  def.types = {DataType::kUInt8, DataType::kInt8};
  def.factory = MakeKernel<QMaxPoolKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
