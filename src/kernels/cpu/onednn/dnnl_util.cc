#include "kernels/cpu/onednn/dnnl_util.h"

#include <string_view>

#include <omp.h>

#include <cstdlib>
#include <memory>
#include <new>

namespace inferd::cpu {

dnnl::engine& DnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

int PrimitiveThreads() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

namespace {
bool IsaHas(dnnl::cpu_isa feature) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto want = static_cast<unsigned>(feature);
  return (isa & want) == want;  // oneDNN's ISA values are nested bit masks
}
}  // namespace

bool DnnlHasAvx512() {
  static const bool avx512 = IsaHas(dnnl::cpu_isa::avx512_core);
  return avx512;
}

bool DnnlHasKernel(const dnnl::primitive_desc_base& pd) {
  return pd && std::string_view(pd.impl_info_str()).rfind("ref", 0) != 0;
}

bool DnnlHasNativeBf16() {
  static const bool bf16 = IsaHas(dnnl::cpu_isa::avx512_core_bf16);
  return bf16;
}

bool PreferPanelGemm() {
#if defined(__AVX2__) && defined(__FMA__)
  return !DnnlHasAvx512();
#else
  return false;
#endif
}

bool DnnlInt8IsExact(DataType activations, const Tensor& weights) {
  static const bool vnni = IsaHas(dnnl::cpu_isa::avx512_core_vnni);
  if (vnni) return true;
  if (activations != DataType::kUInt8 || weights.dtype() != DataType::kInt8) return false;
  const int8_t* w = weights.data<int8_t>();
  for (int64_t i = 0; i < weights.NumElements(); ++i) {
    if (w[i] < -64 || w[i] > 63) return false;
  }
  return true;
}

dnnl::memory::data_type ToDnnl(DataType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case DataType::kFloat32: return dt::f32;
    case DataType::kFloat16: return dt::f16;
    case DataType::kBFloat16: return dt::bf16;
    case DataType::kInt32: return dt::s32;
    case DataType::kInt8: return dt::s8;
    case DataType::kUInt8: return dt::u8;
    default: return dt::undef;
  }
}

dnnl::memory::dims ToDims(const Shape& shape) { return dnnl::memory::dims(shape.begin(), shape.end()); }

dnnl::memory::dims DnnlDilations(const std::vector<int64_t>& d) {
  dnnl::memory::dims r(d.size());
  for (size_t i = 0; i < d.size(); ++i) r[i] = d[i] - 1;
  return r;
}

dnnl::memory::dims PlainStrides(const dnnl::memory::dims& dims) {
  dnnl::memory::dims s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::data_type dt) {
  return dnnl::memory::desc(dims, dt, PlainStrides(dims));
}

dnnl::primitive_attr UserScratchpad(dnnl::primitive_attr attr) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void ExecutePrimitive(const dnnl::primitive& prim, dnnl::stream& s,
                      std::unordered_map<int, dnnl::memory> args) {
  const dnnl_memory_desc_t* md =
      dnnl_primitive_desc_query_md(prim.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
  const size_t bytes = md != nullptr ? dnnl_memory_desc_get_size(md) : 0;
  if (bytes > 0) {
    struct Free {
      void operator()(void* p) const { std::free(p); }
    };
    // Grows to the largest scratchpad this thread has needed; no allocation in steady state.
    thread_local std::unique_ptr<void, Free> buffer;
    thread_local size_t capacity = 0;
    if (bytes > capacity) {
      const size_t rounded = (bytes + 63) / 64 * 64;
      buffer.reset(std::aligned_alloc(64, rounded));
      if (!buffer) throw std::bad_alloc();
      capacity = rounded;
    }
    args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(dnnl::memory::desc(*md), DnnlEngine(), buffer.get());
  }
  prim.execute(s, args);
}

}  // namespace inferd::cpu
