#include "common/data_type.h"

#include <algorithm>
#include <cctype>

namespace inferd {

size_t SizeOf(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kInt32: case DataType::kUInt32: return 4;
    case DataType::kFloat64: case DataType::kInt64: case DataType::kUInt64: return 8;
    case DataType::kComplex64: return 8;
    case DataType::kComplex128: return 16;
    case DataType::kFloat16: case DataType::kBFloat16: case DataType::kInt16:
    case DataType::kUInt16: return 2;
    case DataType::kInt8: case DataType::kUInt8: case DataType::kBool: return 1;
    case DataType::kString: case DataType::kUndefined: return 0;
  }
  return 0;
}

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kUndefined: return "undefined";
    case DataType::kFloat32: return "float32";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kUInt16: return "uint16";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kString: return "string";
    case DataType::kBool: return "bool";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat64: return "float64";
    case DataType::kUInt32: return "uint32";
    case DataType::kUInt64: return "uint64";
    case DataType::kComplex64: return "complex64";
    case DataType::kComplex128: return "complex128";
    case DataType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

bool IsSupportedDataType(DataType t) {
  return t != DataType::kUndefined && t != DataType::kString && t != DataType::kComplex64 &&
         t != DataType::kComplex128 && SizeOf(t) > 0;
}

bool IsFloatingPoint(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

bool IsInteger(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUInt8: case DataType::kUInt16: case DataType::kUInt32:
    case DataType::kUInt64: return true;
    default: return false;
  }
}

bool IsSigned(DataType t) {
  return IsFloatingPoint(t) || t == DataType::kInt8 || t == DataType::kInt16 ||
         t == DataType::kInt32 || t == DataType::kInt64;
}

bool ParseDataType(const std::string& name, DataType* out) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  struct Alias { const char* name; DataType type; };
  static const Alias kAliases[] = {
      {"float", DataType::kFloat32},   {"float32", DataType::kFloat32},
      {"double", DataType::kFloat64},  {"float64", DataType::kFloat64},
      {"float16", DataType::kFloat16}, {"half", DataType::kFloat16},
      {"fp16", DataType::kFloat16},    {"bfloat16", DataType::kBFloat16},
      {"bf16", DataType::kBFloat16},   {"int8", DataType::kInt8},
      {"int16", DataType::kInt16},     {"int32", DataType::kInt32},
      {"int64", DataType::kInt64},     {"uint8", DataType::kUInt8},
      {"uint16", DataType::kUInt16},   {"uint32", DataType::kUInt32},
      {"uint64", DataType::kUInt64},   {"bool", DataType::kBool},
      {"string", DataType::kString},
  };
  for (const Alias& a : kAliases) {
    if (n == a.name) {
      *out = a.type;
      return true;
    }
  }
  return false;
}

}  // namespace inferd
