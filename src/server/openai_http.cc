#include "server/openai_http.h"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <atomic>
#include <chrono>

#include "server/http_codec.h"
#include "server/metrics.h"

namespace inferd::server {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

HttpReply JsonReply(int status, std::string body) {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}
HttpReply OpenAiError(const ApiError& e) { return JsonReply(e.http_status, ApiErrorJson(e)); }
HttpReply KServeError(const ApiError& e) { return JsonReply(e.http_status, JsonError(e.message)); }

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Unique across the process (the engine rejects duplicate ids).
std::string NewId(GenApi api) {
  static std::atomic<uint64_t> next{1};
  static const uint64_t epoch = static_cast<uint64_t>(UnixSeconds());
  const char* prefix = api == GenApi::kChatCompletions ? "chatcmpl"
                       : api == GenApi::kCompletions   ? "cmpl"
                                                       : "gen";
  return fmt::format("{}-{:x}{:08x}", prefix, epoch, next.fetch_add(1));
}

const GenerativeModel* Find(const GenerativeModels& models, std::string_view name) {
  for (const auto& m : models.ready) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

// The generation of one request: what its events accumulate (non-streamed) or how they are
// framed (streamed). Touched only by the engine's event callbacks, which run one at a time.
struct Call {
  GenApi api;
  ResponseMeta meta;
  std::shared_ptr<TextGenerator> generator;
  bool logprobs = false;
  bool include_usage = false;
  std::shared_ptr<HttpStream> stream;  // null: one JSON reply
  HttpResponder reply;                 // non-streamed only
  CompletionResult result;             // non-streamed only
  bool first_chunk = true;

  std::string TokenText(int32_t t) const { return generator->TokenText(t); }
  void OnEvent(const GenEvent& e);
  void StreamEvent(const GenEvent& e);
  void Complete(const GenEvent& e);
};

ApiError EngineError(const Status& s) {
  ApiError e = BadRequest(s.message());
  e.http_status = HttpStatusFor(s);
  if (e.http_status >= 500) e.type = "server_error";
  return e;
}

void Call::OnEvent(const GenEvent& e) {
  if (stream != nullptr) return StreamEvent(e);
  result.text += e.text;
  result.logprobs.insert(result.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  if (e.finished) Complete(e);
}

void Call::Complete(const GenEvent& e) {
  if (e.finish_reason == "error" || e.finish_reason == "cancelled") {
    ApiError err = EngineError(e.error.ok() ? Internal("generation was cancelled") : e.error);
    if (err.http_status < 500) err.http_status = 500;
    err.type = "server_error";
    HttpResponder responder = std::move(reply);
    return responder(api == GenApi::kTritonGenerate ? KServeError(err) : OpenAiError(err));
  }
  result.finish_reason = e.finish_reason;
  result.logprobs_requested = logprobs;
  result.usage = {e.prompt_tokens, e.completion_tokens, e.cached_prompt_tokens};
  HttpResponder responder = std::move(reply);
  HttpReply r;
  // Encoded on the connection's I/O thread, not on the engine's.
  r.render = [self = std::make_shared<Call>(std::move(*this))](HttpReply* out) {
    if (self->api == GenApi::kTritonGenerate) {
      out->body = EncodeTritonGenerate(self->meta.model, self->result.text);
    } else {
      out->body = EncodeCompletion(self->api, self->meta, self->result,
                                   [&](int32_t t) { return self->TokenText(t); });
    }
  };
  responder(std::move(r));
}

void Call::StreamEvent(const GenEvent& e) {
  auto text = [this](int32_t t) { return TokenText(t); };
  if (e.finished && e.finish_reason == "cancelled") return stream->Finish();
  if (e.finished && e.finish_reason == "error") {
    ApiError err = EngineError(e.error);
    err.type = "server_error";
    stream->Write(
        SseEvent(api == GenApi::kTritonGenerate ? JsonError(err.message) : ApiErrorJson(err)));
    if (api != GenApi::kTritonGenerate) stream->Write(std::string(kSseDone));
    return stream->Finish();
  }
  if (api == GenApi::kTritonGenerate) {
    if (!e.text.empty()) stream->Write(SseEvent(EncodeTritonGenerate(meta.model, e.text)));
    if (e.finished) stream->Finish();
    return;
  }
  if (!e.text.empty() || !e.logprobs.empty() || e.finished) {
    ChunkContent c;
    c.delta = e.text;
    c.logprobs = e.logprobs;
    c.logprobs_requested = logprobs;
    c.first_chunk = first_chunk && api == GenApi::kChatCompletions;
    c.finish_reason = e.finished ? e.finish_reason : "";
    c.include_usage = include_usage;
    first_chunk = false;
    stream->Write(SseEvent(EncodeChunk(api, meta, c, text)));
  }
  if (!e.finished) return;
  if (include_usage) {
    Usage u{e.prompt_tokens, e.completion_tokens, e.cached_prompt_tokens};
    stream->Write(SseEvent(EncodeUsageChunk(api, meta, u)));
  }
  stream->Write(std::string(kSseDone));
  stream->Finish();
}

// The prompt's tokens and the checks that need the model; fills defaults into call->params.
std::optional<ApiError> PreparePrompt(const GenerativeModel& model, GenerationCall* call,
                                      std::vector<int32_t>* tokens) {
  const char* param = call->api == GenApi::kChatCompletions ? "messages"
                      : call->api == GenApi::kCompletions   ? "prompt"
                                                            : "text_input";
  if (call->api == GenApi::kChatCompletions) {
    auto prompt = model.chat_template.Render(call->messages);
    if (!prompt.ok()) return BadRequest(prompt.status().message(), "messages");
    call->prompt = std::move(*prompt);
    for (const auto& s : model.chat_template.stop()) call->params.stop.push_back(s);
  }
  *tokens = call->prompt_tokens.empty() ? model.generator->Encode(call->prompt)
                                        : std::move(call->prompt_tokens);
  const int context = model.generator->max_context();
  const int n = static_cast<int>(tokens->size());
  if (n == 0) return BadRequest("the prompt is empty", param);
  if (n >= context) {
    return BadRequest(fmt::format("the prompt has {} tokens, but this model's context is {} "
                                  "tokens (the prompt must leave room for at least one more)",
                                  n, context),
                      param);
  }
  GenParams& p = call->params;
  if (call->max_tokens_set && p.max_tokens > context) {
    return BadRequest(fmt::format("'max_tokens' is {}, above this model's context of {} tokens",
                                  p.max_tokens, context),
                      "max_tokens");
  }
  if (call->max_tokens_set && n + p.max_tokens > context) {
    return BadRequest(fmt::format("this model's context is {} tokens, but {} were requested ({} "
                                  "in the prompt, {} for the completion)",
                                  context, n + p.max_tokens, n, p.max_tokens),
                      "max_tokens");
  }
  // Defaults: OpenAI's 16 for completions and Triton; the rest of the context for chat.
  if (!call->max_tokens_set) {
    p.max_tokens = call->api == GenApi::kChatCompletions ? context - n : std::min(16, context - n);
  }
  return std::nullopt;
}

void Generate(const GenerativeModel& model, GenerationCall call, HttpResponder& reply) {
  auto fail = [&](const ApiError& e) {
    reply(call.api == GenApi::kTritonGenerate ? KServeError(e) : OpenAiError(e));
  };
  std::vector<int32_t> tokens;
  if (auto err = PreparePrompt(model, &call, &tokens)) return fail(*err);
  auto state = std::make_shared<Call>();
  state->api = call.api;
  state->meta = {NewId(call.api), model.name, UnixSeconds()};
  state->generator = model.generator;
  state->logprobs = call.params.logprobs >= 0;
  state->include_usage = call.include_usage;
  if (call.stream) {
    state->stream = std::make_shared<HttpStream>();
  } else {
    state->reply = reply;
  }
  const std::string id = state->meta.id;
  auto stream = state->stream;
  Status s = model.generator->Submit(id, std::move(tokens), call.params,
                                     [state](const GenEvent& e) { state->OnEvent(e); });
  if (!s.ok()) return fail(EngineError(s));
  if (stream == nullptr) return;
  std::weak_ptr<TextGenerator> generator = model.generator;
  stream->SetOnCancel([generator, id] {
    if (auto g = generator.lock()) g->Cancel(id);
  });
  HttpReply r;
  r.content_type = "text/event-stream";
  r.stream = std::move(stream);
  reply(std::move(r));
}

std::string ModelObject(const std::string& name, int64_t created) {
  std::string list = EncodeModelList({name}, created);
  // {"object":"list","data":[<object>]} → <object>
  const size_t begin = list.find('[') + 1;
  return list.substr(begin, list.rfind(']') - begin);
}

ApiError ModelUnavailable(const std::string& model, const std::string& reason) {
  ApiError e = BadRequest(fmt::format("model '{}' is unavailable: {}", model, reason), "model");
  e.http_status = 503;
  e.type = "server_error";
  e.code = "model_unavailable";
  return e;
}

ApiError NotGenerative(const std::string& model) {
  ApiError e = BadRequest(fmt::format("model '{}' is not a generative model: use its KServe "
                                      "route POST /v2/models/{}/infer",
                                      model, model),
                          "model");
  e.code = "model_not_generative";
  return e;
}

void RouteV1(const GenerativeModels& models, serving::ModelManager* manager, HttpRequest& req,
             HttpResponder& reply) {
  const std::string& path = req.path;
  if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) {
    if (req.method != "GET") return reply(OpenAiError(BadRequest("use GET " + path)));
    if (path == "/v1/models" || path == "/v1/models/") {
      std::vector<std::string> names;
      for (const auto& m : models.ready) names.push_back(m.name);
      return reply(JsonReply(200, EncodeModelList(names, UnixSeconds())));
    }
    std::string name = path.substr(std::string_view("/v1/models/").size());
    if (Find(models, name) == nullptr) return reply(OpenAiError(ModelNotFound(name)));
    return reply(JsonReply(200, ModelObject(name, UnixSeconds())));
  }
  GenApi api;
  if (path == "/v1/completions") {
    api = GenApi::kCompletions;
  } else if (path == "/v1/chat/completions") {
    api = GenApi::kChatCompletions;
  } else {
    ApiError e = BadRequest("unknown path '" + path.substr(0, 256) + "'");
    e.http_status = 404;
    e.type = "not_found_error";
    return reply(OpenAiError(e));
  }
  if (req.method != "POST") {
    ApiError e = BadRequest("method " + req.method + " not allowed on " + path + ": use POST");
    e.http_status = 405;
    return reply(OpenAiError(e));
  }
  GenerationCall call;
  if (auto err = ParseGenerationCall(api, *req.body, &call)) return reply(OpenAiError(*err));
  const GenerativeModel* model = Find(models, call.model);
  if (auto it = models.unavailable.find(call.model); it != models.unavailable.end()) {
    return reply(OpenAiError(ModelUnavailable(call.model, it->second)));
  }
  if (model == nullptr) {
    if (manager != nullptr && manager->GetMetadata(call.model).ok()) {
      return reply(OpenAiError(NotGenerative(call.model)));
    }
    return reply(OpenAiError(ModelNotFound(call.model)));
  }
  Generate(*model, std::move(call), reply);
}

std::string KServeMetadata(const std::string& name) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("name");
  w.String(name.data(), static_cast<rapidjson::SizeType>(name.size()));
  w.Key("versions");
  w.StartArray();
  w.String("1");
  w.EndArray();
  w.Key("platform");
  w.String("inferd_generate");
  for (const char* key : {"inputs", "outputs"}) {
    w.Key(key);
    w.StartArray();
    w.StartObject();
    w.Key("name");
    w.String(key[0] == 'i' ? "text_input" : "text_output");
    w.Key("datatype");
    w.String("BYTES");
    w.Key("shape");
    w.StartArray();
    w.Int(1);
    w.EndArray();
    w.EndObject();
    w.EndArray();
  }
  w.EndObject();
  return sb.GetString();
}

std::string IndexJson(const GenerativeModels& models, serving::ModelManager* manager) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  auto str = [&](std::string_view s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartArray();
  if (manager != nullptr) {
    for (const auto& e : manager->Index()) {
      w.StartObject();
      w.Key("name");
      str(e.name);
      if (e.version >= 0) {
        w.Key("version");
        str(std::to_string(e.version));
      }
      w.Key("state");
      str(e.state);
      if (!e.reason.empty()) {
        w.Key("reason");
        str(e.reason);
      }
      w.EndObject();
    }
  }
  for (const auto& m : models.ready) {
    w.StartObject();
    w.Key("name");
    str(m.name);
    w.Key("version");
    w.String("1");
    w.Key("state");
    w.String("READY");
    w.EndObject();
  }
  for (const auto& [name, reason] : models.unavailable) {
    w.StartObject();
    w.Key("name");
    str(name);
    w.Key("state");
    w.String("UNAVAILABLE");
    w.Key("reason");
    str(reason);
    w.EndObject();
  }
  w.EndArray();
  return sb.GetString();
}

// /v2 paths that concern generative models; false when `fallback` should answer.
bool RouteV2(const GenerativeModels& models, serving::ModelManager* manager, HttpRequest& req,
             HttpResponder& reply) {
  if (req.path == "/v2/repository/index") {
    if (req.method != "POST") return false;
    reply(JsonReply(200, IndexJson(models, manager)));
    return true;
  }
  constexpr std::string_view kPrefix = "/v2/models/";
  if (req.path.rfind(kPrefix, 0) != 0) return false;
  std::string_view rest = std::string_view(req.path).substr(kPrefix.size());
  const size_t slash = rest.find('/');
  const std::string name(rest.substr(0, slash));
  std::string_view action = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  const GenerativeModel* model = Find(models, name);
  if (auto it = models.unavailable.find(name); it != models.unavailable.end()) {
    if (action.ends_with("ready")) return reply(HttpReply{503, "", "", {}, nullptr, nullptr}), true;
    return reply(KServeError(ModelUnavailable(name, it->second))), true;
  }
  if (model == nullptr) return false;
  const bool post = req.method == "POST";
  if (action == "generate" || action == "generate_stream") {
    if (!post) return reply(JsonReply(405, JsonError("use POST " + req.path))), true;
    GenerationCall call;
    if (auto err = ParseGenerationCall(GenApi::kTritonGenerate, *req.body, &call)) {
      return reply(KServeError(*err)), true;
    }
    call.stream = action == "generate_stream";
    Generate(*model, std::move(call), reply);
  } else if (action == "" || action == "ready" || action == "versions/1" ||
             action == "versions/1/ready") {
    if (req.method != "GET") return reply(JsonReply(405, JsonError("use GET " + req.path))), true;
    if (action.ends_with("ready")) {
      reply(HttpReply{200, "", "", {}, nullptr, nullptr});
    } else {
      reply(JsonReply(200, KServeMetadata(name)));
    }
  } else if (action == "infer" || action == "versions/1/infer") {
    reply(JsonReply(400, JsonError(fmt::format("model '{}' is a generative model: use POST "
                                               "/v2/models/{}/generate or /v1/completions",
                                               name, name))));
  } else {
    return false;
  }
  return true;
}

}  // namespace

HttpHandler MakeGenerationHttpHandler(std::shared_ptr<const GenerativeModels> models,
                                      serving::ModelManager* manager, HttpHandler fallback) {
  return [models, manager, fallback = std::move(fallback)](HttpRequest req, HttpResponder reply) {
    if (req.path == "/v1" || req.path.rfind("/v1/", 0) == 0) {
      return RouteV1(*models, manager, req, reply);
    }
    if (RouteV2(*models, manager, req, reply)) return;
    if (fallback) return fallback(std::move(req), std::move(reply));
    reply(JsonReply(404, JsonError("unknown path '" + req.path.substr(0, 256) + "'")));
  };
}

HttpHandler MakeGenerationMetricsHttpHandler(std::shared_ptr<const GenerativeModels> models,
                                             serving::ModelManager* manager) {
  return [models, manager](HttpRequest req, HttpResponder reply) {
    if (req.path != "/metrics")
      return reply(JsonReply(404, JsonError("unknown path; try /metrics")));
    if (req.method != "GET") return reply(JsonReply(405, JsonError("use GET /metrics")));
    auto process = ReadProcessStats();
    std::vector<GenerationMetrics> gen;
    for (const auto& m : models->ready) {
      gen.push_back(m.generator->Metrics());
      gen.back().model = m.name;
    }
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = RenderPrometheusMetrics(manager != nullptr
                                         ? manager->GetStatistics()
                                         : std::vector<serving::ModelStatisticsSnapshot>{},
                                     process.ok() ? &*process : nullptr);
    r.body += RenderGenerationMetrics(gen);
    reply(std::move(r));
  };
}

}  // namespace inferd::server
