// KServe v2 HTTP/REST inference bodies: JSON tensors and the binary tensor extension.
//
// Pure functions (no sockets, no model manager), so they are unit- and fuzz-tested directly.
//
// Request body: a JSON header, optionally followed by binary tensor data. With the binary
// extension the client sends `Inference-Header-Content-Length: N`; the first N bytes are JSON and
// the rest holds, in input order, the raw bytes of every input whose `parameters` carry
// `binary_data_size`:
//
//   {"id": "r1", "parameters": {"priority": 1, "timeout": 5000, "binary_data_output": true},
//    "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3, 4]]},
//               {"name": "y", "datatype": "INT64", "shape": [2], "parameters": {"binary_data_size": 16}}],
//    "outputs": [{"name": "z", "parameters": {"binary_data": false}}]}
//
// JSON `data` may be flat or nested; either way it is read in row-major order and must hold exactly
// as many elements as the shape. Binary inputs become views into the body (no copy) when their
// offset is aligned to the element size. Inputs whose `parameters` name a shared_memory_region
// are views into that region of SharedMemoryRegistry::Default() (shared_memory_http.h).
//
// BYTES (strings): JSON `data` holds JSON strings (any other JSON value is an error); binary data
// is the length-prefixed form of server/bytes_codec.h (a 4-byte little-endian length before each
// element), and `binary_data_size` is that form's total size. BYTES inputs are always copied into
// an owned string tensor; BYTES outputs are written the same two ways.
//
// Every malformed body yields INVALID_ARGUMENT with a message naming the offending field; decoding
// never crashes or allocates more than a small multiple of the body size.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "server/shared_memory.h"
#include "serving/inference.h"

namespace inferd::server {

// How the client wants the outputs encoded (binary extension); decoded from the request.
struct HttpOutputOptions {
  // Request parameter `binary_data_output`: default for every output.
  bool binary_by_default = false;
  // Per-output `binary_data` parameters, overriding the default.
  std::map<std::string, bool> binary;
  // Outputs written into system shared memory (parameters shared_memory_region, ...): the
  // response lists them without data (shared_memory.h).
  std::map<std::string, SharedMemoryParams> shared_memory;

  bool IsBinary(const std::string& name) const {
    auto it = binary.find(name);
    return it == binary.end() ? binary_by_default : it->second;
  }
};

struct DecodedHttpRequest {
  std::unique_ptr<serving::InferenceRequest> request;
  HttpOutputOptions output_options;
};

// Parses a model version from a URL segment: a positive decimal integer that fits int64.
StatusOr<int64_t> ParseModelVersion(std::string_view text);

// Decodes an infer request body. `header_length` is the Inference-Header-Content-Length header
// (nullopt when absent: the whole body is JSON). The returned request's `body` shares ownership of
// `body`, and binary inputs may view into it.
StatusOr<DecodedHttpRequest> DecodeHttpInferRequest(std::string model_name, int64_t model_version,
                                                    std::shared_ptr<std::string> body,
                                                    std::optional<size_t> header_length);

struct EncodedHttpResponse {
  std::string body;
  // Length of the JSON header within `body`; equals body.size() when no output is binary.
  size_t json_length = 0;
  bool has_binary() const { return json_length != body.size(); }
};

// Encodes a successful response: outputs in response order, JSON `data` (flat, row-major) or
// binary (appended after the JSON, announced by `binary_data_size`) per `options`.
StatusOr<EncodedHttpResponse> EncodeHttpInferResponse(const serving::InferenceResponse& response,
                                                      const HttpOutputOptions& options);

// {"error": "<message>"}
std::string JsonError(std::string_view message);

// Triton's mapping of a Status to an HTTP status code: 400 invalid argument (and unsupported),
// 404 not found, 409 already exists, 503 unavailable / queue full / timed out, 500 otherwise.
int HttpStatusFor(const Status& status);

}  // namespace inferd::server
