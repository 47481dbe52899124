#include "kernels/cpu/quantization/matmul_dnnl.h"

#include <dnnl.hpp>

#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

struct DnnlQMatMul::Plan {
  dnnl::matmul prim;
  memory::desc src_md, dst_md;
  memory weights;
};

StatusOr<std::unique_ptr<DnnlQMatMul>> DnnlQMatMul::Create(const Tensor& b) {
  if (b.dtype() != DataType::kInt8 || b.rank() != 2) {
    return InvalidArgument("oneDNN int8 matmul needs a 2-D int8 B");
  }
  return std::unique_ptr<DnnlQMatMul>(new DnnlQMatMul(b.Clone()));
}

DnnlQMatMul::DnnlQMatMul(Tensor b)
    : b_(std::move(b)),
      exact_u8_(DnnlInt8IsExact(DataType::kUInt8, b_)),
      exact_s8_(DnnlInt8IsExact(DataType::kInt8, b_)) {}

StatusOr<std::shared_ptr<const DnnlQMatMul::Plan>> DnnlQMatMul::GetPlan(int64_t m,
                                                                        DataType a_type) const {
  auto key = std::make_pair(m, static_cast<int>(a_type));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }
  auto plan = std::make_shared<Plan>();
  const int64_t kk = k(), nn = n();
  plan->src_md = memory::desc({m, kk}, ToDnnl(a_type), tag::ab);
  plan->dst_md = memory::desc({m, nn}, memory::data_type::s32, tag::ab);
  memory::desc w_any({kk, nn}, memory::data_type::s8, tag::any);
  dnnl::primitive_attr attr;
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  dnnl::engine& eng = DnnlEngine();
  dnnl::matmul::desc desc(plan->src_md, w_any, plan->dst_md);
  dnnl::matmul::primitive_desc pd(desc, UserScratchpad(attr), eng);
  plan->prim = dnnl::matmul(pd);
  memory user_w(memory::desc({kk, nn}, memory::data_type::s8, tag::ab), eng,
                const_cast<void*>(b_.raw_data()));
  plan->weights = memory(pd.weights_desc(), eng);
  dnnl::stream s(eng);
  dnnl::reorder(user_w, plan->weights).execute(s, user_w, plan->weights);
  s.wait();
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.emplace(key, std::move(plan)).first->second;
}

Status DnnlQMatMul::Run(const Node& node, const Tensor& a, int32_t a_zero_point, Tensor* y) const {
  return DnnlTry(node, [&]() -> Status {
    const int64_t m = a.dim(a.rank() - 1) > 0 ? a.NumElements() / a.dim(a.rank() - 1) : 0;
    if (!Takes(a.dtype())) {
      return FailedPrecondition(
          "{}: oneDNN int8 matmul would saturate on this CPU (no AVX-512 VNNI)", node.Describe());
    }
    if (m == 0 || n() == 0) return Status::Ok();
    ASSIGN_OR_RETURN(auto plan, GetPlan(m, a.dtype()));
    dnnl::engine& eng = DnnlEngine();
    dnnl::stream s(eng);
    memory src(plan->src_md, eng, const_cast<void*>(a.raw_data()));
    memory dst(plan->dst_md, eng, y->raw_data());
    memory zp(memory::desc({1}, memory::data_type::s32, tag::a), eng);
    *static_cast<int32_t*>(zp.get_data_handle()) = a_zero_point;
    ExecutePrimitive(plan->prim, s, {{DNNL_ARG_SRC, src},
                           {DNNL_ARG_WEIGHTS, plan->weights},
                           {DNNL_ARG_DST, dst},
                           {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp}});
    s.wait();
    return Status::Ok();
  });
}

}  // namespace inferd::cpu
