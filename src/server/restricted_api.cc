#include "server/restricted_api.h"

#include <algorithm>
#include <cctype>

#include "server/http_codec.h"

namespace inferd::server {
namespace {

constexpr std::string_view kNames[kApiCategoryCount] = {
    "health",           "metadata",   "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace",     "logging"};

// Triton's gRPC metadata prefix for restricted-protocol keys.
constexpr std::string_view kGrpcKeyPrefix = "triton-grpc-protocol-";

std::string LowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX -> byte; a malformed escape stays as it is (the router then 404s it anyway).
std::string DecodeEscapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = HexDigitValue(s[i + 1]), lo = HexDigitValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::vector<std::string> Segments(std::string_view path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.push_back(DecodeEscapes(path.substr(i, j - i)));
    i = j + 1;
  }
  return parts;
}

// /v2/models/... (parts[0] == "v2", parts[1] == "models"), following kserve_http.cc's router.
ApiCategory ClassifyModelsPath(const std::vector<std::string>& parts) {
  using C = ApiCategory;
  if (parts.size() == 3 && parts[2] == "stats") return C::kStatistics;
  if (parts.size() < 3) return C::kNone;
  size_t next = 3;
  if (parts.size() >= 5 && parts[3] == "versions") next = 5;
  if (parts.size() == next) return C::kMetadata;
  if (parts.size() == next + 1) {
    const std::string& action = parts[next];
    if (action == "ready") return C::kHealth;
    if (action == "infer" || action == "generate" || action == "generate_stream") {
      return C::kInference;
    }
    if (action == "config") return C::kModelConfig;
    if (action == "stats") return C::kStatistics;
  }
  if (parts.size() == next + 2 && parts[next] == "trace" && parts[next + 1] == "setting") {
    return C::kTrace;
  }
  return C::kNone;
}

ApiCategory ClassifySegments(const std::vector<std::string>& parts) {
  using C = ApiCategory;
  if (parts.empty()) return C::kNone;
  if (parts[0] == "v1")
    return parts.size() >= 2 && parts[1] == "models" ? C::kMetadata : C::kInference;
  if (parts[0] != "v2") return C::kNone;
  if (parts.size() == 1) return C::kMetadata;
  const std::string& area = parts[1];
  if (area == "health") return C::kHealth;
  if (area == "logging") return C::kLogging;
  if (area == "trace") return C::kTrace;
  if (area == "systemsharedmemory" || area == "cudasharedmemory") return C::kSharedMemory;
  if (area == "repository") return C::kModelRepository;
  if (area == "models") return ClassifyModelsPath(parts);
  return C::kNone;
}

// "a,b:key=value" -> ({a, b}, key, value), split like Triton (first ':', then first '=').
Status SplitGroup(std::string_view flag, std::string_view option,
                  std::vector<std::string_view>* names, std::string_view* key,
                  std::string_view* value) {
  const size_t colon = flag.find(':');
  const size_t eq = colon == std::string_view::npos ? colon : flag.find('=', colon + 1);
  if (colon == std::string_view::npos || eq == std::string_view::npos || colon == 0 ||
      eq == colon + 1 || eq + 1 == flag.size()) {
    return InvalidArgument("--{} option format is '<categories>:<key>=<value>'. Got {}", option,
                           flag);
  }
  *key = flag.substr(colon + 1, eq - colon - 1);
  *value = flag.substr(eq + 1);
  std::string_view list = flag.substr(0, colon);
  size_t i = 0;
  while (i <= list.size()) {
    size_t j = std::min(list.find(',', i), list.size());
    names->push_back(list.substr(i, j - i));
    i = j + 1;
  }
  return Status::Ok();
}

}  // namespace

std::string_view ApiCategoryName(ApiCategory category) {
  const int i = static_cast<int>(category);
  return i >= 0 && i < kApiCategoryCount ? kNames[i] : std::string_view();
}

std::optional<ApiCategory> ParseApiCategory(std::string_view name) {
  for (int i = 0; i < kApiCategoryCount; ++i) {
    if (kNames[i] == name) return static_cast<ApiCategory>(i);
  }
  return std::nullopt;
}

ApiCategory ClassifyHttpPath(std::string_view path) { return ClassifySegments(Segments(path)); }

ApiCategory ClassifyGrpcMethod(std::string_view method) {
  using C = ApiCategory;
  if (size_t slash = method.rfind('/'); slash != std::string_view::npos) {
    method = method.substr(slash + 1);
  }
  if (method == "ServerLive" || method == "ServerReady" || method == "ModelReady") {
    return C::kHealth;
  }
  if (method == "ServerMetadata" || method == "ModelMetadata") return C::kMetadata;
  if (method == "ModelInfer" || method == "ModelStreamInfer") return C::kInference;
  if (method == "ModelConfig") return C::kModelConfig;
  if (method == "ModelStatistics") return C::kStatistics;
  if (method.substr(0, 10) == "Repository") return C::kModelRepository;
  if (method.find("SharedMemory") != std::string_view::npos) return C::kSharedMemory;
  if (method == "TraceSetting") return C::kTrace;
  if (method == "LogSettings") return C::kLogging;
  return C::kNone;
}

StatusOr<RestrictedApi> RestrictedApi::Parse(Protocol protocol,
                                             const std::vector<std::string>& flags) {
  const bool grpc = protocol == Protocol::kGrpc;
  const std::string_view kind = grpc ? "protocol" : "api";
  const std::string_view option = grpc ? "grpc-restricted-protocol" : "http-restricted-api";
  RestrictedApi api;
  api.protocol_ = protocol;
  for (const std::string& flag : flags) {
    std::vector<std::string_view> names;
    std::string_view key, value;
    RETURN_IF_ERROR(SplitGroup(flag, option, &names, &key, &value));
    for (std::string_view name : names) {
      auto category = ParseApiCategory(name);
      if (!category) return InvalidArgument("unknown restricted {} '{}'", kind, name);
      auto& slot = api.restrictions_[static_cast<int>(*category)];
      if (slot) {
        return InvalidArgument("restricted {} '{}' can not be specified in multiple config groups",
                               kind, name);
      }
      slot = Restriction{LowerAscii(grpc ? std::string(kGrpcKeyPrefix) + std::string(key) : key),
                         std::string(value)};
    }
  }
  return api;
}

bool RestrictedApi::empty() const {
  return std::none_of(restrictions_.begin(), restrictions_.end(),
                      [](const auto& r) { return r.has_value(); });
}

const RestrictedApi::Restriction* RestrictedApi::Find(ApiCategory category) const {
  const int i = static_cast<int>(category);
  if (i < 0 || i >= kApiCategoryCount || !restrictions_[i]) return nullptr;
  return &*restrictions_[i];
}

std::vector<std::string> RestrictedApi::HeaderNames() const {
  std::vector<std::string> names;
  for (const auto& r : restrictions_) {
    if (r && std::find(names.begin(), names.end(), r->header) == names.end()) {
      names.push_back(r->header);
    }
  }
  return names;
}

std::optional<std::string> RestrictedApi::Check(ApiCategory category,
                                                const HeaderLookup& header) const {
  const Restriction* r = Find(category);
  if (r == nullptr) return std::nullopt;
  const std::string* got = header(r->header);
  if (got != nullptr && *got == r->value) return std::nullopt;
  return std::string(protocol_ == Protocol::kGrpc ? "This protocol" : "This API") +
         " is restricted, expecting header '" + r->header + "'";
}

HttpHandler RestrictHttpHandler(RestrictedApi restrictions, HttpHandler inner) {
  if (restrictions.empty()) return inner;
  return [api = std::move(restrictions), inner = std::move(inner)](HttpRequest req,
                                                                   HttpResponder reply) {
    auto lookup = [&req](std::string_view name) { return req.Header(name); };
    // The path as sent and fully decoded (a router that decodes before splitting sees "%2F" as
    // a separator): either one restricted is enough to need the header.
    for (ApiCategory c : {ClassifyHttpPath(req.path), ClassifyHttpPath(DecodeEscapes(req.path))}) {
      if (auto denied = api.Check(c, lookup)) {
        return reply(HttpReply{403, "application/json", JsonError(*denied), {}});
      }
    }
    inner(std::move(req), std::move(reply));
  };
}

}  // namespace inferd::server
