#include "kernels/cpu/dnnl_util.h"

namespace inferd::cpu {

dnnl::engine& DnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
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

}  // namespace inferd::cpu
