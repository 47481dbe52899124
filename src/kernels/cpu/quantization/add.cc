// ai.inferd.DequantizeAdd(x_q, x_scale, x_zero_point, b) -> y = (x_q - zp) * scale + b, then the
// optional "activation" = "Relu". Written by QdqFusion for the residual joins of QDQ models
// (DequantizeLinear → Add → Relu): one pass over memory instead of three. x_q is uint8/int8 with a
// per-tensor scale and zero point; b is float32 of the same shape (the pass checks it; the kernel
// rejects anything else).
#include <algorithm>

#include "kernels/cpu/quantization/quant_util.h"
#include "kernels/cpu/quantization/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

class DequantizeAddKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const std::string act = info.node().GetString("activation", "");
    if (!act.empty() && act != "Relu") {
      return InvalidArgument("{}: unsupported activation '{}'", info.node().Describe(), act);
    }
    relu_ = act == "Relu";
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* scale = ctx.Input(1);
    const Tensor* zp = ctx.Input(2);
    const Tensor* b = ctx.Input(3);
    if (!x || !scale || !zp || !b) return InvalidArgument("DequantizeAdd needs 4 inputs");
    if (!IsQuantType(x->dtype()) || zp->dtype() != x->dtype() || zp->NumElements() != 1 ||
        scale->dtype() != DataType::kFloat32 || scale->NumElements() != 1) {
      return InvalidArgument(
          "DequantizeAdd: x must be uint8/int8 with a per-tensor zero point of "
          "its type and a float32 scale");
    }
    if (b->dtype() != DataType::kFloat32 || b->shape() != x->shape()) {
      return InvalidArgument("DequantizeAdd: b must be float32 of shape {}, got {}",
                             ShapeToString(x->shape()), b->DebugString());
    }
    Tensor* y = ctx.AllocateOutputUninitialized(0, DataType::kFloat32, x->shape());
    const float s = scale->data<float>()[0];
    const int32_t z = static_cast<int32_t>(zp->GetAsInt64(0));
    auto run = [&](auto tag) {
      using Q = decltype(tag);
      const Q* xq = x->data<Q>();
      const float* bb = b->data<float>();
      float* out = y->data<float>();
      ParallelFor(x->NumElements(), 16384, [&](int64_t lo, int64_t hi) {
        if (relu_) {
          for (int64_t i = lo; i < hi; ++i) {
            out[i] = std::max(0.f, static_cast<float>(static_cast<int32_t>(xq[i]) - z) * s + bb[i]);
          }
        } else {
          for (int64_t i = lo; i < hi; ++i) {
            out[i] = static_cast<float>(static_cast<int32_t>(xq[i]) - z) * s + bb[i];
          }
        }
      });
    };
    if (x->dtype() == DataType::kUInt8) {
      run(uint8_t{});
    } else {
      run(int8_t{});
    }
    return Status::Ok();
  }

 private:
  bool relu_ = false;
};

}  // namespace

void RegisterQuantAddKernels(KernelRegistry& r) {
  KernelDef def;
  def.domain = "ai.inferd";
  def.op_type = "DequantizeAdd";
  def.since_version = 1;
  def.until_version = kOpsetMax;
  def.types = {DataType::kUInt8, DataType::kInt8};
  def.factory = MakeKernel<DequantizeAddKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
