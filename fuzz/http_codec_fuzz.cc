// Fuzz target: the KServe v2 HTTP request decoder (server/http_codec.h DecodeHttpInferRequest:
// JSON tensors and the binary tensor extension), then what the server would write back: the
// error JSON of a rejected body, or, for a body that decodes, the response of an identity model
// (every input echoed as an output, binary or JSON per the request's options), which must be
// valid JSON.
//
// Input layout: byte 0 bit 0 set = an Inference-Header-Content-Length is sent, whose value is
// bytes 1-4 (little endian) modulo the body size + 1; the rest is the body.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "fuzz/fuzz_util.h"
#include "server/http_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inferd;
  if (size < 5) return 0;
  std::optional<size_t> header_length;
  auto body = std::make_shared<std::string>(reinterpret_cast<const char*>(data) + 5, size - 5);
  if (data[0] & 1) {
    const uint32_t v = data[1] | (data[2] << 8) | (data[3] << 16) | (uint32_t{data[4]} << 24);
    header_length = v % (body->size() + 1);
  }
  auto decoded = server::DecodeHttpInferRequest("m", -1, body, header_length);
  if (!decoded.ok()) {
    FUZZ_CHECK(fuzz::IsValidJson(server::JsonError(decoded.status().message())),
               "the error body is valid JSON");
    return 0;
  }
  serving::InferenceResponse response;
  response.model_name = "m";
  response.model_version = 1;
  response.id = decoded->request->id;
  for (const auto& input : decoded->request->inputs) {
    response.outputs.emplace_back(input.name, input.tensor.Clone());
  }
  auto encoded = server::EncodeHttpInferResponse(response, decoded->output_options);
  if (!encoded.ok()) return 0;
  FUZZ_CHECK(encoded->json_length <= encoded->body.size(), "the JSON header fits the body");
  FUZZ_CHECK(fuzz::IsValidJson(std::string_view(encoded->body).substr(0, encoded->json_length)),
             "the response header is valid JSON");
  return 0;
}
