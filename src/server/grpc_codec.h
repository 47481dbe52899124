// KServe v2 gRPC messages ↔ serving types. Pure functions, fuzz-tested beside the HTTP codec.
//
// Inputs come either as typed `contents` or, for every input at once, as `raw_input_contents`
// (one entry per input, in order). Raw inputs become views into the request message when aligned
// (the message must outlive the request's use of its inputs: until the response callback).
// Responses always carry `raw_output_contents`, as Triton's do.
//
// BYTES (strings): typed inputs use `contents.bytes_contents` (one entry per element); raw inputs
// and every BYTES output use the length-prefixed form of server/bytes_codec.h. BYTES inputs are
// copied into an owned string tensor.
#pragma once

#include <memory>

#include "common/status.h"
#include "grpc_service.pb.h"
#include "serving/inference.h"

namespace inferd::server {

// Decodes `msg`; `keep_alive` (may be null) is stored as the request's `body`.
StatusOr<std::unique_ptr<serving::InferenceRequest>> DecodeGrpcInferRequest(
    const inference::ModelInferRequest& msg, std::shared_ptr<const void> keep_alive);

// Fills `out` (cleared first) from a successful response.
Status EncodeGrpcInferResponse(const serving::InferenceResponse& response,
                               inference::ModelInferResponse* out);

// "" → -1 (server's choice); otherwise a positive integer.
StatusOr<int64_t> ParseGrpcVersion(const std::string& version);

}  // namespace inferd::server
