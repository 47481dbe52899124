// Fuzz target: the KServe v2 gRPC request decoder (server/grpc_codec.h DecodeGrpcInferRequest)
// from a serialized ModelInferRequest (what gRPC hands the server after protobuf parsing), then
// the response of an identity model (every input echoed) through EncodeGrpcInferResponse.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz/fuzz_util.h"
#include "grpc_service.pb.h"
#include "server/grpc_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inferd;
  auto msg = std::make_shared<inference::ModelInferRequest>();
  if (!msg->ParseFromArray(data, static_cast<int>(size))) return 0;
  auto request = server::DecodeGrpcInferRequest(*msg, msg);
  if (!request.ok()) return 0;
  serving::InferenceResponse response;
  response.model_name = (*request)->model_name;
  response.model_version = 1;
  response.id = (*request)->id;
  for (const auto& input : (*request)->inputs) {
    response.outputs.emplace_back(input.name, input.tensor.Clone());
  }
  inference::ModelInferResponse out;
  (void)server::EncodeGrpcInferResponse(response, &out);
  return 0;
}
