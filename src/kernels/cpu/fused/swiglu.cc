// ai.inferd.SwiGlu(X [..., 2F]) -> Y [..., F]: Y = SiLU(gate) * up, gate and up the two halves of
// each row of X (gate first when gate_first = 1, the default), written by SwiGluFusion
// (src/optimizer/swiglu_fusion.h) in place of Split + Sigmoid + Mul + Mul after the gate/up merge.
// float32. SiLU(x) = x * sigmoid(x) with sigmoid from e^-|x| (never overflows), 8 lanes at a time
// with GCC/clang vector extensions (as attention/flash_attention.cc).
#include <cmath>
#include <cstring>

#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/vec8.h"

namespace inferd::cpu {
namespace {

// V8, Load, Store, Splat: util/vec8.h.

// e^x for x <= 0 (Cephes' polynomial after round-to-nearest range reduction, as ExpV8 in
// flash_attention.cc): relative error ~1e-7.
inline V8 ExpNonPositive(V8 x) {
  x = x < Splat(-87.3f) ? Splat(-87.3f) : x;
  const V8 fx = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
  const V8 r = x - fx * 0.693359375f + fx * 2.12194440e-4f;
  V8 p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const V8i bits = (__builtin_convertvector(fx, V8i) + 127) << 23;
  V8 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

inline V8 SiLU(V8 x) {
  const V8 e = ExpNonPositive(x < Splat(0.f) ? x : -x);  // e^-|x|
  const V8 sig = x < Splat(0.f) ? e / (1.f + e) : 1.f / (1.f + e);
  return x * sig;
}

inline float SiLU(float x) {
  const float e = std::exp(-std::fabs(x));
  return x * (x < 0.f ? e / (1.f + e) : 1.f / (1.f + e));
}

class SwiGluKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    gate_first_ = info.node().GetInt("gate_first", 1) != 0;
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    if (!x) return InvalidArgument("{}: X is required", node.Describe());
    if (x->dtype() != DataType::kFloat32) {
      return InvalidArgument("{}: X must be float32, got {}", node.Describe(),
                             DataTypeName(x->dtype()));
    }
    if (x->rank() < 1 || x->dim(x->rank() - 1) % 2 != 0) {
      return InvalidArgument("{}: X's last dim must be even (gate and up halves), got {}",
                             node.Describe(), ShapeToString(x->shape()));
    }
    Shape out = x->shape();
    const int64_t f = out.back() / 2;
    out.back() = f;
    Tensor* y = ctx.AllocateOutputUninitialized(0, DataType::kFloat32, out);
    const int64_t rows = f == 0 ? 0 : y->NumElements() / f;
    const float* xd = x->data<float>();
    float* yd = y->data<float>();
    const int64_t gate_off = gate_first_ ? 0 : f, up_off = gate_first_ ? f : 0;
    ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(f, 1)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t r = begin; r < end; ++r) {
                    const float* gate = xd + r * 2 * f + gate_off;
                    const float* up = xd + r * 2 * f + up_off;
                    float* dst = yd + r * f;
                    int64_t j = 0;
                    for (; j + 8 <= f; j += 8) Store(dst + j, SiLU(Load(gate + j)) * Load(up + j));
                    for (; j < f; ++j) dst[j] = SiLU(gate[j]) * up[j];
                  }
                });
    return Status::Ok();
  }

 private:
  bool gate_first_ = true;
};

}  // namespace

void RegisterSwiGluKernel(KernelRegistry& r) {
  KernelDef def;
  def.domain = kInferdDomain;
  def.op_type = "SwiGlu";
  def.types = {DataType::kFloat32};
  def.factory = MakeKernel<SwiGluKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
