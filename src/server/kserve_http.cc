#include "server/kserve_http.h"

#include <filesystem>
#include <memory>
#include <string_view>
#include <system_error>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "server/http_codec.h"
#include "server/http_protocol.h"
#include "server/json_text.h"
#include "server/metrics.h"
#include "server/repository_codec.h"
#include "server/shared_memory_http.h"

namespace inferd::server {
namespace {

using serving::ModelManager;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

HttpReply Json(int status, std::string body) { return HttpReply{status, "application/json", std::move(body), {}}; }
HttpReply Error(const Status& s) { return Json(HttpStatusFor(s), JsonError(s.message())); }
HttpReply Empty(int status) { return HttpReply{status, "", "", {}}; }

// Every string goes out as valid UTF-8 (names and reasons may hold any bytes).
void ValidStr(Writer& w, std::string_view s) {
  const std::string valid = ToValidUtf8(s);
  w.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
}

// The path's segments, each percent-decoded ("m%C3%B6del" is the model "mödel"); splitting
// first keeps "%2F" inside a segment.
StatusOr<std::vector<std::string>> SplitPath(std::string_view path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) {
      ASSIGN_OR_RETURN(std::string part, PercentDecode(path.substr(i, j - i)));
      parts.push_back(std::move(part));
    }
    i = j + 1;
  }
  return parts;
}

std::string MetadataJson(const serving::ModelMetadata& m) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("name");
  ValidStr(w, m.name);
  w.Key("versions");
  w.StartArray();
  for (const auto& v : m.versions) ValidStr(w, v);
  w.EndArray();
  w.Key("platform");
  ValidStr(w, m.platform);
  for (const char* key : {"inputs", "outputs"}) {
    w.Key(key);
    w.StartArray();
    for (const auto& t : (key[0] == 'i' ? m.inputs : m.outputs)) {
      w.StartObject();
      w.Key("name");
      ValidStr(w, t.name);
      w.Key("datatype");
      ValidStr(w, t.datatype);
      w.Key("shape");
      w.StartArray();
      for (int64_t d : t.shape) w.Int64(d);
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return sb.GetString();
}

void Duration(Writer& w, const char* key, const serving::DurationStat& d) {
  w.Key(key);
  w.StartObject();
  w.Key("count");
  w.Uint64(d.count);
  w.Key("ns");
  w.Uint64(d.ns);
  w.EndObject();
}

std::string StatsJson(const std::vector<serving::ModelStatisticsSnapshot>& stats) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("model_stats");
  w.StartArray();
  for (const auto& s : stats) {
    w.StartObject();
    w.Key("name");
    ValidStr(w, s.name);
    w.Key("version");
    ValidStr(w, std::to_string(s.version));
    w.Key("last_inference");
    w.Uint64(s.last_inference_ms);
    w.Key("inference_count");
    w.Uint64(s.inference_count);
    w.Key("execution_count");
    w.Uint64(s.execution_count);
    w.Key("inference_stats");
    w.StartObject();
    Duration(w, "success", s.success);
    Duration(w, "fail", s.fail);
    Duration(w, "queue", s.queue);
    Duration(w, "compute_input", s.compute_input);
    Duration(w, "compute_infer", s.compute_infer);
    Duration(w, "compute_output", s.compute_output);
    Duration(w, "cache_hit", {});  // Triton's schema; inferd has no response cache
    Duration(w, "cache_miss", {});
    w.EndObject();
    w.Key("response_stats");  // decoupled models only (not supported)
    w.StartObject();
    w.EndObject();
    w.Key("batch_stats");
    w.StartArray();
    for (const auto& b : s.batch_stats) {
      w.StartObject();
      w.Key("batch_size");
      w.Int64(b.batch_size);
      Duration(w, "compute_input", b.compute_input);
      Duration(w, "compute_infer", b.compute_infer);
      Duration(w, "compute_output", b.compute_output);
      w.EndObject();
    }
    w.EndArray();
    w.Key("memory_usage");
    w.StartArray();
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

std::string IndexJson(const std::vector<serving::ModelIndexEntry>& index) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartArray();
  for (const auto& e : index) {
    w.StartObject();
    w.Key("name");
    ValidStr(w, e.name);
    if (e.version >= 0) {
      w.Key("version");
      ValidStr(w, std::to_string(e.version));
    }
    w.Key("state");
    ValidStr(w, e.state);
    if (!e.reason.empty()) {
      w.Key("reason");
      ValidStr(w, e.reason);
    }
    w.EndObject();
  }
  w.EndArray();
  return sb.GetString();
}

std::string ServerMetadataJson(const ServerExtensions& ext) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("name");
  ValidStr(w, ext.id());
  w.Key("version");
  w.String(kServerVersion);
  w.Key("extensions");
  w.StartArray();
  for (const char* e : ServerExtensions::Names()) w.String(e);
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

std::string LogJson(const LogSettings& settings) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  for (const auto& [name, value] : settings) {
    ValidStr(w, name);
    if (const bool* b = std::get_if<bool>(&value)) w.Bool(*b);
    else if (const uint32_t* u = std::get_if<uint32_t>(&value)) w.Uint(*u);
    else ValidStr(w, std::get<std::string>(value));
  }
  w.EndObject();
  return sb.GetString();
}

// Triton's form: trace_level is a list, every other setting a string.
std::string TraceJson(const TraceSettings& settings) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  for (const auto& [name, values] : settings) {
    ValidStr(w, name);
    if (name == "trace_level") {
      w.StartArray();
      for (const auto& v : values) ValidStr(w, v);
      w.EndArray();
    } else {
      ValidStr(w, values.empty() ? "" : values[0]);
    }
  }
  w.EndObject();
  return sb.GetString();
}

Status ParseObject(const HttpRequest& req, rapidjson::Document* doc) {
  const std::string_view body = req.body ? std::string_view(*req.body) : "";
  doc->Parse<rapidjson::kParseValidateEncodingFlag>(body.data(), body.size());
  if (doc->HasParseError() || !doc->IsObject()) {
    return InvalidArgument("the request body must be a JSON object");
  }
  return Status::Ok();
}

void Logging(ServerExtensions& ext, HttpRequest& req, HttpResponder& reply) {
  if (req.method == "POST") {
    rapidjson::Document doc;
    if (Status s = ParseObject(req, &doc); !s.ok()) return reply(Error(s));
    LogSettings update;
    for (const auto& m : doc.GetObject()) {
      std::string name(m.name.GetString(), m.name.GetStringLength());
      if (m.value.IsBool()) update[name] = m.value.GetBool();
      else if (m.value.IsUint()) update[name] = static_cast<uint32_t>(m.value.GetUint());
      else if (m.value.IsString()) update[name] = std::string(m.value.GetString());
      else return reply(Error(InvalidArgument("log setting '{}' has the wrong type", name)));
    }
    if (Status s = ext.UpdateLog(update); !s.ok()) return reply(Error(s));
  }
  reply(Json(200, LogJson(ext.GetLog())));
}

void Trace(ServerExtensions& ext, const std::string& model, HttpRequest& req,
           HttpResponder& reply) {
  if (req.method == "POST") {
    rapidjson::Document doc;
    if (Status s = ParseObject(req, &doc); !s.ok()) return reply(Error(s));
    TraceSettings update;
    for (const auto& m : doc.GetObject()) {
      std::string name(m.name.GetString(), m.name.GetStringLength());
      auto& values = update[name];  // null: cleared (back to the global setting)
      if (m.value.IsString()) {
        values.push_back(m.value.GetString());
      } else if (m.value.IsArray()) {
        for (const auto& v : m.value.GetArray()) {
          if (!v.IsString()) {
            return reply(Error(InvalidArgument("trace setting '{}' must be strings", name)));
          }
          values.push_back(v.GetString());
        }
      } else if (!m.value.IsNull()) {
        return reply(Error(InvalidArgument("trace setting '{}' must be a string, a list of "
                                           "strings or null",
                                           name)));
      }
    }
    if (Status s = ext.UpdateTrace(model, update); !s.ok()) return reply(Error(s));
  }
  reply(Json(200, TraceJson(ext.GetTrace(model))));
}

void Infer(ModelManager* manager, ServerExtensions& ext, HttpRequest& req, std::string model,
           int64_t version, HttpResponder& reply) {
  if (auto trace = ext.StartTrace(model)) {
    HttpResponder traced = [inner = std::move(reply), trace = *trace, &ext, version](HttpReply r) {
      ext.FinishTrace(trace, version);
      inner(std::move(r));
    };
    reply = std::move(traced);
  }
  std::optional<size_t> header_length;
  if (const std::string* h = req.Header("inference-header-content-length")) {
    auto parsed = ParseModelVersion(*h);  // same grammar: a positive decimal integer
    if (!parsed.ok()) {
      return reply(Json(400, JsonError("invalid Inference-Header-Content-Length '" +
                                       h->substr(0, 32) + "'")));
    }
    header_length = static_cast<size_t>(*parsed);
  }
  auto decoded = DecodeHttpInferRequest(std::move(model), version, req.body, header_length);
  if (!decoded.ok()) return reply(Error(decoded.status()));
  // The callback runs on the model's worker thread; the response is encoded later, on the
  // connection's I/O thread (HttpReply::render), so a worker that finishes a batch of 64 requests
  // hands out 64 replies instead of encoding them one after another.
  auto options = std::make_shared<const HttpOutputOptions>(std::move(decoded->output_options));
  auto shm = std::make_shared<SharedMemoryOutputs>();
  if (!options->shared_memory.empty()) {
    auto resolved = ResolveSharedMemoryOutputs(SharedMemoryRegistry::Default(),
                                               options->shared_memory);
    if (!resolved.ok()) return reply(Error(resolved.status()));
    *shm = std::move(*resolved);
  }
  manager->Infer(std::move(decoded->request), [reply = std::move(reply), options, shm](
                                                  Status status,
                                                  serving::InferenceResponse response) {
    if (!status.ok()) return reply(Error(status));
    HttpReply r;
    r.render = [options, shm, response = std::make_shared<serving::InferenceResponse>(
                                  std::move(response))](HttpReply* out) {
      if (Status s = WriteSharedMemoryOutputs(*shm, response->outputs); !s.ok()) {
        *out = Error(s);
        return;
      }
      auto encoded = EncodeHttpInferResponse(*response, *options);
      if (!encoded.ok()) {
        *out = Error(encoded.status());
        return;
      }
      if (encoded->has_binary()) {
        out->content_type = "application/octet-stream";
        out->headers.emplace_back("Inference-Header-Content-Length",
                                  std::to_string(encoded->json_length));
      }
      out->body = std::move(encoded->body);
      out->compressible = true;
    };
    reply(std::move(r));
  });
}

void Route(ModelManager* manager, ServerExtensions& ext, HttpRequest& req, HttpResponder& reply) {
  auto split = SplitPath(req.path);
  if (!split.ok()) return reply(Error(split.status()));
  const std::vector<std::string>& parts = *split;
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  auto method_not_allowed = [&] {
    reply(Json(405, JsonError("method " + req.method + " not allowed on " + req.path)));
  };
  if (parts.empty() || parts[0] != "v2") {
    return reply(Json(404, JsonError("unknown path '" + req.path.substr(0, 256) + "'")));
  }
  if (parts.size() == 1) {
    if (!get) return method_not_allowed();
    return reply(Json(200, ServerMetadataJson(ext)));
  }
  if ((parts.size() == 2 && parts[1] == "logging") ||
      (parts.size() == 3 && parts[1] == "trace" && parts[2] == "setting")) {
    if (!get && !post) return method_not_allowed();
    if (parts[1] == "logging") return Logging(ext, req, reply);
    return Trace(ext, "", req, reply);
  }
  if (HandleSharedMemoryHttp(SharedMemoryRegistry::Default(), req, reply)) return;
  if (parts[1] == "health" && parts.size() == 3 && (parts[2] == "live" || parts[2] == "ready")) {
    if (!get) return method_not_allowed();
    bool ok = parts[2] == "live" ? manager->IsLive() : manager->IsReady();
    return reply(Empty(ok ? 200 : 503));
  }
  if (parts[1] == "repository" && parts.size() == 3 && parts[2] == "index") {
    if (!post) return method_not_allowed();
    return reply(Json(200, IndexJson(manager->Index())));
  }
  // Repository API: the load/unload runs on the manager's lifecycle thread, which replies.
  if (parts[1] == "repository" && parts.size() == 5 && parts[2] == "models" &&
      (parts[4] == "load" || parts[4] == "unload")) {
    if (!post) return method_not_allowed();
    auto done = [reply](Status s) { reply(s.ok() ? Json(200, "{}") : Error(s)); };
    if (parts[4] == "load") {
      auto params = DecodeHttpLoadRequest(req.body ? std::string_view(*req.body) : "");
      if (!params.ok()) return reply(Error(params.status()));
      return manager->RequestLoad(std::string(parts[3]), std::move(params).value(),
                                  std::move(done));
    }
    return manager->RequestUnload(std::string(parts[3]), std::move(done));
  }
  if (parts[1] == "models") {
    // /v2/models/stats
    if (parts.size() == 3 && parts[2] == "stats") {
      if (!get) return method_not_allowed();
      return reply(Json(200, StatsJson(manager->GetStatistics())));
    }
    if (parts.size() >= 3) {
      std::string model(parts[2]);
      int64_t version = -1;
      size_t next = 3;
      if (parts.size() >= 5 && parts[3] == "versions") {
        auto v = ParseModelVersion(parts[4]);
        if (!v.ok()) return reply(Error(v.status()));
        version = *v;
        next = 5;
      }
      if (parts.size() == next) {
        if (!get) return method_not_allowed();
        auto md = manager->GetMetadata(model, version);
        if (!md.ok()) return reply(Error(md.status()));
        return reply(Json(200, MetadataJson(*md)));
      }
      if (parts.size() == next + 1) {
        std::string_view action = parts[next];
        if (action == "infer") {
          if (!post) return method_not_allowed();
          return Infer(manager, ext, req, std::move(model), version, reply);
        }
        if (action == "ready") {
          if (!get) return method_not_allowed();
          if (manager->IsModelReady(model, version)) return reply(Empty(200));
          auto md = manager->GetMetadata(model, version);
          if (!md.ok() && md.status().code() == StatusCode::kNotFound) {
            return reply(Error(md.status()));
          }
          return reply(Empty(503));
        }
        if (action == "config") {
          if (!get) return method_not_allowed();
          auto config = manager->GetConfigJson(model, version);
          if (!config.ok()) return reply(Error(config.status()));
          return reply(Json(200, std::move(*config)));
        }
        if (action == "stats") {
          if (!get) return method_not_allowed();
          auto stats = manager->GetStatistics(model, version);
          if (stats.empty()) {
            return reply(Error(NotFound("Request for unknown model: '{}'{} is not found", model,
                                        version > 0 ? fmt::format(" version {}", version) : "")));
          }
          return reply(Json(200, StatsJson(stats)));
        }
      }
      if (parts.size() == next + 2 && parts[next] == "trace" && parts[next + 1] == "setting") {
        if (!get && !post) return method_not_allowed();
        return Trace(ext, model, req, reply);
      }
    }
  }
  reply(Json(404, JsonError("unknown path '" + req.path.substr(0, 256) + "'")));
}

}  // namespace

HttpHandler MakeKServeHttpHandler(ModelManager* manager, ServerExtensions* extensions) {
  static ServerExtensions defaults;
  ServerExtensions* ext = extensions != nullptr ? extensions : &defaults;
  return [manager, ext](HttpRequest req, HttpResponder reply) { Route(manager, *ext, req, reply); };
}

HttpHandler MakeRepositoryRedactingHandler(HttpHandler inner, const std::string& repository) {
  // Every spelling of the repository's location that a message may carry.
  auto roots = std::make_shared<std::vector<std::string>>();
  std::error_code ec;
  roots->push_back(repository);
  roots->push_back(std::filesystem::absolute(repository, ec).lexically_normal().string());
  roots->push_back(std::filesystem::weakly_canonical(repository, ec).string());
  return [inner = std::move(inner), roots](HttpRequest req, HttpResponder reply) {
    // Replies rendered later are inference results (no paths); the rest are small JSON texts.
    HttpResponder redacting = [reply = std::move(reply), roots](HttpReply r) {
      if (!r.render && r.stream == nullptr) r.body = RedactRepositoryPath(r.body, *roots);
      reply(std::move(r));
    };
    inner(std::move(req), std::move(redacting));
  };
}

HttpHandler MakeMetricsHttpHandler(ModelManager* manager) {
  return [manager](HttpRequest req, HttpResponder reply) {
    if (req.path != "/metrics") return reply(Json(404, JsonError("unknown path; try /metrics")));
    if (req.method != "GET") return reply(Json(405, JsonError("use GET /metrics")));
    auto process = ReadProcessStats();
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = RenderPrometheusMetrics(manager->GetStatistics(), process.ok() ? &*process : nullptr);
    reply(std::move(r));
  };
}

}  // namespace inferd::server
