// ai.inferd.Gelu(X) -> Y, attribute approximate = "none" (erf form, default) | "tanh" — the same
// contract as ONNX opset-20 Gelu, written by GeluFusion (src/optimizer/gelu_fusion.cc).
//
// float32 runs on oneDNN's vectorized eltwise (primitives cached per element count); float16,
// bfloat16 and float64 are staged through float32.
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/onednn/dnnl_kernel.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/util/float32.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

class GeluKernel final : public DnnlKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const std::string approx = info.node().GetString("approximate", "none");
    if (approx == "none") {
      alg_ = dnnl::algorithm::eltwise_gelu_erf;
    } else if (approx == "tanh") {
      alg_ = dnnl::algorithm::eltwise_gelu_tanh;
    } else {
      return InvalidArgument("{}: approximate must be 'none' or 'tanh', got '{}'",
                             info.node().Describe(), approx);
    }
    return Status::Ok();
  }

 private:
  Status Run(KernelContext& ctx) const override {
    const Tensor* x_in = ctx.Input(0);
    if (!x_in) return InvalidArgument("{}: X is required", ctx.node().Describe());
    const DataType dtype = x_in->dtype();
    const int64_t n = x_in->NumElements();
    Tensor x = ToFloat32(*x_in);
    Tensor y = dtype == DataType::kFloat32
                   ? *ctx.AllocateOutputUninitialized(0, dtype, x_in->shape())
                   : Tensor::Allocate(DataType::kFloat32, x_in->shape());
    if (n > 0) {
      std::shared_ptr<const dnnl::eltwise_forward> prim = GetPrimitive(n);
      const dnnl::memory::desc md = PlainDesc({n});
      dnnl::engine& eng = DnnlEngine();
      dnnl::stream s(eng);
      ExecutePrimitive(*prim, s, {{DNNL_ARG_SRC, dnnl::memory(md, eng, x.raw_data())},
                        {DNNL_ARG_DST, dnnl::memory(md, eng, y.raw_data())}});
      s.wait();
    }
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

  std::shared_ptr<const dnnl::eltwise_forward> GetPrimitive(int64_t n) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg_, PlainDesc({n}), 0.f,
                                  0.f);
    auto prim = std::make_shared<const dnnl::eltwise_forward>(
        dnnl::eltwise_forward::primitive_desc(d, UserScratchpad(), DnnlEngine()));
    return cache_.emplace(n, std::move(prim)).first->second;
  }

  dnnl::algorithm alg_ = dnnl::algorithm::eltwise_gelu_erf;
  mutable std::mutex mu_;
  mutable std::map<int64_t, std::shared_ptr<const dnnl::eltwise_forward>> cache_;  // by mu_
};

}  // namespace

void RegisterGeluKernel(KernelRegistry& r) {
  KernelDef def;
  def.domain = kInferdDomain;
  def.op_type = "Gelu";
  def.types = FloatTypes();
  def.factory = MakeKernel<GeluKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
