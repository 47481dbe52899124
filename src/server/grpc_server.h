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

class ByteBudget;  // http_protocol.h

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
  // HTTP/2 BDP probing, which grows the flow-control windows the server announces to what the
  // link can carry. Off by default: the announced window is what a client may push into the
  // server's memory without the server reading it (measured: 4 streams writing and never
  // reading, on one connection warmed by normal traffic, parked ~95 MiB of requests in gRPC's
  // buffers with probing on). Off, each stream's window stays at HTTP/2's 64 KiB; on a link with
  // a large bandwidth-delay product that caps one stream's upload rate (64 KiB per round trip).
  bool http2_bdp_probe = false;
  // Connections with no call for this long get GOAWAY (0 = never).
  std::chrono::milliseconds max_connection_idle{std::chrono::minutes(5)};
  // Compressed (gzip/deflate) request messages. Off by default: Debian's gRPC 1.51 inflates a
  // whole message before it compares its size with max_message_bytes, so 1 MiB of gzip can make
  // the server allocate 1 GiB. When off, such calls fail with UNIMPLEMENTED before any inflation.
  bool accept_compressed_requests = false;

  // Restricted protocols (--grpc-restricted-protocol; restricted_api.h): a call to a restricted
  // category without its metadata gets PERMISSION_DENIED. Default: everything open.
  RestrictedApi restricted;

  // Request bytes in flight, shared with the HTTP server (http_protocol.h; serve_command.cc
  // passes HttpServerOptions' budget). A ModelInfer, or a stream request, that would exceed it is
  // answered RESOURCE_EXHAUSTED at once (gRPC has already read the message; the budget stops
  // requests from piling up behind the models). nullptr: no budget.
  std::shared_ptr<ByteBudget> inflight_budget;

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
