#include <dnnl.hpp>

#include "kernels/cpu/elementwise/elementwise_util.h"
#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {
namespace {

dnnl::algorithm ToAlgorithm(EltwiseAlg alg) {
  switch (alg) {
    case EltwiseAlg::kExp:
      return dnnl::algorithm::eltwise_exp;
    case EltwiseAlg::kLogistic:
      return dnnl::algorithm::eltwise_logistic;
    case EltwiseAlg::kTanh:
      return dnnl::algorithm::eltwise_tanh;
    case EltwiseAlg::kLog:
      return dnnl::algorithm::eltwise_log;
    case EltwiseAlg::kSqrt:
      return dnnl::algorithm::eltwise_sqrt;
    case EltwiseAlg::kMish:
      return dnnl::algorithm::eltwise_mish;
    case EltwiseAlg::kElu:
      return dnnl::algorithm::eltwise_elu;
  }
  return dnnl::algorithm::undef;
}

}  // namespace

bool DnnlEltwise(EltwiseAlg alg, float alpha, float beta, const float* in, float* out, int64_t n) {
  try {
    dnnl::engine& eng = DnnlEngine();
    dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, ToAlgorithm(alg), md, alpha,
                                  beta);
    dnnl::eltwise_forward::primitive_desc pd(d, UserScratchpad(), eng);
    // oneDNN's primitive cache makes re-creating the primitive for a seen size cheap.
    dnnl::eltwise_forward prim(pd);
    dnnl::memory src(md, eng, const_cast<float*>(in));
    dnnl::memory dst(md, eng, out);
    dnnl::stream s(eng);
    ExecutePrimitive(prim, s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    s.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;  // caller falls back to the portable loop
  }
}

}  // namespace inferd::cpu
