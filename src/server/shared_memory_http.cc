#include "server/shared_memory_http.h"

#include <string>
#include <vector>

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "server/http_codec.h"

namespace inferd::server {
namespace {

HttpReply JsonHttpReply(int status, std::string body) {
  return HttpReply{status, "application/json", std::move(body), {}};
}
HttpReply ErrorReply(const Status& s) {
  return JsonHttpReply(HttpStatusFor(s), JsonError(s.message()));
}

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

std::string StatusJson(const std::vector<SharedMemoryRegionStatus>& regions) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartArray();
  for (const auto& r : regions) {
    w.StartObject();
    w.Key("name");
    w.String(r.name.c_str(), static_cast<rapidjson::SizeType>(r.name.size()));
    w.Key("key");
    w.String(r.key.c_str(), static_cast<rapidjson::SizeType>(r.key.size()));
    w.Key("offset");
    w.Uint64(r.offset);
    w.Key("byte_size");
    w.Uint64(r.byte_size);
    w.EndObject();
  }
  w.EndArray();
  return sb.GetString();
}

StatusOr<uint64_t> UintMember(const rapidjson::Value& obj, const char* name, bool required,
                              std::string_view where) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) {
    if (required) return InvalidArgument("{}: missing '{}'", where, name);
    return uint64_t{0};
  }
  if (!it->value.IsUint64()) {
    return InvalidArgument("{}: '{}' must be a non-negative integer", where, name);
  }
  return it->value.GetUint64();
}

Status Register(SharedMemoryRegistry& registry, const std::string& name, const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError()) {
    return InvalidArgument("register '{}': malformed JSON at offset {}: {}", name,
                           doc.GetErrorOffset(), rapidjson::GetParseError_En(doc.GetParseError()));
  }
  const std::string where = "register '" + name + "'";
  if (!doc.IsObject()) return InvalidArgument("{}: body must be a JSON object", where);
  auto key = doc.FindMember("key");
  if (key == doc.MemberEnd() || !key->value.IsString()) {
    return InvalidArgument("{}: 'key' must be a string", where);
  }
  ASSIGN_OR_RETURN(uint64_t offset, UintMember(doc, "offset", false, where));
  ASSIGN_OR_RETURN(uint64_t byte_size, UintMember(doc, "byte_size", true, where));
  return registry.Register(name, key->value.GetString(), offset, byte_size);
}

// parts: {"v2", "systemsharedmemory" | "cudasharedmemory", ["region", R,] action}
void Route(SharedMemoryRegistry& registry, const HttpRequest& req,
           const std::vector<std::string_view>& parts, const HttpResponder& reply) {
  const bool cuda = parts[1] == "cudasharedmemory";
  std::string region;
  std::string_view action;
  if (parts.size() == 3) {
    action = parts[2];
  } else if (parts.size() == 5 && parts[2] == "region") {
    region = std::string(parts[3]);
    action = parts[4];
  }
  const char* method = action == "status" ? "GET" : "POST";
  if (action != "status" && action != "unregister" && !(action == "register" && !region.empty())) {
    return reply(JsonHttpReply(404, JsonError("unknown path '" + req.path.substr(0, 256) + "'")));
  }
  if (req.method != method) {
    return reply(
        JsonHttpReply(405, JsonError("method " + req.method + " not allowed on " + req.path)));
  }
  if (action == "status") {
    if (cuda) {
      if (!region.empty()) {
        return reply(ErrorReply(
            InvalidArgument("Unable to find cuda shared memory region: '{}'", region)));
      }
      return reply(JsonHttpReply(200, "[]"));
    }
    auto status = registry.GetStatus(region);
    if (!status.ok()) return reply(ErrorReply(status.status()));
    return reply(JsonHttpReply(200, StatusJson(*status)));
  }
  if (action == "register") {
    if (cuda) return reply(ErrorReply(Unimplemented("{}", kCudaSharedMemoryUnsupported)));
    Status s = Register(registry, region, *req.body);
    return reply(s.ok() ? HttpReply{200, "", "", {}} : ErrorReply(s));
  }
  if (!cuda) {
    if (region.empty()) {
      registry.UnregisterAll();
    } else {
      registry.Unregister(region);
    }
  }
  reply(HttpReply{200, "", "", {}});
}

}  // namespace

bool HandleSharedMemoryHttp(SharedMemoryRegistry& registry, const HttpRequest& req,
                            const HttpResponder& reply) {
  const auto parts = Split(req.path);
  if (parts.size() < 2 || parts[0] != "v2" ||
      (parts[1] != "systemsharedmemory" && parts[1] != "cudasharedmemory")) {
    return false;
  }
  Route(registry, req, parts, reply);
  return true;
}

StatusOr<std::optional<SharedMemoryParams>> ParseJsonSharedMemoryParams(
    const rapidjson::Value& params, std::string_view where) {
  auto region = params.FindMember("shared_memory_region");
  if (region == params.MemberEnd()) return std::optional<SharedMemoryParams>();
  if (!region->value.IsString()) {
    return InvalidArgument("{}: 'shared_memory_region' must be a string", where);
  }
  SharedMemoryParams p;
  p.region = region->value.GetString();
  const std::string w = std::string(where);
  ASSIGN_OR_RETURN(p.offset, UintMember(params, "shared_memory_offset", false, w));
  ASSIGN_OR_RETURN(p.byte_size, UintMember(params, "shared_memory_byte_size", true, w));
  return std::optional<SharedMemoryParams>(std::move(p));
}

}  // namespace inferd::server
