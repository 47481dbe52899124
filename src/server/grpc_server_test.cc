// GrpcServer's option checks; the limits' behaviour under attack is tested end to end
// (tests/server/hardening_grpc_test.py), since it needs a gRPC client and a loaded model.
#include "server/grpc_server.h"

#include <gtest/gtest.h>

namespace inferd::server {
namespace {

GrpcServerOptions FreePort() {
  GrpcServerOptions o;
  o.port = 0;
  return o;
}

TEST(GrpcServerTest, RejectsLimitsBelowOne) {
  for (auto set :
       {+[](GrpcServerOptions& o) { o.max_concurrent_streams = 0; },
        +[](GrpcServerOptions& o) { o.max_streams = 0; },
        +[](GrpcServerOptions& o) { o.max_stream_pending_responses = -1; },
        +[](GrpcServerOptions& o) { o.max_connection_idle = std::chrono::seconds(-1); }}) {
    GrpcServerOptions o = FreePort();
    set(o);
    auto server = GrpcServer::Start(o, /*manager=*/nullptr);
    ASSERT_FALSE(server.ok());
    EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(server.status().message().find("grpc: max_"), std::string::npos)
        << server.status().message();
  }
}

TEST(GrpcServerTest, BadTlsKeyPairFailsToListenWithAClearError) {
  GrpcServerOptions o = FreePort();
  o.tls =
      GrpcServerOptions::Tls{"-----BEGIN CERTIFICATE-----\nnot a cert\n-----END CERTIFICATE-----\n",
                             "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n", ""};
  auto server = GrpcServer::Start(o, /*manager=*/nullptr);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(server.status().message().find("TLS"), std::string::npos) << server.status().message();
}

TEST(GrpcServerTest, StartsAndStopsWithTheDefaultLimits) {
  // No RPC is sent, so no manager is needed.
  auto server = GrpcServer::Start(FreePort(), /*manager=*/nullptr);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_GT((*server)->port(), 0);
  (*server)->Stop();
}

}  // namespace
}  // namespace inferd::server
