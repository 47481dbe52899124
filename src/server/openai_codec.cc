#include "server/openai_codec.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <limits>

#include "constrained/json_schema.h"
#include "constrained/regex.h"

namespace inferd::server {
namespace {

using Value = rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// OpenAI documents at most 20 top logprobs for chat and 5 for completions; we allow 20 for both.
constexpr int kMaxTopLogprobs = 20;

void Str(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}
void StrOrNull(Writer& w, std::string_view s) {
  if (s.empty()) {
    w.Null();
  } else {
    Str(w, s);
  }
}

// Field readers: absent leaves *out as is; a wrong type or range sets *err.
class Fields {
 public:
  explicit Fields(const Value& obj) : obj_(obj) {}
  std::optional<ApiError> err;

  const Value* Get(const char* name) const {
    auto it = obj_.FindMember(name);
    if (it == obj_.MemberEnd() || it->value.IsNull()) return nullptr;
    return &it->value;
  }
  bool Has(const char* name) const { return Get(name) != nullptr; }

  void Bool(const char* name, bool* out) {
    const Value* v = Get(name);
    if (v == nullptr || err) return;
    if (!v->IsBool()) return Fail(name, "a boolean");
    *out = v->GetBool();
  }
  void Int(const char* name, int64_t lo, int64_t hi, int* out) {
    const Value* v = Get(name);
    if (v == nullptr || err) return;
    if (!v->IsInt64() && !(v->IsDouble() && std::floor(v->GetDouble()) == v->GetDouble())) {
      return Fail(name, "an integer");
    }
    double d = v->IsInt64() ? static_cast<double>(v->GetInt64()) : v->GetDouble();
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      err =
          BadRequest(fmt::format("'{}' must be between {} and {} (got {})", name, lo, hi, d), name);
      return;
    }
    *out = static_cast<int>(d);
  }
  void Float(const char* name, float* out) {
    const Value* v = Get(name);
    if (v == nullptr || err) return;
    if (!v->IsNumber()) return Fail(name, "a number");
    *out = static_cast<float>(v->GetDouble());
  }
  void Fail(const char* name, const char* what) {
    err = BadRequest(fmt::format("'{}' must be {}", name, what), name);
  }

 private:
  const Value& obj_;
};

// The sampling fields every API shares (OpenAI names; top_k, ignore_eos as in vLLM).
void ReadSampling(Fields& f, GenerationCall* call) {
  GenParams& p = call->params;
  if (f.Has("max_tokens") || f.Has("max_completion_tokens")) call->max_tokens_set = true;
  f.Int("max_tokens", std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
        &p.max_tokens);
  f.Int("max_completion_tokens", std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
        &p.max_tokens);
  if (!f.err && call->max_tokens_set && p.max_tokens <= 0) {
    f.err = BadRequest(fmt::format("'max_tokens' must be at least 1 (got {})", p.max_tokens),
                       "max_tokens");
  }
  f.Float("temperature", &p.temperature);
  if (!f.err && !(p.temperature >= 0)) {
    f.err = BadRequest(fmt::format("'temperature' must be >= 0 (got {})", p.temperature),
                       "temperature");
  }
  f.Float("top_p", &p.top_p);
  if (!f.err && !(p.top_p > 0 && p.top_p <= 1)) {
    f.err = BadRequest(fmt::format("'top_p' must be in (0, 1] (got {})", p.top_p), "top_p");
  }
  f.Int("top_k", -1, std::numeric_limits<int>::max(), &p.top_k);
  if (p.top_k < 0) p.top_k = 0;  // vLLM spells "off" as -1
  f.Float("frequency_penalty", &p.frequency_penalty);
  f.Float("presence_penalty", &p.presence_penalty);
  for (auto [name, v] : {std::pair{"frequency_penalty", p.frequency_penalty},
                         std::pair{"presence_penalty", p.presence_penalty}}) {
    if (!f.err && !(v >= -2 && v <= 2)) {
      f.err = BadRequest(fmt::format("'{}' must be between -2 and 2 (got {})", name, v), name);
    }
  }
  if (const Value* seed = f.Get("seed"); seed != nullptr && !f.err) {
    if (!seed->IsInt64() && !seed->IsUint64()) return f.Fail("seed", "an integer");
    p.seed = seed->IsUint64() ? seed->GetUint64() : static_cast<uint64_t>(seed->GetInt64());
  }
  f.Bool("ignore_eos", &p.ignore_eos);
  if (const Value* stop = f.Get("stop"); stop != nullptr && !f.err) {
    if (stop->IsString()) {
      p.stop.emplace_back(stop->GetString(), stop->GetStringLength());
    } else if (stop->IsArray()) {
      for (const auto& s : stop->GetArray()) {
        if (!s.IsString()) return f.Fail("stop", "a string or an array of strings");
        p.stop.emplace_back(s.GetString(), s.GetStringLength());
      }
    } else {
      return f.Fail("stop", "a string or an array of strings");
    }
    for (const auto& s : p.stop) {
      if (s.empty()) f.err = BadRequest("'stop' strings must not be empty", "stop");
    }
  }
}

void ReadStreamFields(Fields& f, GenerationCall* call) {
  f.Bool("stream", &call->stream);
  int n = 1;
  f.Int("n", std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), &n);
  if (!f.err && n != 1) {
    f.err = BadRequest(fmt::format("only n=1 is supported (got n={})", n), "n");
  }
  if (const Value* so = f.Get("stream_options"); so != nullptr && !f.err) {
    if (!so->IsObject()) return f.Fail("stream_options", "an object");
    if (!call->stream) {
      f.err =
          BadRequest("'stream_options' is only allowed when 'stream' is true", "stream_options");
      return;
    }
    Fields sf(*so);
    sf.Bool("include_usage", &call->include_usage);
    if (sf.err) f.err = sf.err;
  }
}

void ReadPrompt(Fields& f, GenerationCall* call) {
  const Value* prompt = f.Get("prompt");
  if (f.err) return;
  if (prompt == nullptr) {
    f.err = BadRequest("'prompt' is required", "prompt");
  } else if (prompt->IsString()) {
    call->prompt.assign(prompt->GetString(), prompt->GetStringLength());
  } else if (prompt->IsArray() && prompt->Size() == 1 && (*prompt)[0].IsString()) {
    call->prompt.assign((*prompt)[0].GetString(), (*prompt)[0].GetStringLength());
  } else if (prompt->IsArray() && prompt->Size() > 0 && (*prompt)[0].IsInt()) {
    for (const auto& t : prompt->GetArray()) {
      if (!t.IsInt() || t.GetInt() < 0) return f.Fail("prompt", "an array of token ids >= 0");
      call->prompt_tokens.push_back(t.GetInt());
    }
  } else if (prompt->IsArray() && prompt->Size() > 1) {
    f.err = BadRequest("only one prompt per request is supported", "prompt");
  } else {
    f.Fail("prompt", "a string, an array of one string or an array of token ids");
  }
}

// Message content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<std::string> ReadContent(const Value& content) {
  if (content.IsString()) return std::string(content.GetString(), content.GetStringLength());
  if (!content.IsArray()) return std::nullopt;
  std::string text;
  for (const auto& part : content.GetArray()) {
    if (!part.IsObject()) return std::nullopt;
    auto type = part.FindMember("type");
    auto t = part.FindMember("text");
    if (type == part.MemberEnd() || !type->value.IsString() ||
        std::string_view(type->value.GetString()) != "text" || t == part.MemberEnd() ||
        !t->value.IsString()) {
      return std::nullopt;
    }
    text.append(t->value.GetString(), t->value.GetStringLength());
  }
  return text;
}

void ReadMessages(Fields& f, GenerationCall* call) {
  const Value* messages = f.Get("messages");
  if (f.err) return;
  if (messages == nullptr || !messages->IsArray() || messages->Empty()) {
    f.err = BadRequest("'messages' must be a non-empty array", "messages");
    return;
  }
  for (const auto& m : messages->GetArray()) {
    auto role = m.IsObject() ? m.FindMember("role") : m.MemberEnd();
    if (!m.IsObject() || role == m.MemberEnd() || !role->value.IsString()) {
      f.err = BadRequest("each message must be an object with a string 'role'", "messages");
      return;
    }
    auto content = m.FindMember("content");
    std::optional<std::string> text = content == m.MemberEnd() || content->value.IsNull()
                                          ? std::string()
                                          : ReadContent(content->value);
    if (!text) {
      f.err =
          BadRequest("message 'content' must be a string or an array of text parts", "messages");
      return;
    }
    call->messages.push_back({role->value.GetString(), std::move(*text)});
  }
}

void ReadLogprobs(GenApi api, Fields& f, GenerationCall* call) {
  if (api == GenApi::kChatCompletions) {
    bool want = false;
    int top = 0;
    f.Bool("logprobs", &want);
    f.Int("top_logprobs", 0, kMaxTopLogprobs, &top);
    if (!f.err && f.Has("top_logprobs") && !want) {
      f.err = BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
    if (want) call->params.logprobs = top;
  } else {
    f.Int("logprobs", 0, kMaxTopLogprobs, &call->params.logprobs);
  }
}

// OpenAI's json_schema: {"name", "schema", "strict", "description"} -> the schema's regex.
std::optional<ApiError> ReadJsonSchemaFormat(const Value& js, std::string* regex) {
  constexpr const char* kParam = "response_format";
  if (!js.IsObject()) return BadRequest("'response_format.json_schema' must be an object", kParam);
  auto name = js.FindMember("name");
  if (name != js.MemberEnd() && (!name->value.IsString() || name->value.GetStringLength() == 0 ||
                                 name->value.GetStringLength() > 64)) {
    return BadRequest("'response_format.json_schema.name' must be a string of 1 to 64 characters",
                      kParam);
  }
  auto strict = js.FindMember("strict");
  if (strict != js.MemberEnd() && !strict->value.IsBool() && !strict->value.IsNull()) {
    return BadRequest("'response_format.json_schema.strict' must be a boolean", kParam);
  }
  auto schema = js.FindMember("schema");
  if (schema == js.MemberEnd() || !(schema->value.IsObject() || schema->value.IsBool())) {
    return BadRequest("'response_format.json_schema.schema' (a JSON schema object) is required",
                      kParam);
  }
  auto r = constrained::JsonSchemaToRegex(schema->value);
  if (!r.ok()) {
    return BadRequest("'response_format.json_schema.schema': " + r.status().message(), kParam);
  }
  *regex = std::move(*r);
  return std::nullopt;
}

std::optional<ApiError> ReadResponseFormat(const Value& rf, std::optional<std::string>* regex) {
  constexpr const char* kParam = "response_format";
  auto type = rf.IsObject() ? rf.FindMember("type") : rf.MemberEnd();
  if (!rf.IsObject() || type == rf.MemberEnd() || !type->value.IsString()) {
    return BadRequest("'response_format' must be an object with a 'type'", kParam);
  }
  const std::string_view t(type->value.GetString(), type->value.GetStringLength());
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    *regex = constrained::JsonObjectRegex();
    return std::nullopt;
  }
  if (t == "json_schema") {
    auto js = rf.FindMember("json_schema");
    if (js == rf.MemberEnd()) {
      return BadRequest("'response_format.json_schema' is required for type json_schema", kParam);
    }
    std::string r;
    if (auto err = ReadJsonSchemaFormat(js->value, &r)) return err;
    *regex = std::move(r);
    return std::nullopt;
  }
  if (t == "regex") {  // inferd's extension: {"type": "regex", "regex": "..."}
    auto re = rf.FindMember("regex");
    if (re == rf.MemberEnd() || !re->value.IsString()) {
      return BadRequest("'response_format.regex' (a string) is required for type regex", kParam);
    }
    *regex = std::string(re->value.GetString(), re->value.GetStringLength());
    return std::nullopt;
  }
  return BadRequest(fmt::format("'response_format.type' must be text, json_object, json_schema or "
                                "regex (got '{}')",
                                t),
                    kParam);
}

// Constrained output: OpenAI's response_format, or vLLM's guided_regex / guided_json extensions
// (one of them), all become params.guided_regex; its syntax is checked here so a bad pattern is
// a 400 naming the field (automaton size limits are checked when the engine compiles it).
void ReadConstraint(Fields& f, GenerationCall* call) {
  if (f.err) return;
  std::optional<std::string>& regex = call->params.guided_regex;
  std::string param;
  int given = 0;
  if (const Value* rf = f.Get("response_format")) {
    if ((f.err = ReadResponseFormat(*rf, &regex))) return;
    if (regex) {
      ++given;
      param = "response_format";
    }
  }
  if (const Value* g = f.Get("guided_regex")) {
    if (!g->IsString()) return f.Fail("guided_regex", "a string (a regular expression)");
    regex = std::string(g->GetString(), g->GetStringLength());
    ++given;
    param = "guided_regex";
  }
  if (const Value* g = f.Get("guided_json")) {
    rapidjson::Document parsed;
    const Value* schema = g;
    if (g->IsString()) {  // vLLM also takes the schema as JSON text
      parsed.Parse(g->GetString(), g->GetStringLength());
      if (parsed.HasParseError()) {
        f.err = BadRequest("'guided_json' is not a valid JSON schema text", "guided_json");
        return;
      }
      schema = &parsed;
    }
    auto r = constrained::JsonSchemaToRegex(*schema);
    if (!r.ok()) {
      f.err = BadRequest("'guided_json': " + r.status().message(), "guided_json");
      return;
    }
    regex = std::move(*r);
    ++given;
    param = "guided_json";
  }
  if (given > 1) {
    f.err = BadRequest("give at most one of 'response_format' (json_object, json_schema, regex), "
                       "'guided_regex' and 'guided_json'",
                       param);
    return;
  }
  if (regex) {
    if (Status s = constrained::CheckRegexSyntax(*regex); !s.ok()) {
      f.err = BadRequest(fmt::format("'{}': {}", param, s.message()), param);
    }
  }
}

void ReadTriton(Fields& f, GenerationCall* call) {
  const Value* text = f.Get("text_input");
  if (text == nullptr || !text->IsString()) {
    f.err = BadRequest("'text_input' (a string) is required", "text_input");
    return;
  }
  call->prompt.assign(text->GetString(), text->GetStringLength());
}

}  // namespace

ApiError BadRequest(std::string message, std::string param) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError ModelNotFound(const std::string& model) {
  ApiError e;
  e.http_status = 404;
  e.type = "not_found_error";
  e.code = "model_not_found";
  e.param = "model";
  e.message = fmt::format(
      "the model '{}' does not exist (GET /v1/models lists the generative "
      "models)",
      model);
  return e;
}

std::string ApiErrorJson(const ApiError& e) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("message");
  Str(w, e.message);
  w.Key("type");
  Str(w, e.type);
  w.Key("param");
  StrOrNull(w, e.param);
  w.Key("code");
  StrOrNull(w, e.code);
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

std::optional<ApiError> ParseGenerationCall(GenApi api, std::string_view body,
                                            GenerationCall* call) {
  call->api = api;
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError()) {
    return BadRequest(fmt::format("malformed JSON body: {} (at offset {})",
                                  rapidjson::GetParseError_En(doc.GetParseError()),
                                  doc.GetErrorOffset()));
  }
  if (!doc.IsObject()) return BadRequest("the request body must be a JSON object");
  Fields f(doc);
  if (api == GenApi::kTritonGenerate) {
    ReadTriton(f, call);
    ReadSampling(f, call);  // Triton passes them as top-level inputs or in "parameters"
    if (const Value* params = f.Get("parameters"); params != nullptr && !f.err) {
      if (!params->IsObject()) return BadRequest("'parameters' must be an object", "parameters");
      Fields pf(*params);
      ReadSampling(pf, call);
      if (pf.err) return pf.err;
    }
    return f.err;
  }
  const Value* model = f.Get("model");
  if (model == nullptr || !model->IsString())
    return BadRequest("'model' (a string) is required", "model");
  call->model.assign(model->GetString(), model->GetStringLength());
  if (api == GenApi::kCompletions) {
    ReadPrompt(f, call);
  } else {
    ReadMessages(f, call);
  }
  ReadSampling(f, call);
  ReadStreamFields(f, call);
  ReadLogprobs(api, f, call);
  ReadConstraint(f, call);
  return f.err;
}

}  // namespace inferd::server
