// Cast and CastLike between all numeric types and bool (float16/bfloat16 through float).
// String casts are not supported (tensors never hold strings).
#include <cstring>

#include "kernels/cpu/elementwise/elementwise_util.h"
#include "kernels/cpu/elementwise/register.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {
namespace {

Status CastTensor(const Tensor& in, DataType to, KernelContext& ctx) {
  if (to == DataType::kString || in.dtype() == DataType::kString) {
    return Unimplemented("Cast from {} to {}: string tensors are not supported",
                         DataTypeName(in.dtype()), DataTypeName(to));
  }
  if (!IsSupportedDataType(to)) {
    return InvalidArgument("Cast: unsupported target type {}", static_cast<int>(to));
  }
  Tensor* out = ctx.AllocateOutput(0, to, in.shape());
  if (in.dtype() == to) {
    if (in.ByteSize() > 0) std::memcpy(out->raw_data(), in.raw_data(), in.ByteSize());
    return Status::Ok();
  }
  return DispatchClass<TypeClass::kAll>(in.dtype(), "Cast", [&](auto src_tag) -> Status {
    using S = decltype(src_tag);
    return DispatchClass<TypeClass::kAll>(to, "Cast", [&](auto dst_tag) -> Status {
      using D = decltype(dst_tag);
      UnaryMap(in.data<S>(), out->data<D>(), in.NumElements(), [](S v) { return Convert<D>(v); });
      return Status::Ok();
    });
  });
}

class CastKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Attribute* a = info.node().FindAttribute("to");
    if (a == nullptr || a->type != Attribute::Type::kInt) {
      return InvalidArgument("Cast: missing integer attribute 'to'");
    }
    to_ = static_cast<DataType>(a->i);
    if (to_ == DataType::kString) {
      return Unimplemented("Cast to string is not supported");
    }
    if (!IsSupportedDataType(to_)) {
      return InvalidArgument("Cast: unsupported target type {}", a->i);
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr) return InvalidArgument("Cast needs an input");
    return CastTensor(*x, to_, ctx);
  }

 private:
  DataType to_ = DataType::kUndefined;
};

class CastLikeKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* like = ctx.Input(1);
    if (x == nullptr || like == nullptr) return InvalidArgument("CastLike needs two inputs");
    return CastTensor(*x, like->dtype(), ctx);
  }
};

}  // namespace

void RegisterCastKernels(KernelRegistry& r) {
  r.Add("Cast", 6, kOpsetMax, AllTypes(), MakeKernel<CastKernel>());
  r.Add("CastLike", 15, kOpsetMax, AllTypes(), MakeKernel<CastLikeKernel>());
}

}  // namespace inferd::cpu
