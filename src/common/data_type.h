// Element types. The enum values equal ONNX's TensorProto.DataType so conversion is a cast.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/float16.h"

namespace inferd {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,  // elements are std::string objects owned by the tensor (see tensor.h)
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
};

// Bytes per element; 0 for kUndefined and kString (strings are not fixed-width bytes: a string
// tensor holds std::string objects, and byte-wise code must not touch them).
size_t SizeOf(DataType t);
// Lower-case name as numpy spells it: "float32", "int64", "bool", "bfloat16", ...
const char* DataTypeName(DataType t);
// True for every fixed-width type a Tensor can hold (all numeric types and bool); false for
// kString, which a Tensor holds too but which byte-wise kernels must not see.
bool IsSupportedDataType(DataType t);
bool IsFloatingPoint(DataType t);  // float16/32/64, bfloat16
bool IsInteger(DataType t);        // signed and unsigned integers (not bool)
bool IsSigned(DataType t);
// Parses names accepted by DataTypeName and ONNX spellings ("FLOAT", "INT64", ...).
bool ParseDataType(const std::string& name, DataType* out);

// Compile-time mapping C++ type → DataType.
template <typename T>
struct DataTypeOf;
#define INFERD_DT(T, E) \
  template <>           \
  struct DataTypeOf<T> { static constexpr DataType value = DataType::E; };
INFERD_DT(float, kFloat32)
INFERD_DT(double, kFloat64)
INFERD_DT(Float16, kFloat16)
INFERD_DT(BFloat16, kBFloat16)
INFERD_DT(int8_t, kInt8)
INFERD_DT(int16_t, kInt16)
INFERD_DT(int32_t, kInt32)
INFERD_DT(int64_t, kInt64)
INFERD_DT(uint8_t, kUInt8)
INFERD_DT(uint16_t, kUInt16)
INFERD_DT(uint32_t, kUInt32)
INFERD_DT(uint64_t, kUInt64)
INFERD_DT(bool, kBool)
INFERD_DT(std::string, kString)
#undef INFERD_DT

// Calls fn(T{}) with the C++ type of `t` for every supported type; returns fn's result.
// Usage: DispatchAll(t, [&](auto tag) { using T = decltype(tag); ... });
// Unsupported `t` calls fallback(). Narrower dispatchers below.
template <typename Fn, typename Fallback>
auto DispatchAll(DataType t, Fn&& fn, Fallback&& fallback) {
  switch (t) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    case DataType::kFloat16: return fn(Float16{});
    case DataType::kBFloat16: return fn(BFloat16{});
    case DataType::kInt8: return fn(int8_t{});
    case DataType::kInt16: return fn(int16_t{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    case DataType::kUInt8: return fn(uint8_t{});
    case DataType::kUInt16: return fn(uint16_t{});
    case DataType::kUInt32: return fn(uint32_t{});
    case DataType::kUInt64: return fn(uint64_t{});
    case DataType::kBool: return fn(bool{});
    default: return fallback();
  }
}

// Numeric types where arithmetic is done natively (no float16/bfloat16/bool).
template <typename Fn, typename Fallback>
auto DispatchNumeric(DataType t, Fn&& fn, Fallback&& fallback) {
  switch (t) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    case DataType::kInt8: return fn(int8_t{});
    case DataType::kInt16: return fn(int16_t{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    case DataType::kUInt8: return fn(uint8_t{});
    case DataType::kUInt16: return fn(uint16_t{});
    case DataType::kUInt32: return fn(uint32_t{});
    case DataType::kUInt64: return fn(uint64_t{});
    default: return fallback();
  }
}

// Dispatch on element size only (for data movement: copy, gather, transpose ...).
// Calls fn with an unsigned integer type of the same width (bool → uint8_t).
template <typename Fn, typename Fallback>
auto DispatchBySize(DataType t, Fn&& fn, Fallback&& fallback) {
  switch (SizeOf(t)) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default: return fallback();
  }
}

}  // namespace inferd
