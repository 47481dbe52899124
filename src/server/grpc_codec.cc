#include "server/grpc_codec.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "server/bytes_codec.h"
#include "server/http_codec.h"
#include "server/shared_memory_grpc.h"

namespace inferd::server {
namespace {

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;
using serving::InferenceRequest;

constexpr int kMaxGrpcRank = 32;

StatusOr<Shape> CheckShape(const google::protobuf::RepeatedField<int64_t>& dims,
                           std::string_view where) {
  if (dims.size() > kMaxGrpcRank)
    return InvalidArgument("{}: rank {} is too large", where, dims.size());
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  Shape shape;
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument("{}: shape must hold non-negative integers", where);
    if (d > kMaxElements || (d > 0 && count > kMaxElements / d)) {
      return InvalidArgument("{}: shape is too large", where);
    }
    count *= d;
    shape.push_back(d);
  }
  return shape;
}

// Copies a repeated typed field into a new tensor of `dtype`, range-checking narrowing.
template <typename T, typename Field>
StatusOr<Tensor> FromRepeated(const Field& values, DataType dtype, const Shape& shape,
                              std::string_view where) {
  const int64_t n = NumElements(shape);
  if (static_cast<int64_t>(values.size()) != n) {
    return InvalidArgument("{}: contents hold {} elements but shape {} needs {}", where,
                           values.size(), ShapeToString(shape), n);
  }
  Tensor t = Tensor::Allocate(dtype, shape);
  T* out = t.data<T>();
  for (int64_t i = 0; i < n; ++i) {
    auto v = values.Get(static_cast<int>(i));
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
        return InvalidArgument("{}: element {} ({}) is out of range for {}", where, i, v,
                               serving::KServeName(dtype));
      }
    }
    out[i] = static_cast<T>(v);
  }
  return t;
}

StatusOr<Tensor> FromContents(const InferTensorContents& c, DataType dtype, const Shape& shape,
                              std::string_view where) {
  switch (dtype) {
    case DataType::kBool: return FromRepeated<bool>(c.bool_contents(), dtype, shape, where);
    case DataType::kInt8: return FromRepeated<int8_t>(c.int_contents(), dtype, shape, where);
    case DataType::kInt16: return FromRepeated<int16_t>(c.int_contents(), dtype, shape, where);
    case DataType::kInt32: return FromRepeated<int32_t>(c.int_contents(), dtype, shape, where);
    case DataType::kInt64: return FromRepeated<int64_t>(c.int64_contents(), dtype, shape, where);
    case DataType::kUInt8: return FromRepeated<uint8_t>(c.uint_contents(), dtype, shape, where);
    case DataType::kUInt16: return FromRepeated<uint16_t>(c.uint_contents(), dtype, shape, where);
    case DataType::kUInt32: return FromRepeated<uint32_t>(c.uint_contents(), dtype, shape, where);
    case DataType::kUInt64: return FromRepeated<uint64_t>(c.uint64_contents(), dtype, shape, where);
    case DataType::kFloat32: return FromRepeated<float>(c.fp32_contents(), dtype, shape, where);
    case DataType::kFloat64: return FromRepeated<double>(c.fp64_contents(), dtype, shape, where);
    case DataType::kString: {
      const int64_t n = NumElements(shape);
      if (static_cast<int64_t>(c.bytes_contents_size()) != n) {
        return InvalidArgument("{}: bytes_contents hold {} elements but shape {} needs {}", where,
                               c.bytes_contents_size(), ShapeToString(shape), n);
      }
      return Tensor::FromStrings({c.bytes_contents().begin(), c.bytes_contents().end()}, shape);
    }
    default:
      return InvalidArgument("{}: {} data must be sent in raw_input_contents", where,
                             serving::KServeName(dtype));
  }
}

StatusOr<int64_t> IntParameter(const InferParameter& p, std::string_view name) {
  if (p.parameter_choice_case() != InferParameter::kInt64Param) {
    return InvalidArgument("parameter '{}' must be an int64_param", name);
  }
  if (p.int64_param() < 0) return InvalidArgument("parameter '{}' must be >= 0", name);
  return p.int64_param();
}

}  // namespace

StatusOr<int64_t> ParseGrpcVersion(const std::string& version) {
  if (version.empty()) return int64_t{-1};
  return ParseModelVersion(version);
}

StatusOr<std::unique_ptr<InferenceRequest>> DecodeGrpcInferRequest(
    const ModelInferRequest& msg, std::shared_ptr<const void> keep_alive) {
  auto req = std::make_unique<InferenceRequest>();
  if (msg.model_name().empty()) return InvalidArgument("model_name is empty");
  req->model_name = msg.model_name();
  ASSIGN_OR_RETURN(req->model_version, ParseGrpcVersion(msg.model_version()));
  req->id = msg.id();
  req->body = std::move(keep_alive);
  for (const auto& [key, p] : msg.parameters()) {
    if (key == "priority") {
      ASSIGN_OR_RETURN(int64_t v, IntParameter(p, key));
      if (v > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgument("parameter 'priority' is out of range");
      }
      req->priority = static_cast<uint32_t>(v);
    } else if (key == "timeout") {
      ASSIGN_OR_RETURN(int64_t v, IntParameter(p, key));
      req->timeout = std::chrono::microseconds(v);
    } else if (key == "sequence_id") {
      // Triton's sequence extension: int64_param (or uint64_param) or string_param.
      if (p.parameter_choice_case() == InferParameter::kStringParam) {
        req->sequence_id_string = p.string_param();
      } else if (p.parameter_choice_case() == InferParameter::kUint64Param) {
        req->sequence_id = p.uint64_param();
      } else {
        ASSIGN_OR_RETURN(int64_t v, IntParameter(p, key));
        req->sequence_id = static_cast<uint64_t>(v);
      }
    } else if (key == "sequence_start" || key == "sequence_end") {
      if (p.parameter_choice_case() != InferParameter::kBoolParam) {
        return InvalidArgument("parameter '{}' must be a bool_param", key);
      }
      (key == "sequence_start" ? req->sequence_start : req->sequence_end) = p.bool_param();
    }
  }
  if (msg.inputs_size() == 0) return InvalidArgument("request has no inputs");
  // Inputs in system shared memory (shared_memory_grpc.h) have no raw_input_contents entry.
  int shm_inputs = 0;
  for (const auto& in : msg.inputs()) shm_inputs += in.parameters().count("shared_memory_region");
  const bool raw = msg.raw_input_contents_size() > 0;
  if (raw && msg.raw_input_contents_size() != msg.inputs_size() - shm_inputs) {
    return InvalidArgument("raw_input_contents has {} entries but there are {} inputs",
                           msg.raw_input_contents_size(), msg.inputs_size() - shm_inputs);
  }
  int raw_index = 0;
  for (int i = 0; i < msg.inputs_size(); ++i) {
    const auto& in = msg.inputs(i);
    std::string where = fmt::format("input '{}'", in.name().substr(0, 128));
    if (in.name().empty()) return InvalidArgument("input {}: name is empty", i);
    for (const auto& prev : req->inputs) {
      if (prev.name == in.name()) return InvalidArgument("{}: given more than once", where);
    }
    auto dtype = serving::DataTypeFromKServe(in.datatype());
    if (!dtype.ok()) return dtype.status().WithContext(where);
    ASSIGN_OR_RETURN(Shape shape, CheckShape(in.shape(), where));
    Tensor tensor;
    ASSIGN_OR_RETURN(auto shm, GrpcSharedMemoryParams(in.parameters(), where));
    if (shm.has_value()) {
      if (in.has_contents()) return InvalidArgument("{}: has both shared memory and contents", where);
      ASSIGN_OR_RETURN(tensor, SharedMemoryRegistry::Default().InputTensor(*shm, *dtype, shape,
                                                                           where));
    } else if (raw) {
      if (in.has_contents()) {
        return InvalidArgument("{}: has contents although raw_input_contents is used", where);
      }
      const std::string& bytes = msg.raw_input_contents(raw_index++);
      if (*dtype == DataType::kString) {
        ASSIGN_OR_RETURN(tensor, DecodeLengthPrefixed(bytes, shape, where));
        req->inputs.push_back({in.name(), std::move(tensor)});
        continue;
      }
      const uint64_t expected = static_cast<uint64_t>(NumElements(shape)) * SizeOf(*dtype);
      if (bytes.size() != expected) {
        return InvalidArgument("{}: raw contents hold {} bytes but {} {} needs {}", where,
                               bytes.size(), in.datatype(), ShapeToString(shape), expected);
      }
      void* ptr = const_cast<char*>(bytes.data());
      if (reinterpret_cast<uintptr_t>(ptr) % SizeOf(*dtype) == 0) {
        tensor = Tensor::View(*dtype, shape, ptr);
      } else {
        tensor = Tensor::Allocate(*dtype, shape);
        if (expected > 0) std::memcpy(tensor.raw_data(), ptr, expected);
      }
    } else {
      ASSIGN_OR_RETURN(tensor, FromContents(in.contents(), *dtype, shape, where));
    }
    req->inputs.push_back({in.name(), std::move(tensor)});
  }
  for (const auto& out : msg.outputs()) {
    if (out.name().empty()) return InvalidArgument("requested output with an empty name");
    for (const auto& prev : req->requested_outputs) {
      if (prev == out.name()) {
        return InvalidArgument("output '{}' requested more than once", out.name().substr(0, 128));
      }
    }
    req->requested_outputs.push_back(out.name());
    auto c = out.parameters().find("classification");  // classification extension
    if (c != out.parameters().end()) {
      if (!c->second.has_int64_param() || c->second.int64_param() < 1) {
        return InvalidArgument("output '{}': 'classification' must be a positive int64_param",
                               out.name().substr(0, 128));
      }
      req->classification[out.name()] = c->second.int64_param();
    }
  }
  return req;
}

Status EncodeGrpcInferResponse(const serving::InferenceResponse& response,
                               inference::ModelInferResponse* out) {
  out->Clear();
  out->set_model_name(response.model_name);
  out->set_model_version(response.model_version >= 0 ? std::to_string(response.model_version)
                                                     : "");
  out->set_id(response.id);
  for (const auto& [name, tensor] : response.outputs) {
    const char* dt = serving::KServeName(tensor.dtype());
    if (dt == nullptr || *dt == '\0') {
      return Internal("output '{}' has type {}, which KServe cannot represent", name,
                      DataTypeName(tensor.dtype()));
    }
    auto* o = out->add_outputs();
    o->set_name(name);
    o->set_datatype(dt);
    for (int64_t d : tensor.shape()) o->add_shape(d);
    std::string* raw = out->add_raw_output_contents();
    if (tensor.is_string()) {
      AppendLengthPrefixed(tensor, raw);
    } else {
      raw->assign(static_cast<const char*>(tensor.raw_data()), tensor.ByteSize());
    }
  }
  for (const serving::ClassifiedOutput& c : response.classified) {  // BYTES, length-prefixed
    auto* o = out->add_outputs();
    o->set_name(c.name);
    o->set_datatype("BYTES");
    for (int64_t d : c.shape) o->add_shape(d);
    *out->add_raw_output_contents() = serving::SerializeBytesElements(c.values);
  }
  return Status::Ok();
}

}  // namespace inferd::server
