// Fuzz target: the generation API's request JSON (server/openai_codec.h ParseGenerationCall for
// /v1/completions, /v1/chat/completions and Triton's generate), then what the server writes back:
// the OpenAI error JSON of a rejected body, or a completion / stream chunk / Triton reply echoing
// the parsed prompt and model name, all of which must be valid JSON.
//
// Input layout: byte 0 modulo 3 picks the API; the rest is the body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "server/openai_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inferd::server;
  using inferd::fuzz::IsValidJson;
  if (size == 0) return 0;
  const GenApi api = static_cast<GenApi>(data[0] % 3);
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  GenerationCall call;
  if (auto error = ParseGenerationCall(api, body, &call)) {
    FUZZ_CHECK(IsValidJson(ApiErrorJson(*error)), "the error body is valid JSON");
    return 0;
  }
  std::string text = call.prompt;
  for (const auto& m : call.messages) text += m.content;
  ResponseMeta meta{"cmpl-fuzz", call.model, 1};
  auto token_text = [](int32_t id) { return std::to_string(id); };
  if (api == GenApi::kTritonGenerate) {
    FUZZ_CHECK(IsValidJson(EncodeTritonGenerate(call.model, text)), "generate reply is JSON");
    return 0;
  }
  CompletionResult result;
  result.text = text;
  result.finish_reason = "stop";
  FUZZ_CHECK(IsValidJson(EncodeCompletion(api, meta, result, token_text)), "completion is JSON");
  ChunkContent chunk;
  chunk.delta = text;
  chunk.first_chunk = true;
  chunk.include_usage = call.include_usage;
  FUZZ_CHECK(IsValidJson(EncodeChunk(api, meta, chunk, token_text)), "chunk is JSON");
  return 0;
}
