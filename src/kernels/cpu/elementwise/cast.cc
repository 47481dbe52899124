// Cast and CastLike between all numeric types, bool and string (float16/bfloat16 through float).
//
// Number → string follows ONNX (as ONNX Runtime writes it): integers in decimal, bool as "1"/"0",
// floating point as the shortest text that reads back to the same value ("0.039187793", "1e-05"),
// and "NaN", "INF", "-INF" for the special values. String → number accepts plain and scientific
// notation ("3.14", "1E8", leading/trailing blanks) and, case-insensitively, "NaN", "INF", "+INF",
// "-INF"; "100.5" to an integer type truncates to 100. Text that is not a number is an
// InvalidArgument naming the element, never a silent 0.
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cpu/elementwise/elementwise_util.h"
#include "kernels/cpu/elementwise/register.h"
#include "kernels/cpu/util/string_index.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {
namespace {

template <typename S>
std::string NumberToString(S v) {
  if constexpr (std::is_same_v<S, bool>) {
    return v ? "1" : "0";
  } else if constexpr (kIsHalf<S> || std::is_floating_point_v<S>) {
    using F = std::conditional_t<std::is_same_v<S, double>, double, float>;
    const F f = static_cast<F>(v);
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f > 0 ? "INF" : "-INF";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), f);  // shortest round-trip form
    return std::string(buf, r.ptr);
  } else {
    return std::to_string(v);
  }
}

// Parses one element; false when `text` is not a number.
bool ParseNumber(const std::string& text, double* value, long long* integer, bool* is_integer) {
  const char* begin = text.c_str();
  while (*begin == ' ' || *begin == '\t') ++begin;
  std::string t(begin);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
  if (t.empty() || t.size() != std::strlen(t.c_str())) return false;  // empty, or embedded NUL
  std::string lower;
  for (char c : t) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  *is_integer = false;
  if (lower == "nan" || lower == "+nan" || lower == "-nan") {
    *value = std::nan("");
    return true;
  }
  if (lower == "inf" || lower == "+inf" || lower == "-inf") {
    *value = lower[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  char* end = nullptr;
  errno = 0;
  *integer = std::strtoll(t.c_str(), &end, 10);
  if (*end == '\0' && errno == 0) {
    *is_integer = true;
    *value = static_cast<double>(*integer);
    return true;
  }
  *value = std::strtod(t.c_str(), &end);
  return end != t.c_str() && *end == '\0';
}

Status CastToString(const Tensor& in, KernelContext& ctx) {
  Tensor* out = ctx.AllocateOutput(0, DataType::kString, in.shape());
  std::string* dst = out->data<std::string>();
  if (in.is_string()) {
    std::copy_n(in.data<std::string>(), in.NumElements(), dst);
    return Status::Ok();
  }
  return DispatchClass<TypeClass::kAll>(in.dtype(), "Cast", [&](auto src_tag) -> Status {
    using S = decltype(src_tag);
    const S* src = in.data<S>();
    for (int64_t i = 0; i < in.NumElements(); ++i) dst[i] = NumberToString(src[i]);
    return Status::Ok();
  });
}

Status CastFromString(const Tensor& in, DataType to, KernelContext& ctx) {
  Tensor* out = ctx.AllocateOutput(0, to, in.shape());
  const std::string* src = in.data<std::string>();
  return DispatchClass<TypeClass::kAll>(to, "Cast", [&](auto dst_tag) -> Status {
    using D = decltype(dst_tag);
    D* dst = out->data<D>();
    for (int64_t i = 0; i < in.NumElements(); ++i) {
      double v = 0;
      long long n = 0;
      bool is_integer = false;
      if (!ParseNumber(src[i], &v, &n, &is_integer)) {
        return InvalidArgument("Cast: element {} ('{}') is not a number", i,
                               src[i].substr(0, 64));
      }
      if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool>) {
        dst[i] = is_integer ? static_cast<D>(n) : static_cast<D>(v);
      } else {
        dst[i] = Convert<D>(v);
      }
    }
    return Status::Ok();
  });
}

Status CastTensor(const Tensor& in, DataType to, KernelContext& ctx) {
  if (to == DataType::kString) return CastToString(in, ctx);
  if (!IsSupportedDataType(to)) {
    return InvalidArgument("Cast: unsupported target type {}", static_cast<int>(to));
  }
  if (in.is_string()) return CastFromString(in, to, ctx);
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
    if (to_ != DataType::kString && !IsSupportedDataType(to_)) {
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
  r.Add("Cast", 6, kOpsetMax, WithString(AllTypes()), MakeKernel<CastKernel>());
  r.Add("CastLike", 15, kOpsetMax, WithString(AllTypes()), MakeKernel<CastLikeKernel>());
}

}  // namespace inferd::cpu
