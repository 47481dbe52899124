#include "serving/inference.h"

namespace inferd::serving {
namespace {

struct KServeType {
  const char* name;
  DataType type;
};
constexpr KServeType kKServeTypes[] = {
    {"BOOL", DataType::kBool},     {"UINT8", DataType::kUInt8},   {"UINT16", DataType::kUInt16},
    {"UINT32", DataType::kUInt32}, {"UINT64", DataType::kUInt64}, {"INT8", DataType::kInt8},
    {"INT16", DataType::kInt16},   {"INT32", DataType::kInt32},   {"INT64", DataType::kInt64},
    {"FP16", DataType::kFloat16},  {"BF16", DataType::kBFloat16}, {"FP32", DataType::kFloat32},
    {"FP64", DataType::kFloat64},  {"BYTES", DataType::kString},
};

}  // namespace

StatusOr<DataType> DataTypeFromKServe(std::string_view name) {
  for (const KServeType& t : kKServeTypes) {
    if (name == t.name) return t.type;
  }
  return InvalidArgument("unknown datatype '{}'", name);
}

const char* KServeName(DataType t) {
  for (const KServeType& k : kKServeTypes) {
    if (k.type == t) return k.name;
  }
  return "";
}

std::string SerializeBytesElements(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) {
    const auto n = static_cast<uint32_t>(v.size());
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
    out += v;
  }
  return out;
}

}  // namespace inferd::serving
