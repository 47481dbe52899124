// KServe v2 gRPC frontend (`inference.GRPCInferenceService`) on gRPC++'s callback API.
//
// No RPC blocks a gRPC thread on inference: ModelInfer hands the request to ModelManager::Infer and
// finishes the call from the response callback; ModelStreamInfer keeps reading while earlier
// requests run and writes responses in completion order (each carries the request id).
// Metadata, config and statistics RPCs answer inline.
//
//   GrpcServerOptions opts;
//   opts.port = 0;
//   ASSIGN_OR_RETURN(auto server, GrpcServer::Start(opts, manager.get()));
//   spdlog::info("gRPC on {}", server->port());
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "server/restricted_api.h"
#include "server/server_extensions.h"
#include "serving/model_manager.h"

namespace inferd::server {

struct GrpcServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8001;  // 0 = any free port; see GrpcServer::port()
  // Largest message accepted (gRPC's default is 4 MiB; inferd uses the HTTP body limit).
  size_t max_message_bytes = size_t{64} << 20;

  // Limits (docs/serving.md, "Limits"); each bounds what one client can make the server hold.
  // HTTP/2 streams (calls in flight) one connection may open at once: the server's
  // SETTINGS_MAX_CONCURRENT_STREAMS (gRPC's default is unlimited). >= 1.
  int max_concurrent_streams = 100;
  // ModelStreamInfer streams open at once on the whole server; one more is refused with
  // RESOURCE_EXHAUSTED. >= 1.
  int max_streams = 64;
  // Per ModelStreamInfer stream: requests read whose responses are not yet written. At the limit
  // the server stops reading that stream until the client reads its responses (backpressure:
  // HTTP/2 flow control then holds the client's writes). >= 1.
  int max_stream_pending_responses = 16;
  // Connections with no call for this long get GOAWAY (0 = never).
  std::chrono::milliseconds max_connection_idle{std::chrono::minutes(5)};
  // Compressed (gzip/deflate) request messages. Off by default: Debian's gRPC 1.51 inflates a
  // whole message before it compares its size with max_message_bytes, so 1 MiB of gzip can make
  // the server allocate 1 GiB. When off, such calls fail with UNIMPLEMENTED before any inflation.
  bool accept_compressed_requests = false;

  // Restricted protocols (--grpc-restricted-protocol; restricted_api.h): a call to a restricted
  // category without its metadata gets PERMISSION_DENIED. Default: everything open.
  RestrictedApi restricted;

  // TLS (--grpc-use-ssl); nullopt: plaintext. PEM texts, not paths. Client certificates are not
  // requested.
  struct Tls {
    std::string cert_pem;  // server certificate chain
    std::string key_pem;   // its private key
    std::string root_pem;  // root certificates ("" = none)
  };
  std::optional<Tls> tls;
};

class GrpcServer {
 public:
  // `manager` must outlive the server. UNAVAILABLE if the port cannot be bound.
  // `extensions` (identity, trace and log settings, shared with the HTTP frontend) must outlive
  // the server; nullptr: defaults.
  static StatusOr<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options,
                                                     serving::ModelManager* manager,
                                                     ServerExtensions* extensions = nullptr);
  // Stops accepting calls and cancels those in flight (waits at most a second for them).
  // Idempotent; the destructor calls it.
  void Stop();
  ~GrpcServer();

  uint16_t port() const;

  struct Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd::server
