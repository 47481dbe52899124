#include "server/restricted_api.h"

#include <gtest/gtest.h>

#include <map>

namespace inferd::server {
namespace {

using C = ApiCategory;
using P = RestrictedApi::Protocol;

TEST(RestrictedApiTest, CategoryNamesRoundTrip) {
  for (int i = 0; i < kApiCategoryCount; ++i) {
    auto c = static_cast<ApiCategory>(i);
    EXPECT_EQ(ParseApiCategory(ApiCategoryName(c)), c) << i;
  }
  EXPECT_EQ(ApiCategoryName(C::kModelRepository), "model-repository");
  EXPECT_FALSE(ParseApiCategory("model-reposit"));
  EXPECT_FALSE(ParseApiCategory(""));
  EXPECT_FALSE(ParseApiCategory("Health"));
}

TEST(RestrictedApiTest, ClassifiesHttpPaths) {
  const std::map<std::string, C> cases = {
      {"/v2/health/live", C::kHealth},
      {"/v2/health/ready", C::kHealth},
      {"/v2/models/m/ready", C::kHealth},
      {"/v2/models/m/versions/3/ready", C::kHealth},
      {"/v2", C::kMetadata},
      {"/v2/models/m", C::kMetadata},
      {"/v2/models/m/versions/2", C::kMetadata},
      {"/v2/models/m/infer", C::kInference},
      {"/v2/models/m/versions/1/infer", C::kInference},
      {"/v2/models/m/generate", C::kInference},
      {"/v2/models/m/generate_stream", C::kInference},
      {"/v1/completions", C::kInference},
      {"/v1/chat/completions", C::kInference},
      {"/v1/models", C::kMetadata},
      {"/v2/systemsharedmemory/region/r/register", C::kSharedMemory},
      {"/v2/cudasharedmemory/status", C::kSharedMemory},
      {"/v2/models/m/config", C::kModelConfig},
      {"/v2/repository/index", C::kModelRepository},
      {"/v2/repository/models/m/load", C::kModelRepository},
      {"/v2/repository/models/m/unload", C::kModelRepository},
      {"/v2/models/stats", C::kStatistics},
      {"/v2/models/m/stats", C::kStatistics},
      {"/v2/models/m/versions/1/stats", C::kStatistics},
      {"/v2/trace/setting", C::kTrace},
      {"/v2/models/m/trace/setting", C::kTrace},
      {"/v2/logging", C::kLogging},
      // The router skips empty segments and decodes escapes: so does the classifier.
      {"//v2//repository///models/m/unload/", C::kModelRepository},
      {"/v2/re%70ository/models/m/unload", C::kModelRepository},
      {"/v2/models/m%2Fx/config", C::kModelConfig},
      // A model named like an action is still a model.
      {"/v2/models/config", C::kMetadata},
      {"/v2/models/infer/infer", C::kInference},
      {"/", C::kNone},
      {"", C::kNone},
      {"/metrics", C::kNone},
      {"/v3/models/m/infer", C::kNone},
      {"/v2/models/m/nonsense", C::kNone},
      {"/v2/unknown", C::kNone},
      {"/v2/models/m/x%zz", C::kNone},
  };
  for (const auto& [path, want] : cases) {
    EXPECT_EQ(ClassifyHttpPath(path), want) << path;
  }
}

TEST(RestrictedApiTest, ClassifiesGrpcMethods) {
  const std::map<std::string, C> cases = {
      {"ServerLive", C::kHealth},
      {"ServerReady", C::kHealth},
      {"ModelReady", C::kHealth},
      {"ServerMetadata", C::kMetadata},
      {"ModelMetadata", C::kMetadata},
      {"ModelInfer", C::kInference},
      {"/inference.GRPCInferenceService/ModelStreamInfer", C::kInference},
      {"ModelConfig", C::kModelConfig},
      {"ModelStatistics", C::kStatistics},
      {"RepositoryIndex", C::kModelRepository},
      {"RepositoryModelLoad", C::kModelRepository},
      {"/inference.GRPCInferenceService/RepositoryModelUnload", C::kModelRepository},
      {"SystemSharedMemoryRegister", C::kSharedMemory},
      {"CudaSharedMemoryStatus", C::kSharedMemory},
      {"TraceSetting", C::kTrace},
      {"LogSettings", C::kLogging},
      {"Nope", C::kNone},
      {"", C::kNone},
  };
  for (const auto& [method, want] : cases) {
    EXPECT_EQ(ClassifyGrpcMethod(method), want) << method;
  }
}

TEST(RestrictedApiTest, ParsesGroups) {
  auto api = RestrictedApi::Parse(
      P::kHttp, {"model-repository,shared-memory:Admin-Key=s3cret", "trace:other=x=y"});
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_FALSE(api->empty());
  const auto* r = api->Find(C::kModelRepository);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->header, "admin-key");  // HTTP header names are case-insensitive
  EXPECT_EQ(r->value, "s3cret");
  ASSERT_NE(api->Find(C::kSharedMemory), nullptr);
  EXPECT_EQ(api->Find(C::kTrace)->value, "x=y");  // the first '=' after ':' splits
  EXPECT_EQ(api->Find(C::kInference), nullptr);
  EXPECT_EQ(api->Find(C::kNone), nullptr);
  EXPECT_EQ(api->HeaderNames(), (std::vector<std::string>{"admin-key", "other"}));

  auto grpc = RestrictedApi::Parse(P::kGrpc, {"model-repository:admin-key=v"});
  ASSERT_TRUE(grpc.ok());
  EXPECT_EQ(grpc->Find(C::kModelRepository)->header, "triton-grpc-protocol-admin-key");

  auto none = RestrictedApi::Parse(P::kHttp, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(RestrictedApiTest, RejectsBadFlagsWithTritonsMessages) {
  auto expect_error = [](P p, std::vector<std::string> flags, const std::string& needle) {
    auto api = RestrictedApi::Parse(p, flags);
    ASSERT_FALSE(api.ok()) << flags[0];
    EXPECT_EQ(api.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(api.status().message().find(needle), std::string::npos) << api.status().message();
  };
  expect_error(P::kHttp, {"model-reposit,health:k1=v1"}, "unknown restricted api 'model-reposit'");
  expect_error(P::kGrpc, {"model-reposit:k1=v1"}, "unknown restricted protocol 'model-reposit'");
  expect_error(P::kGrpc, {"model-repository,health:k1=v1", "metadata,health:k2=v2"},
               "restricted protocol 'health' can not be specified in multiple config groups");
  expect_error(P::kHttp, {"health,health:k=v"}, "restricted api 'health' can not be specified");
  for (const char* bad :
       {"health", "health:k", "health:=v", ":k=v", "health:k=", "health,:k=v", ""}) {
    expect_error(P::kHttp, {bad},
                 std::string(bad) == "health,:k=v" ? "unknown restricted api ''"
                                                   : "--http-restricted-api option format");
  }
}

TEST(RestrictedApiTest, ChecksTheHeader) {
  auto api = RestrictedApi::Parse(P::kHttp, {"model-repository:admin-key=s3cret"});
  ASSERT_TRUE(api.ok());
  std::map<std::string, std::string> headers;
  auto lookup = [&headers](std::string_view name) -> const std::string* {
    auto it = headers.find(std::string(name));
    return it == headers.end() ? nullptr : &it->second;
  };
  EXPECT_EQ(api->Check(C::kModelRepository, lookup),
            "This API is restricted, expecting header 'admin-key'");
  headers["admin-key"] = "wrong";
  EXPECT_TRUE(api->Check(C::kModelRepository, lookup).has_value());
  headers["admin-key"] = "s3cret ";
  EXPECT_TRUE(api->Check(C::kModelRepository, lookup).has_value());  // exact match only
  headers["admin-key"] = "s3cret";
  EXPECT_FALSE(api->Check(C::kModelRepository, lookup).has_value());
  headers.clear();
  EXPECT_FALSE(api->Check(C::kInference, lookup).has_value());  // open category
  EXPECT_FALSE(api->Check(C::kNone, lookup).has_value());

  auto grpc = RestrictedApi::Parse(P::kGrpc, {"model-repository:admin-key=s3cret"});
  ASSERT_TRUE(grpc.ok());
  EXPECT_EQ(grpc->Check(C::kModelRepository, lookup),
            "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'");
}

TEST(RestrictedApiTest, HttpHandlerRefusesWithout403AndPassesWith) {
  auto api = RestrictedApi::Parse(P::kHttp, {"model-repository:admin-key=s3cret"});
  ASSERT_TRUE(api.ok());
  int inner_calls = 0;
  HttpHandler handler = RestrictHttpHandler(*api, [&inner_calls](HttpRequest, HttpResponder reply) {
    ++inner_calls;
    reply(HttpReply{200, "application/json", "{}", {}});
  });
  auto call = [&handler](std::string path, bool with_header) {
    HttpRequest req;
    req.method = "POST";
    req.path = std::move(path);
    req.body = std::make_shared<std::string>();
    if (with_header) req.headers.emplace_back("admin-key", "s3cret");
    HttpReply got;
    handler(std::move(req), [&got](HttpReply r) { got = std::move(r); });
    return got;
  };
  HttpReply r = call("/v2/repository/models/m/unload", false);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body, R"({"error":"This API is restricted, expecting header 'admin-key'"})");
  // "%2F" decoded before splitting is a separator: still the repository API.
  EXPECT_EQ(call("/v2/repository%2Fmodels%2Fm%2Funload", false).status, 403);
  EXPECT_EQ(inner_calls, 0);
  EXPECT_EQ(call("/v2/repository/models/m/unload", true).status, 200);
  EXPECT_EQ(call("/v2/models/m/infer", false).status, 200);
  EXPECT_EQ(inner_calls, 2);
}

}  // namespace
}  // namespace inferd::server
