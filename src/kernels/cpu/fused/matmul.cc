// ai.inferd.FusedMatMul: Y = act(A · B + bias + R), written by the MatMul fusion passes
// (src/optimizer/matmul_bias_fusion.cc, residual_add_fusion.cc, activation_fusion.cc).
//
// A is [..., M, K] (its batch dims fold into M), B is 2-D [K, N], bias [N] and R (same shape as Y)
// are optional. One oneDNN matmul computes it all: bias as the primitive's bias, R as a binary-add
// post-op, the activation as an eltwise post-op. A constant B is packed once per plan. float32
// tensors (the fusion passes only fire on float32).
//
// compute_bf16 = 1 (optimizer/bf16_compute.h; needs a constant B): B is packed as bf16 and A is
// converted to bf16 per call (per-thread scratch), oneDNN's bf16 matmul accumulates in f32 and
// writes float32 Y; bias, R and the activation stay float32. Where bf16 does not pay (no native
// bf16, or measured slower than FP32: onednn/bf16_choice.h) it computes in FP32.
//
// A constant B computed in float32 without an activation is a GemmWeights on CPUs below AVX-512
// (onednn/gemm_weights.h): each call runs util/panel_gemm.h (bias and R as its epilogue) or
// oneDNN's matmul on the plain weights, by the row count and the layout the weights are held in.
#include <memory>

#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/onednn/bf16_choice.h"
#include "kernels/cpu/onednn/dnnl_kernel.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/onednn/gemm_weights.h"
#include "kernels/cpu/onednn/packed_weights.h"
#include "kernels/cpu/onednn/plan_cache.h"
#include "kernels/cpu/onednn/post_ops.h"
#include "kernels/cpu/onednn/scratch.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/panel_gemm.h"

namespace inferd::cpu {
namespace {

using dnnl::memory;

struct FusedMatMulPlan {
  dnnl::matmul prim;
  memory::desc src_md, user_src_md, weights_md, user_weights_md, dst_md, bias_md, res_md;
  memory weights;  // packed constant B, or empty
};

class FusedMatMulKernel final : public DnnlKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    has_bias_ = node.HasInput(2);
    has_res_ = node.HasInput(3);
    // FP32 from the bf16-exact B where bf16 does not pay (onednn/bf16_choice.h; as BlockedConv).
    bf16_ = node.GetInt("compute_bf16", 0) != 0 && Bf16ComputeChoice().matmul;
    RETURN_IF_ERROR(ParseFusedActivation(node, &act_ops_));
    if (const Tensor* b = info.ConstantInput(1); b && b->rank() == 2) {
      if (b->dtype() != DataType::kFloat32) {
        return InvalidArgument("{}: B must be float32", node.Describe());
      }
      const auto policy =
          GemmWeights::ChooseFor(info.batch_invariant_matmul(), b->dim(0), b->dim(1));
      if (!bf16_ && act_ops_.len() == 0 && b->NumElements() > 0 && policy) {
        gemm_b_.Reset(*b, *policy);
        info.ReleaseConstantInput(1);
        return Status::Ok();
      }
      PackConstantInput(info, 1, *b, &const_b_);
    }
    if (bf16_ && !const_b_.defined()) {
      return InvalidArgument("{}: compute_bf16 needs a constant 2-D B", node.Describe());
    }
    return Status::Ok();
  }

 private:
  Status Run(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.Input(0);
    const Tensor* b = ctx.Input(1);
    const Tensor* bias = has_bias_ ? ctx.Input(2) : nullptr;
    const Tensor* res = has_res_ ? ctx.Input(3) : nullptr;
    if (!a || !b) return InvalidArgument("{}: A and B are required", node.Describe());
    for (const Tensor* t : {a, b, bias, res}) {
      if (t && t->dtype() != DataType::kFloat32) {
        return InvalidArgument("{}: inputs must be float32, got {}", node.Describe(),
                               DataTypeName(t->dtype()));
      }
    }
    if (a->rank() < 2 || b->rank() != 2 || a->dim(a->rank() - 1) != b->dim(0)) {
      return InvalidArgument("{}: need A [..., M, K] and B [K, N], got {} and {}",
                             node.Describe(), ShapeToString(a->shape()), ShapeToString(b->shape()));
    }
    const int64_t k = b->dim(0), n = b->dim(1);
    const int64_t rows = k == 0 ? a->NumElements() : a->NumElements() / k;
    Shape out = a->shape();
    out.back() = n;
    if (bias && bias->NumElements() != n) {
      return InvalidArgument("{}: bias must have {} elements, got {}", node.Describe(), n,
                             ShapeToString(bias->shape()));
    }
    if (res && res->shape() != out) {
      return InvalidArgument("{}: residual input must have shape {}, got {}", node.Describe(),
                             ShapeToString(out), ShapeToString(res->shape()));
    }
    if (has_bias_ && !bias) return InvalidArgument("{}: bias is missing", node.Describe());
    if (has_res_ && !res) return InvalidArgument("{}: residual is missing", node.Describe());
    Tensor* y = rows == 0 || n == 0 || k == 0
                    ? ctx.AllocateOutput(0, DataType::kFloat32, out)
                    : ctx.AllocateOutputUninitialized(0, DataType::kFloat32, out);
    if (rows == 0 || n == 0) return Status::Ok();
    if (k == 0) return Unimplemented("{}: K = 0", node.Describe());
    const void* b_data = b->raw_data();  // null when B is constant: then gemm_b_ or const_b_
    GemmWeights::Layout held;
    if (gemm_b_.defined()) {
      held = gemm_b_.ForRows(rows);
      if (held.panel) {
        PanelGemm(a->data<float>(), rows, *held.panel, y->data<float>(),
                  {bias ? bias->data<float>() : nullptr, res ? res->data<float>() : nullptr});
        return Status::Ok();
      }
      b_data = held.plain.raw_data();
    }
    const bool packed = const_b_.defined();
    ASSIGN_OR_RETURN(std::shared_ptr<const FusedMatMulPlan> plan, GetPlan(rows, k, n, packed));
    dnnl::engine& eng = DnnlEngine();
    dnnl::stream s(eng);
    memory weights = packed ? plan->weights
                            : memory(plan->user_weights_md, eng, const_cast<void*>(b_data));
    memory src(plan->user_src_md, eng, const_cast<void*>(a->raw_data()));
    if (plan->src_md != plan->user_src_md) {  // bf16: A converted through per-thread scratch
      void* p = ThreadScratch(0, plan->src_md.get_size());
      if (p == nullptr) return ResourceExhausted("{}: no scratch for A", node.Describe());
      memory converted(plan->src_md, eng, p);
      dnnl::reorder(src, converted).execute(s, src, converted);
      src = converted;
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_WEIGHTS, weights},
        {DNNL_ARG_DST, memory(plan->dst_md, eng, y->raw_data())}};
    if (bias) args[DNNL_ARG_BIAS] = memory(plan->bias_md, eng, const_cast<void*>(bias->raw_data()));
    if (res) {
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] =
          memory(plan->res_md, eng, const_cast<void*>(res->raw_data()));
    }
    ExecutePrimitive(plan->prim, s, args);
    s.wait();
    return Status::Ok();
  }

  StatusOr<std::shared_ptr<const FusedMatMulPlan>> GetPlan(int64_t rows, int64_t k, int64_t n,
                                                           bool packed) const {
    return plans_.Get(Shape{rows, k, n}, [&] { return MakePlan(rows, k, n, packed); });
  }

  StatusOr<std::shared_ptr<const FusedMatMulPlan>> MakePlan(int64_t rows, int64_t k, int64_t n,
                                                            bool packed) const {
    auto plan = std::make_shared<FusedMatMulPlan>();
    const auto f32 = memory::data_type::f32;
    const auto compute = bf16_ ? memory::data_type::bf16 : f32;
    plan->user_src_md = PlainDesc({rows, k});
    plan->src_md = memory::desc({rows, k}, compute, memory::format_tag::ab);
    plan->user_weights_md = PlainDesc({k, n});
    plan->dst_md = PlainDesc({rows, n});
    plan->bias_md = PlainDesc({1, n});
    plan->res_md = PlainDesc({rows, n});
    dnnl::post_ops ops;
    if (has_res_) ops.append_binary(dnnl::algorithm::binary_add, plan->res_md);
    for (int i = 0; i < act_ops_.len(); ++i) {
      dnnl::algorithm alg;
      float scale, alpha, beta;
      act_ops_.get_params_eltwise(i, scale, alg, alpha, beta);
      ops.append_eltwise(scale, alg, alpha, beta);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    const memory::desc w_md = packed ? memory::desc({k, n}, compute, memory::format_tag::any)
                                     : plan->user_weights_md;
    auto desc = has_bias_ ? dnnl::matmul::desc(plan->src_md, w_md, plan->bias_md, plan->dst_md)
                          : dnnl::matmul::desc(plan->src_md, w_md, plan->dst_md);
    dnnl::matmul::primitive_desc pd(desc, UserScratchpad(attr), DnnlEngine());
    plan->prim = dnnl::matmul(pd);
    plan->weights_md = pd.weights_desc();
    if (packed) plan->weights = const_b_.Get(plan->user_weights_md, plan->weights_md);
    return std::shared_ptr<const FusedMatMulPlan>(std::move(plan));
  }

  bool has_bias_ = false, has_res_ = false, bf16_ = false;
  dnnl::post_ops act_ops_;
  GemmWeights gemm_b_;     // constant B for PanelGemm or plain oneDNN (then const_b_ stays empty)
  PackedWeights const_b_;  // one packed copy per layout, shared by every shape's plan
  PlanCache<Shape, FusedMatMulPlan> plans_;
};

}  // namespace

void RegisterFusedMatMulKernel(KernelRegistry& r) {
  KernelDef def;
  def.domain = kInferdDomain;
  def.op_type = "FusedMatMul";
  def.types = {DataType::kFloat32};
  def.factory = MakeKernel<FusedMatMulKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
