// Pure wire functions of the generation API (openai_http.h serves them): parsing and validating
// OpenAI /v1/completions and /v1/chat/completions bodies and Triton's generate extension, encoding
// responses, stream chunks and OpenAI's error JSON, and server-sent-event framing.
//
// Validation here needs no model; the checks that do (prompt longer than the context, max_tokens
// above it) are in openai_http.cc. Unknown request fields are ignored (clients send "user",
// "suffix", ...); fields we know with a wrong type or range get a 400 naming the field (`param`).
// Constrained output (completions and chat): OpenAI's `response_format` ({"type": "text"},
// {"type": "json_object"}, {"type": "json_schema", "json_schema": {"name", "schema", "strict"}})
// and inferd's {"type": "regex", "regex": "..."}, or vLLM's `guided_regex` / `guided_json`, become
// params.guided_regex (schemas converted by constrained/json_schema.h); an unsupported schema
// keyword, an invalid schema or regex is a 400 naming the field and the reason.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/text_generator.h"

namespace inferd::server {

// OpenAI's error object: {"error": {"message", "type", "param", "code"}} (param/code null if "").
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // or "not_found_error", "server_error"
  std::string param;
  std::string code;
};
std::string ApiErrorJson(const ApiError& error);
ApiError BadRequest(std::string message, std::string param = "");
ApiError ModelNotFound(const std::string& model);  // 404, code "model_not_found"

struct ChatMessage {
  std::string role;
  std::string content;
};

enum class GenApi { kCompletions, kChatCompletions, kTritonGenerate };

struct GenerationCall {
  GenApi api = GenApi::kCompletions;
  std::string model;                   // empty for Triton (the model is in the path)
  std::string prompt;                  // completions and Triton: the prompt text
  std::vector<int32_t> prompt_tokens;  // completions: a prompt given as token ids
  std::vector<ChatMessage> messages;   // chat
  bool max_tokens_set = false;         // false: the API's default applies (openai_http.cc)
  GenParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Parses a request body of `api`. Returns the error to answer with on failure.
std::optional<ApiError> ParseGenerationCall(GenApi api, std::string_view body,
                                            GenerationCall* call);

// Identity of one response; `created` is Unix seconds.
struct ResponseMeta {
  std::string id;
  std::string model;
  int64_t created = 0;
};

struct Usage {
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// A whole (non-streamed) OpenAI response. `token_text` gives each logprob token's text.
struct CompletionResult {
  std::string text;
  std::vector<GenTokenLogprob> logprobs;
  bool logprobs_requested = false;
  std::string finish_reason;  // "stop" | "length"
  Usage usage;
};
std::string EncodeCompletion(GenApi api, const ResponseMeta& meta, const CompletionResult& result,
                             const std::function<std::string(int32_t)>& token_text);

// One streamed chunk: `delta` text (chat: first_chunk adds role "assistant"); finish_reason ""
// = null; with include_usage every chunk carries "usage": null.
struct ChunkContent {
  std::string delta;
  std::vector<GenTokenLogprob> logprobs;
  bool logprobs_requested = false;
  bool first_chunk = false;
  std::string finish_reason;
  bool include_usage = false;
};
std::string EncodeChunk(GenApi api, const ResponseMeta& meta, const ChunkContent& chunk,
                        const std::function<std::string(int32_t)>& token_text);
// The last chunk before [DONE] with include_usage: "choices": [] and the usage.
std::string EncodeUsageChunk(GenApi api, const ResponseMeta& meta, const Usage& usage);

// Triton generate: {"model_name", "model_version", "text_output"} (a delta when streamed).
std::string EncodeTritonGenerate(const std::string& model, const std::string& text);

// "data: <json>\n\n" — one server-sent event per JSON object; kSseDone ends an OpenAI stream.
std::string SseEvent(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "inferd"}...]}
std::string EncodeModelList(const std::vector<std::string>& models, int64_t created);

}  // namespace inferd::server
