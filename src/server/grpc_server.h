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

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/server_extensions.h"
#include "serving/model_manager.h"

namespace inferd::server {

struct GrpcServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8001;  // 0 = any free port; see GrpcServer::port()
  // Largest message accepted (gRPC's default is 4 MiB; inferd uses the HTTP body limit).
  size_t max_message_bytes = size_t{64} << 20;
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
