// The encoding half of openai_codec.h (responses, stream chunks, SSE framing).
#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "server/openai_codec.h"

namespace inferd::server {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
using TokenText = std::function<std::string(int32_t)>;

void WriteStr(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

bool IsChat(GenApi api) { return api == GenApi::kChatCompletions; }

void Header(Writer& w, GenApi api, const ResponseMeta& meta, bool chunk) {
  w.Key("id");
  WriteStr(w, meta.id);
  w.Key("object");
  if (IsChat(api)) {
    w.String(chunk ? "chat.completion.chunk" : "chat.completion");
  } else {
    w.String("text_completion");
  }
  w.Key("created");
  w.Int64(meta.created);
  w.Key("model");
  WriteStr(w, meta.model);
}

void UsageObject(Writer& w, const Usage& u) {
  w.StartObject();
  w.Key("prompt_tokens");
  w.Int(u.prompt_tokens);
  w.Key("completion_tokens");
  w.Int(u.completion_tokens);
  w.Key("total_tokens");
  w.Int(u.prompt_tokens + u.completion_tokens);
  w.Key("prompt_tokens_details");
  w.StartObject();
  w.Key("cached_tokens");
  w.Int(u.cached_tokens);
  w.EndObject();
  w.EndObject();
}

// Chat: {"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}.
void ChatLogprobs(Writer& w, const std::vector<GenTokenLogprob>& lps, const TokenText& text) {
  w.StartObject();
  w.Key("content");
  w.StartArray();
  for (const auto& lp : lps) {
    w.StartObject();
    w.Key("token");
    WriteStr(w, text(lp.token));
    w.Key("logprob");
    w.Double(lp.logprob);
    w.Key("top_logprobs");
    w.StartArray();
    for (const auto& [t, l] : lp.top) {
      w.StartObject();
      w.Key("token");
      WriteStr(w, text(t));
      w.Key("logprob");
      w.Double(l);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

// Completions (legacy): parallel arrays tokens / token_logprobs / top_logprobs / text_offset.
void CompletionLogprobs(Writer& w, const std::vector<GenTokenLogprob>& lps, const TokenText& text,
                        size_t offset) {
  w.StartObject();
  w.Key("tokens");
  w.StartArray();
  for (const auto& lp : lps) WriteStr(w, text(lp.token));
  w.EndArray();
  w.Key("token_logprobs");
  w.StartArray();
  for (const auto& lp : lps) w.Double(lp.logprob);
  w.EndArray();
  w.Key("top_logprobs");
  w.StartArray();
  for (const auto& lp : lps) {
    w.StartObject();
    for (const auto& [t, l] : lp.top) {
      WriteStr(w, text(t));  // a token repeated in the top list keeps its first (best) value
      w.Double(l);
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("text_offset");
  w.StartArray();
  for (const auto& lp : lps) {
    w.Uint64(offset);
    offset += text(lp.token).size();
  }
  w.EndArray();
  w.EndObject();
}

void Logprobs(Writer& w, GenApi api, bool requested, const std::vector<GenTokenLogprob>& lps,
              const TokenText& text) {
  w.Key("logprobs");
  if (!requested) return static_cast<void>(w.Null());
  if (IsChat(api)) return ChatLogprobs(w, lps, text);
  CompletionLogprobs(w, lps, text, 0);
}

void FinishReason(Writer& w, std::string_view reason) {
  w.Key("finish_reason");
  if (reason.empty()) {
    w.Null();
  } else {
    WriteStr(w, reason);
  }
}

}  // namespace

std::string EncodeCompletion(GenApi api, const ResponseMeta& meta, const CompletionResult& r,
                             const TokenText& token_text) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  Header(w, api, meta, /*chunk=*/false);
  w.Key("choices");
  w.StartArray();
  w.StartObject();
  w.Key("index");
  w.Int(0);
  if (IsChat(api)) {
    w.Key("message");
    w.StartObject();
    w.Key("role");
    w.String("assistant");
    w.Key("content");
    WriteStr(w, r.text);
    w.EndObject();
  } else {
    w.Key("text");
    WriteStr(w, r.text);
  }
  Logprobs(w, api, r.logprobs_requested, r.logprobs, token_text);
  FinishReason(w, r.finish_reason);
  w.EndObject();
  w.EndArray();
  w.Key("usage");
  UsageObject(w, r.usage);
  w.EndObject();
  return sb.GetString();
}

std::string EncodeChunk(GenApi api, const ResponseMeta& meta, const ChunkContent& c,
                        const TokenText& token_text) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  Header(w, api, meta, /*chunk=*/true);
  w.Key("choices");
  w.StartArray();
  w.StartObject();
  w.Key("index");
  w.Int(0);
  if (IsChat(api)) {
    w.Key("delta");
    w.StartObject();
    if (c.first_chunk) {
      w.Key("role");
      w.String("assistant");
    }
    if (!c.delta.empty() || c.first_chunk) {
      w.Key("content");
      WriteStr(w, c.delta);
    }
    w.EndObject();
  } else {
    w.Key("text");
    WriteStr(w, c.delta);
  }
  Logprobs(w, api, c.logprobs_requested, c.logprobs, token_text);
  FinishReason(w, c.finish_reason);
  w.EndObject();
  w.EndArray();
  if (c.include_usage) {
    w.Key("usage");
    w.Null();
  }
  w.EndObject();
  return sb.GetString();
}

std::string EncodeUsageChunk(GenApi api, const ResponseMeta& meta, const Usage& usage) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  Header(w, api, meta, /*chunk=*/true);
  w.Key("choices");
  w.StartArray();
  w.EndArray();
  w.Key("usage");
  UsageObject(w, usage);
  w.EndObject();
  return sb.GetString();
}

std::string EncodeTritonGenerate(const std::string& model, const std::string& text) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("model_name");
  WriteStr(w, model);
  w.Key("model_version");
  w.String("1");
  w.Key("text_output");
  WriteStr(w, text);
  w.EndObject();
  return sb.GetString();
}

std::string SseEvent(std::string_view json) {
  // JSON from RapidJSON's Writer has no raw newline (strings escape it), so one data: line holds
  // the whole event.
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ").append(json).append("\n\n");
  return out;
}

std::string EncodeModelList(const std::vector<std::string>& models, int64_t created) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("object");
  w.String("list");
  w.Key("data");
  w.StartArray();
  for (const auto& m : models) {
    w.StartObject();
    w.Key("id");
    WriteStr(w, m);
    w.Key("object");
    w.String("model");
    w.Key("created");
    w.Int64(created);
    w.Key("owned_by");
    w.String("inferd");
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

}  // namespace inferd::server
