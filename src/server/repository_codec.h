// Repository-API load requests (Triton's model repository extension), decoded into the manager's
// LoadParameters. Pure functions, unit-tested directly.
//
// HTTP POST /v2/repository/models/M/load body (empty or {} for a plain load):
//   {"parameters": {"config": "<model config JSON, as a string>",
//                   "file:1/model.onnx": "<base64 contents>", ...}}
// gRPC RepositoryModelLoadRequest.parameters: "config" → string_param, "file:<path>" →
// bytes_param (raw contents). Other parameters (e.g. Triton's unload_dependents) are ignored.
// Errors are INVALID_ARGUMENT naming the parameter.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "grpc_service.pb.h"
#include "serving/model_manager.h"

namespace inferd::server {

StatusOr<serving::LoadParameters> DecodeHttpLoadRequest(std::string_view body);
StatusOr<serving::LoadParameters> DecodeGrpcLoadRequest(
    const inference::RepositoryModelLoadRequest& request);

// Standard base64 (RFC 4648, with '=' padding; no whitespace). INVALID_ARGUMENT otherwise.
StatusOr<std::string> DecodeBase64(std::string_view text);

}  // namespace inferd::server
