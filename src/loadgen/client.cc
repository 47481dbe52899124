#include "loadgen/client.h"

#include <cstring>
#include <random>

#include "common/data_type.h"
#include "common/float16.h"
#include "common/npy.h"

namespace inferd::loadgen {

namespace {

struct KserveType {
  std::string_view name;
  DataType dtype;
};
constexpr KserveType kKserveTypes[] = {
    {"BOOL", DataType::kBool},       {"UINT8", DataType::kUInt8},   {"UINT16", DataType::kUInt16},
    {"UINT32", DataType::kUInt32},   {"UINT64", DataType::kUInt64}, {"INT8", DataType::kInt8},
    {"INT16", DataType::kInt16},     {"INT32", DataType::kInt32},   {"INT64", DataType::kInt64},
    {"FP16", DataType::kFloat16},    {"BF16", DataType::kBFloat16}, {"FP32", DataType::kFloat32},
    {"FP64", DataType::kFloat64},
};

DataType FromKserve(std::string_view name) {
  for (const auto& t : kKserveTypes) {
    if (t.name == name) return t.dtype;
  }
  return DataType::kUndefined;
}

template <class T>
void FillInts(std::string& bytes, int64_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(0, 1);
  T* p = reinterpret_cast<T*>(bytes.data());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(rng));
}

void FillRandom(DataType dtype, int64_t n, std::mt19937_64& rng, std::string& bytes) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  switch (dtype) {
    case DataType::kFloat32: {
      float* p = reinterpret_cast<float*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = u(rng);
      return;
    }
    case DataType::kFloat64: {
      double* p = reinterpret_cast<double*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = u(rng);
      return;
    }
    case DataType::kFloat16: {
      Float16* p = reinterpret_cast<Float16*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = Float16(u(rng));
      return;
    }
    case DataType::kBFloat16: {
      BFloat16* p = reinterpret_cast<BFloat16*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = BFloat16(u(rng));
      return;
    }
    case DataType::kBool:
    case DataType::kUInt8: return FillInts<uint8_t>(bytes, n, rng);
    case DataType::kInt8: return FillInts<int8_t>(bytes, n, rng);
    case DataType::kUInt16: return FillInts<uint16_t>(bytes, n, rng);
    case DataType::kInt16: return FillInts<int16_t>(bytes, n, rng);
    case DataType::kUInt32: return FillInts<uint32_t>(bytes, n, rng);
    case DataType::kInt32: return FillInts<int32_t>(bytes, n, rng);
    case DataType::kUInt64: return FillInts<uint64_t>(bytes, n, rng);
    case DataType::kInt64: return FillInts<int64_t>(bytes, n, rng);
    default: return;
  }
}

StatusOr<std::vector<int64_t>> ParseDims(std::string_view text, std::string_view arg) {
  std::vector<int64_t> dims;
  std::string s(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0) {
      return InvalidArgument("--shape '{}': dims must be non-negative integers separated by ','",
                             arg);
    }
    dims.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return dims;
}

Status SplitNamed(const std::string& arg, std::string_view flag, std::string* name,
                  std::string* value) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    return InvalidArgument("{} '{}': expected NAME=VALUE", flag, arg);
  }
  *name = arg.substr(0, eq);
  *value = arg.substr(eq + 1);
  return Status::Ok();
}

}  // namespace

size_t KserveDataTypeSize(std::string_view datatype) {
  DataType t = FromKserve(datatype);
  return t == DataType::kUndefined ? 0 : SizeOf(t);
}

StatusOr<ServerUrl> ParseServerUrl(std::string_view url) {
  ServerUrl out;
  std::string_view rest = url;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("grpc://")) {
    rest.remove_prefix(7);
    out.protocol = ServerUrl::Protocol::kGrpc;
  } else if (rest.find("://") != std::string_view::npos) {
    return InvalidArgument("--url '{}': the scheme must be http:// or grpc://", url);
  }
  while (rest.ends_with('/')) rest.remove_suffix(1);
  size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size() ||
      rest.find('/') != std::string_view::npos) {
    return InvalidArgument("--url '{}': expected http://HOST:PORT or grpc://HOST:PORT", url);
  }
  out.host = std::string(rest.substr(0, colon));
  out.port = std::string(rest.substr(colon + 1));
  for (char c : out.port) {
    if (c < '0' || c > '9') return InvalidArgument("--url '{}': bad port", url);
  }
  return out;
}

StatusOr<std::unique_ptr<InferenceClient>> CreateClient(const ClientOptions& options) {
  if (options.url.protocol == ServerUrl::Protocol::kGrpc) return CreateGrpcClient(options);
  return CreateHttpClient(options);
}

StatusOr<std::vector<InputTensor>> BuildInputs(const ModelMetadata& metadata, int batch,
                                               const std::vector<std::string>& files,
                                               const std::vector<std::string>& shapes,
                                               uint64_t seed) {
  if (batch < 1) return InvalidArgument("--batch must be at least 1, got {}", batch);
  auto find = [&](const std::string& name) -> const TensorSpec* {
    for (const auto& in : metadata.inputs) {
      if (in.name == name) return &in;
    }
    return nullptr;
  };
  std::vector<InputTensor> out;
  for (const auto& in : metadata.inputs) out.push_back({in, ""});
  auto slot = [&](const std::string& name) -> InputTensor* {
    for (auto& t : out) {
      if (t.spec.name == name) return &t;
    }
    return nullptr;
  };
  for (const std::string& arg : shapes) {
    std::string name, value;
    RETURN_IF_ERROR(SplitNamed(arg, "--shape", &name, &value));
    if (!find(name)) return InvalidArgument("--shape '{}': the model has no input '{}'", arg, name);
    ASSIGN_OR_RETURN(slot(name)->spec.shape, ParseDims(value, arg));
  }
  std::mt19937_64 rng(seed);
  std::vector<bool> from_file(out.size(), false);
  for (const std::string& arg : files) {
    std::string name, path;
    RETURN_IF_ERROR(SplitNamed(arg, "--input", &name, &path));
    const TensorSpec* spec = find(name);
    if (!spec) return InvalidArgument("--input '{}': the model has no input '{}'", arg, name);
    auto t = LoadNpy(path);
    if (!t.ok()) return t.status().WithContext("--input " + arg);
    InputTensor* s = slot(name);
    std::string_view dtype;
    for (const auto& k : kKserveTypes) {
      if (k.dtype == t->dtype()) dtype = k.name;
    }
    if (dtype != spec->datatype) {
      return InvalidArgument("--input '{}': the file holds {} but the model wants {}", arg,
                             DataTypeName(t->dtype()), spec->datatype);
    }
    s->spec.shape = t->shape();
    s->bytes.assign(static_cast<const char*>(t->raw_data()), t->ByteSize());
    from_file[s - out.data()] = true;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (from_file[i]) continue;
    InputTensor& t = out[i];
    DataType dtype = FromKserve(t.spec.datatype);
    if (dtype == DataType::kUndefined) {
      return InvalidArgument("input '{}': datatype '{}' is not supported by the load generator",
                             t.spec.name, t.spec.datatype);
    }
    bool first = true;
    for (int64_t& d : t.spec.shape) {
      if (d < 0) d = first ? batch : 1;
      first = false;
    }
    int64_t n = 1;
    for (int64_t d : t.spec.shape) n *= d;
    t.bytes.assign(static_cast<size_t>(n) * SizeOf(dtype), '\0');
    FillRandom(dtype, n, rng, t.bytes);
  }
  return out;
}

}  // namespace inferd::loadgen
