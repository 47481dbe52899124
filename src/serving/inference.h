// Request and response types of the serving layer, shared by ModelManager and the frontends.
//
// A frontend decodes a KServe v2 request (HTTP JSON/binary or gRPC) into an InferenceRequest whose
// input tensors may be views into the request body; `body` keeps that memory alive until the
// response callback has run. ModelManager::Infer validates the request, queues it and calls the
// ResponseCallback exactly once, from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"
#include "common/tensor.h"

namespace inferd::serving {

struct InferInput {
  std::string name;
  Tensor tensor;  // may be a view into InferenceRequest::body
};

struct InferenceRequest {
  std::string model_name;
  int64_t model_version = -1;  // -1: the highest READY version
  std::string id;              // echoed in the response
  std::vector<InferInput> inputs;
  std::vector<std::string> requested_outputs;  // empty: all model outputs, in model order
  // Priority level, 1 = highest; 0 = the model's default_priority_level. Ignored without
  // dynamic_batching priority levels.
  uint32_t priority = 0;
  // Queue timeout; 0 = the model's default (the queue policy's default_timeout_microseconds).
  // Only honoured when the policy has allow_timeout_override.
  std::chrono::microseconds timeout{0};
  // Classification extension: requested output → class count (top-k), from the output's
  // `classification` parameter. Such an output is answered by `InferenceResponse::classified`.
  std::map<std::string, int64_t> classification;
  // Sequence (stateful model) parameters: the correlation ID (`sequence_id`, an unsigned integer
  // or a string; 0 / "" = none) and the START / END flags. Ignored by models without
  // sequence_batching.
  uint64_t sequence_id = 0;
  std::string sequence_id_string;  // a string correlation ID (then sequence_id is 0)
  bool sequence_start = false;
  bool sequence_end = false;
  std::shared_ptr<const void> body;  // keeps memory viewed by `inputs` alive
};

// One classified output (Triton's classification extension): a BYTES tensor of shape
// [batch, k] (or [k] without batching) whose elements are "score:index[:label]", best first.
// Carried as strings until the engine has a string tensor type; the codecs encode it as BYTES.
struct ClassifiedOutput {
  std::string name;
  Shape shape;
  std::vector<std::string> values;  // row-major
};

struct InferenceResponse {
  std::string model_name;
  int64_t model_version = -1;
  std::string id;
  // Owned tensors (never views into the request), in requested order.
  std::vector<std::pair<std::string, Tensor>> outputs;
  std::vector<ClassifiedOutput> classified;  // outputs requested with `classification`
};

// Called exactly once per request, from any thread (a worker thread, or the caller's thread for
// requests rejected before queuing). On a non-OK Status the response holds only name/version/id.
// Status codes: NOT_FOUND (unknown model/version), INVALID_ARGUMENT (bad request),
// UNAVAILABLE (model not ready, queue full, queue timeout expired — as Triton, which answers 503 —
// or server shutting down), INTERNAL (engine failure).
using ResponseCallback = std::function<void(Status, InferenceResponse)>;

// KServe's BYTES wire form: each element as a 4-byte little-endian length, then its bytes.
std::string SerializeBytesElements(const std::vector<std::string>& values);

// KServe/Triton datatype names: "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
// "INT32", "INT64", "FP16", "BF16", "FP32", "FP64", and "BYTES" (strings: DataType::kString).
// Unknown names are INVALID_ARGUMENT.
StatusOr<DataType> DataTypeFromKServe(std::string_view name);
// The KServe name of `t`; "" for types without one (undefined, complex).
const char* KServeName(DataType t);

}  // namespace inferd::serving
