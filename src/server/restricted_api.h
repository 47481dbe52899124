// Restricted control API in Triton's form (`--http-restricted-api`, `--grpc-restricted-protocol`):
// each flag names a group of API categories and the header a request to them must carry.
//
//   --http-restricted-api=model-repository,shared-memory:admin-key=s3cret
//   --grpc-restricted-protocol=model-repository:admin-key=s3cret
//
// Over HTTP the request needs header `admin-key: s3cret` (names compare case-insensitively);
// over gRPC the metadata `triton-grpc-protocol-admin-key: s3cret`. Without it: HTTP 403 with
// {"error": "This API is restricted, expecting header 'admin-key'"}, gRPC PERMISSION_DENIED with
// "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'" (Triton's
// messages; Triton itself answers gRPC with UNAVAILABLE). A category may appear in one group only;
// categories in no group stay open. The flag may repeat, one group per flag.
//
// Pure: parsing, classification of HTTP paths and gRPC methods, the check. The frontends call it
// (RestrictHttpHandler wraps every HTTP route, the generation API included; grpc_server.cc checks
// each RPC).
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/http_server.h"

namespace inferd::server {

// Triton's categories, in Triton's order; kNone: a path no category covers (404s, /metrics).
enum class ApiCategory {
  kHealth,           // live, ready, model ready
  kMetadata,         // server and model metadata
  kInference,        // infer, stream infer, generate, the OpenAI routes
  kSharedMemory,     // system and CUDA shared-memory registration
  kModelConfig,      // model configuration
  kModelRepository,  // repository index, load, unload
  kStatistics,       // model statistics
  kTrace,            // trace settings
  kLogging,          // log settings
  kNone,
};
inline constexpr int kApiCategoryCount = static_cast<int>(ApiCategory::kNone);

// Triton's name ("model-repository"); "" for kNone.
std::string_view ApiCategoryName(ApiCategory category);
// The category named `name`, or nullopt.
std::optional<ApiCategory> ParseApiCategory(std::string_view name);

// Which category an HTTP request path belongs to (KServe v2, Triton extensions and the generation
// API). Empty segments are skipped and each segment is percent-decoded first, as the router does,
// so "/v2//repository/models/m/unload" or "/v2/re%70ository/..." cannot slip past a restriction.
ApiCategory ClassifyHttpPath(std::string_view path);
// Which category a KServe gRPC method belongs to ("ModelInfer" or
// "/inference.GRPCInferenceService/ModelInfer").
ApiCategory ClassifyGrpcMethod(std::string_view method);

class RestrictedApi {
 public:
  enum class Protocol { kHttp, kGrpc };
  struct Restriction {
    std::string header;  // lower-case; for gRPC with the "triton-grpc-protocol-" prefix
    std::string value;
  };

  // Parses the flag values ("cat,cat:key=value" each). INVALID_ARGUMENT with Triton's messages:
  // "unknown restricted api 'x'", "restricted protocol 'health' can not be specified in multiple
  // config groups", or the format.
  static StatusOr<RestrictedApi> Parse(Protocol protocol, const std::vector<std::string>& flags);

  bool empty() const;
  // The restriction on `category`, or nullptr when it is open.
  const Restriction* Find(ApiCategory category) const;
  // Every header name a check may read (the HTTP server must hand them to handlers).
  std::vector<std::string> HeaderNames() const;

  // nullopt when a request to `category` may proceed, else the refusal message. `header(name)`
  // returns the request's value for the lower-case header `name`, or nullptr.
  using HeaderLookup = std::function<const std::string*(std::string_view name)>;
  std::optional<std::string> Check(ApiCategory category, const HeaderLookup& header) const;

 private:
  Protocol protocol_ = Protocol::kHttp;
  std::array<std::optional<Restriction>, kApiCategoryCount> restrictions_;
};

// Wraps `inner`: a request whose path falls in a restricted category and lacks the header gets
// 403 {"error": ...}; everything else goes to `inner`. With no restriction, returns `inner`.
HttpHandler RestrictHttpHandler(RestrictedApi restrictions, HttpHandler inner);

}  // namespace inferd::server
