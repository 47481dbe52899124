// MatMul (numpy semantics) and Gemm on oneDNN matmul for float32 (float16/bfloat16 staged through
// float32); plain loops for float64 and integer types.
//
// A constant 2-D B is reordered into the layout oneDNN prefers once per layout (PackedWeights,
// shared by the per-shape plans), and A's batch dims are folded into M (the BERT /
// fully-connected case). Other shapes use plain layouts with oneDNN's batch broadcasting. Plans
// (primitives) are cached per input shape. A constant 2-D float32 B without a fused activation is
// a GemmWeights instead on CPUs below AVX-512 (onednn/gemm_weights.h): each call runs
// util/panel_gemm.h or oneDNN on the plain weights, by the row count and the layout held.
#include <memory>

#include "kernels/cpu/math/register.h"
#include "kernels/cpu/onednn/dnnl_kernel.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/onednn/gemm_weights.h"
#include "kernels/cpu/onednn/packed_weights.h"
#include "kernels/cpu/onednn/plan_cache.h"
#include "kernels/cpu/onednn/post_ops.h"
#include "kernels/cpu/util/broadcast.h"
#include "kernels/cpu/util/float32.h"
#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/panel_gemm.h"

namespace inferd::cpu {
namespace {

using dnnl::memory;

bool UsesDnnl(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

struct MatMulPlan {
  dnnl::matmul prim;
  memory::desc src_md, weights_md, dst_md, user_weights_md, bias_md;
  memory weights;  // pre-packed constant weights, or empty
};

// Creates the primitive; when `const_w` is given the weights layout is oneDNN's choice and the
// constant weights (plain, described by user_weights_md) are packed into it (or the packed copy
// an earlier plan made for the same layout is reused).
std::shared_ptr<const MatMulPlan> MakePlan(const memory::desc& src_md,
                                           const memory::desc& user_weights_md,
                                           const memory::desc& dst_md, const memory::desc* bias_md,
                                           const dnnl::primitive_attr& attr,
                                           const PackedWeights* const_w) {
  auto plan = std::make_shared<MatMulPlan>();
  plan->src_md = src_md;
  plan->dst_md = dst_md;
  plan->user_weights_md = user_weights_md;
  memory::desc w_md = const_w ? memory::desc(user_weights_md.dims(), memory::data_type::f32,
                                             memory::format_tag::any)
                              : user_weights_md;
  if (bias_md) plan->bias_md = *bias_md;
  auto desc = bias_md ? dnnl::matmul::desc(src_md, w_md, *bias_md, dst_md)
                      : dnnl::matmul::desc(src_md, w_md, dst_md);
  dnnl::matmul::primitive_desc pd(desc, UserScratchpad(attr), DnnlEngine());
  plan->prim = dnnl::matmul(pd);
  plan->weights_md = pd.weights_desc();
  if (const_w) plan->weights = const_w->Get(user_weights_md, plan->weights_md);
  return plan;
}

void Execute(const MatMulPlan& plan, const void* a, const void* b, const void* bias, void* y) {
  dnnl::engine& eng = DnnlEngine();
  dnnl::stream s(eng);
  memory weights = plan.weights ? plan.weights
                                : memory(plan.user_weights_md, eng, const_cast<void*>(b));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(plan.src_md, eng, const_cast<void*>(a))},
                                       {DNNL_ARG_WEIGHTS, weights},
                                       {DNNL_ARG_DST, memory(plan.dst_md, eng, y)}};
  if (bias) args[DNNL_ARG_BIAS] = memory(plan.bias_md, eng, const_cast<void*>(bias));
  ExecutePrimitive(plan.prim, s, args);
  s.wait();
}

// ---------------------------------------------------------------------------------------------
// MatMul

struct MatMulShapes {
  Shape batch;           // broadcast batch dims
  Shape a_batch, b_batch;  // each operand's batch dims left-padded with 1s to batch's rank
  int64_t m = 1, k = 1, n = 1;
  Shape out;
};

StatusOr<MatMulShapes> ResolveMatMul(const Node& node, const Shape& as, const Shape& bs) {
  if (as.empty() || bs.empty()) {
    return InvalidArgument("{}: MatMul operands must have rank >= 1, got {} and {}",
                           node.Describe(), ShapeToString(as), ShapeToString(bs));
  }
  MatMulShapes r;
  Shape a = as.size() == 1 ? Shape{1, as[0]} : as;
  Shape b = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  r.m = a[a.size() - 2];
  r.k = a.back();
  r.n = b.back();
  if (b[b.size() - 2] != r.k) {
    return InvalidArgument("{}: inner dimensions differ: {} x {}", node.Describe(),
                           ShapeToString(as), ShapeToString(bs));
  }
  Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  ASSIGN_OR_RETURN(r.batch, BroadcastShapes({ab, bb}));
  r.a_batch = Shape(r.batch.size() - ab.size(), 1);
  r.a_batch.insert(r.a_batch.end(), ab.begin(), ab.end());
  r.b_batch = Shape(r.batch.size() - bb.size(), 1);
  r.b_batch.insert(r.b_batch.end(), bb.begin(), bb.end());
  r.out = r.batch;
  if (as.size() != 1) r.out.push_back(r.m);
  if (bs.size() != 1) r.out.push_back(r.n);
  return r;
}

template <typename T>
void PlainMatMul(const MatMulShapes& s, const T* a, const T* b, T* y) {
  const int64_t batches = NumElements(s.batch);
  const BroadcastPlan plan = PlanBroadcast(s.batch, {s.a_batch, s.b_batch});
  ParallelFor(batches * s.m, 16, [&](int64_t begin, int64_t end) {
    BroadcastIterator it(plan);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t bi = row / s.m, i = row % s.m;
      it.Seek(bi);
      const T* ar = a + it.offset(0) * s.m * s.k + i * s.k;
      const T* bm = b + it.offset(1) * s.k * s.n;
      T* yr = y + bi * s.m * s.n + i * s.n;
      std::fill(yr, yr + s.n, T{});
      for (int64_t kk = 0; kk < s.k; ++kk) {
        const T av = ar[kk];
        const T* br = bm + kk * s.n;
        for (int64_t j = 0; j < s.n; ++j) yr[j] += av * br[j];
      }
    }
  });
}

// MatMul and Gemm pack a constant 2-D B of a type oneDNN computes in; other Bs are read per call.
void PackConstantB(const KernelInfo& info, PackedWeights* packed) {
  const Tensor* b = info.ConstantInput(1);
  if (b && b->rank() == 2 && UsesDnnl(b->dtype())) PackConstantInput(info, 1, *b, packed);
}

class MatMulKernel final : public DnnlKernel {
 public:
  Status Init(const KernelInfo& info) override {
    RETURN_IF_ERROR(ParseFusedActivation(info.node(), &post_ops_));
    const Tensor* b = info.ConstantInput(1);
    std::optional<GemmWeights::Policy> policy;
    if (b && b->rank() == 2) {
      policy = GemmWeights::ChooseFor(info.batch_invariant_matmul(), b->dim(0), b->dim(1));
    }
    if (b && b->rank() == 2 && b->dtype() == DataType::kFloat32 && b->NumElements() > 0 &&
        post_ops_.len() == 0 && policy) {
      gemm_b_.Reset(*b, *policy);
      info.ReleaseConstantInput(1);
      return Status::Ok();
    }
    PackConstantB(info, &const_b_);
    return Status::Ok();
  }

 private:
  Status Run(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a_in = ctx.Input(0);
    const Tensor* b_in = ctx.Input(1);
    if (!a_in || !b_in) return InvalidArgument("{}: A and B are required", node.Describe());
    if (a_in->dtype() != b_in->dtype()) {
      return InvalidArgument("{}: A is {} but B is {}", node.Describe(),
                             DataTypeName(a_in->dtype()), DataTypeName(b_in->dtype()));
    }
    ASSIGN_OR_RETURN(MatMulShapes s, ResolveMatMul(node, a_in->shape(), b_in->shape()));
    const DataType dtype = a_in->dtype();
    if (NumElements(s.out) == 0 || s.k == 0) {
      ctx.AllocateOutput(0, dtype, s.out);  // zero-filled: an empty sum is 0
      return Status::Ok();
    }
    if (!UsesDnnl(dtype)) {
      if (post_ops_.len() != 0) return Unimplemented("{}: fused activation needs float", node.Describe());
      Tensor* y = ctx.AllocateOutput(0, dtype, s.out);
      return DispatchNumeric(
          dtype,
          [&](auto tag) {
            using T = decltype(tag);
            PlainMatMul<T>(s, a_in->data<T>(), b_in->data<T>(), y->data<T>());
            return Status::Ok();
          },
          [&] { return InvalidArgument("{}: unsupported type {}", node.Describe(), DataTypeName(dtype)); });
    }
    GemmWeights::Layout held;  // B is 2-D here: A's batch dims fold into the rows
    if (gemm_b_.defined()) {
      held = gemm_b_.ForRows(NumElements(s.batch) * s.m);
      if (held.panel) {
        Tensor* y = ctx.AllocateOutputUninitialized(0, dtype, s.out);
        PanelGemm(a_in->data<float>(), NumElements(s.batch) * s.m, *held.panel, y->data<float>());
        return Status::Ok();
      }
    }
    if (s.batch.size() + 2 > DNNL_MAX_NDIMS) {
      return Unimplemented("{}: rank {} is above oneDNN's limit", node.Describe(), s.batch.size() + 2);
    }
    Tensor a = ToFloat32(*a_in);
    Tensor y = dtype == DataType::kFloat32 ? *ctx.AllocateOutputUninitialized(0, dtype, s.out)
                                           : Tensor::Allocate(DataType::kFloat32, s.out);
    const bool packed = const_b_.defined();
    const bool fold = packed || gemm_b_.defined();
    Shape key = a_in->shape();
    key.push_back(-1);
    key.insert(key.end(), b_in->shape().begin(), b_in->shape().end());
    ASSIGN_OR_RETURN(auto plan, cache_.Get(key, [&]() -> StatusOr<std::shared_ptr<const MatMulPlan>> {
      dnnl::primitive_attr attr;
      attr.set_post_ops(post_ops_);
      if (fold) {
        // A's batch folds into M: [batch * M, K] x [K, N].
        const int64_t rows = NumElements(s.batch) * s.m;
        return MakePlan(PlainDesc({rows, s.k}), PlainDesc({s.k, s.n}), PlainDesc({rows, s.n}),
                        nullptr, attr, packed ? &const_b_ : nullptr);
      }
      memory::dims ad(s.a_batch.begin(), s.a_batch.end()), bd(s.b_batch.begin(), s.b_batch.end()),
          yd(s.batch.begin(), s.batch.end());
      ad.insert(ad.end(), {s.m, s.k});
      bd.insert(bd.end(), {s.k, s.n});
      yd.insert(yd.end(), {s.m, s.n});
      return MakePlan(PlainDesc(ad), PlainDesc(bd), PlainDesc(yd), nullptr, attr, nullptr);
    }));
    Tensor b = held.plain;  // gemm_b_'s plain weights, or B read per call
    if (!packed && !b.defined()) b = ToFloat32(*b_in);
    Execute(*plan, a.raw_data(), packed ? nullptr : b.raw_data(), nullptr, y.raw_data());
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

  dnnl::post_ops post_ops_;
  GemmWeights gemm_b_;     // constant 2-D float32 B, PanelGemm / plain oneDNN (const_b_ empty)
  PackedWeights const_b_;  // constant 2-D B, packed once per layout
  PlanCache<Shape, MatMulPlan> cache_;
};

// ---------------------------------------------------------------------------------------------
// Gemm

class GemmKernel final : public DnnlKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    trans_a_ = node.GetInt("transA", 0) != 0;
    trans_b_ = node.GetInt("transB", 0) != 0;
    alpha_ = node.GetFloat("alpha", 1.f);
    beta_ = node.GetFloat("beta", 1.f);
    RETURN_IF_ERROR(ParseFusedActivation(node, &post_ops_));
    PackConstantB(info, &const_b_);
    return Status::Ok();
  }

 private:
  Status Run(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a_in = ctx.Input(0);
    const Tensor* b_in = ctx.Input(1);
    const Tensor* c_in = ctx.Input(2);
    if (!a_in || !b_in) return InvalidArgument("{}: A and B are required", node.Describe());
    if (a_in->rank() != 2 || b_in->rank() != 2) {
      return InvalidArgument("{}: A and B must be 2-D, got {} and {}", node.Describe(),
                             ShapeToString(a_in->shape()), ShapeToString(b_in->shape()));
    }
    if (a_in->dtype() != b_in->dtype() || (c_in && c_in->dtype() != a_in->dtype())) {
      return InvalidArgument("{}: A, B and C must have the same type", node.Describe());
    }
    const int64_t m = trans_a_ ? a_in->dim(1) : a_in->dim(0);
    const int64_t k = trans_a_ ? a_in->dim(0) : a_in->dim(1);
    const int64_t kb = trans_b_ ? b_in->dim(1) : b_in->dim(0);
    const int64_t n = trans_b_ ? b_in->dim(0) : b_in->dim(1);
    if (k != kb) {
      return InvalidArgument("{}: inner dimensions differ: A {} (transA={}) x B {} (transB={})",
                             node.Describe(), ShapeToString(a_in->shape()), trans_a_,
                             ShapeToString(b_in->shape()), trans_b_);
    }
    const Shape out = {m, n};
    const bool use_c = c_in && beta_ != 0.f && c_in->NumElements() > 0;
    if (c_in) {
      auto bs = BroadcastShapes({c_in->shape(), out});
      if (!bs.ok() || *bs != out || c_in->rank() > 2) {
        return InvalidArgument("{}: C {} does not broadcast to {}", node.Describe(),
                               ShapeToString(c_in->shape()), ShapeToString(out));
      }
    }
    const DataType dtype = a_in->dtype();
    if (!UsesDnnl(dtype)) {
      Tensor* y = ctx.AllocateOutput(0, dtype, out);
      return DispatchNumeric(
          dtype,
          [&](auto tag) {
            using T = decltype(tag);
            PlainGemm<T>(*a_in, *b_in, use_c ? c_in : nullptr, m, k, n, y->data<T>());
            return Status::Ok();
          },
          [&] { return InvalidArgument("{}: unsupported type {}", node.Describe(), DataTypeName(dtype)); });
    }
    // Written in full by the primitive, or by FillBroadcast(C) first; zeros only for k == 0 then.
    const bool zero = k == 0 && !use_c;
    Tensor y = dtype != DataType::kFloat32 ? Tensor::Allocate(DataType::kFloat32, out)
               : zero                     ? *ctx.AllocateOutput(0, dtype, out)
                                          : *ctx.AllocateOutputUninitialized(0, dtype, out);
    if (m == 0 || n == 0) return Status::Ok();
    // C as a bias when it is a row vector and needs no scaling; otherwise dst is pre-filled with C
    // and added through a sum post-op scaled by beta.
    const bool c_bias = use_c && alpha_ == 1.f && beta_ == 1.f &&
                        (c_in->NumElements() == n && (c_in->rank() == 1 || c_in->dim(0) == 1));
    const bool c_sum = use_c && !c_bias;
    Tensor c;
    if (use_c) c = ToFloat32(*c_in);
    if (c_sum) FillBroadcast(c, out, y.data<float>());
    if (k == 0) {  // empty product: y = beta * C
      float* yd = y.data<float>();
      for (int64_t i = 0; i < m * n; ++i) yd[i] *= beta_;
    } else {
      const bool packed = const_b_.defined();
      Shape key = {a_in->dim(0), a_in->dim(1), b_in->dim(0), b_in->dim(1), c_bias, c_sum};
      ASSIGN_OR_RETURN(auto plan, cache_.Get(key, [&]() -> StatusOr<std::shared_ptr<const MatMulPlan>> {
        dnnl::primitive_attr attr;
        if (alpha_ != 1.f) attr.set_output_scales(0, {alpha_});
        dnnl::post_ops ops;
        if (c_sum) ops.append_sum(beta_);
        for (int i = 0; i < post_ops_.len(); ++i) {
          dnnl::algorithm alg;
          float scale, alpha, beta;
          post_ops_.get_params_eltwise(i, scale, alg, alpha, beta);
          ops.append_eltwise(scale, alg, alpha, beta);
        }
        attr.set_post_ops(ops);
        const auto f32 = memory::data_type::f32;
        memory::desc a_md({m, k}, f32, trans_a_ ? memory::dims{1, m} : memory::dims{k, 1});
        memory::desc b_md({k, n}, f32, trans_b_ ? memory::dims{1, k} : memory::dims{n, 1});
        memory::desc bias_md = PlainDesc({1, n});
        return MakePlan(a_md, b_md, PlainDesc({m, n}), c_bias ? &bias_md : nullptr, attr,
                        packed ? &const_b_ : nullptr);
      }));
      Tensor a = ToFloat32(*a_in), b;
      if (!packed) b = ToFloat32(*b_in);
      Execute(*plan, a.raw_data(), packed ? nullptr : b.raw_data(), c_bias ? c.raw_data() : nullptr,
              y.raw_data());
    }
    if (dtype != DataType::kFloat32) SetOutputFromFloat32(ctx, 0, dtype, y);
    return Status::Ok();
  }

  // Writes `c` broadcast to `out` (rank <= 2) into y.
  static void FillBroadcast(const Tensor& c, const Shape& out, float* y) {
    const auto st = BroadcastStrides(c.shape(), out);
    const float* cd = c.data<float>();
    for (int64_t i = 0; i < out[0]; ++i) {
      for (int64_t j = 0; j < out[1]; ++j) y[i * out[1] + j] = cd[i * st[0] + j * st[1]];
    }
  }

  template <typename T>
  void PlainGemm(const Tensor& a, const Tensor& b, const Tensor* c, int64_t m, int64_t k,
                 int64_t n, T* y) const {
    const T* ad = a.data<T>();
    const T* bd = b.data<T>();
    std::vector<int64_t> cst = c ? BroadcastStrides(c->shape(), {m, n}) : std::vector<int64_t>{};
    ParallelFor(m, 8, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          T acc{};
          for (int64_t kk = 0; kk < k; ++kk) {
            const T av = trans_a_ ? ad[kk * m + i] : ad[i * k + kk];
            const T bv = trans_b_ ? bd[j * k + kk] : bd[kk * n + j];
            acc += av * bv;
          }
          double v = static_cast<double>(alpha_) * static_cast<double>(acc);
          if (c) v += static_cast<double>(beta_) * static_cast<double>(c->data<T>()[i * cst[0] + j * cst[1]]);
          y[i * n + j] = (alpha_ == 1.f && (!c || beta_ == 1.f))
                             ? static_cast<T>(acc + (c ? c->data<T>()[i * cst[0] + j * cst[1]] : T{}))
                             : static_cast<T>(v);
        }
      }
    });
  }

  bool trans_a_ = false, trans_b_ = false;
  float alpha_ = 1.f, beta_ = 1.f;
  dnnl::post_ops post_ops_;
  PackedWeights const_b_;  // constant B, packed once per layout
  PlanCache<Shape, MatMulPlan> cache_;
};

}  // namespace

void RegisterMatMulKernels(KernelRegistry& r) {
  const std::vector<DataType> types = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                       DataType::kFloat64, DataType::kInt32,   DataType::kInt64,
                                       DataType::kUInt32,  DataType::kUInt64};
  r.Add("MatMul", 1, kOpsetMax, types, MakeKernel<MatMulKernel>());
  r.Add("Gemm", 7, kOpsetMax, types, MakeKernel<GemmKernel>());
}

}  // namespace inferd::cpu
