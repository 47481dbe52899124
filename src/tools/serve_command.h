// `inferd serve`: serve a Triton-layout model repository over KServe v2 HTTP and gRPC, with
// Prometheus metrics, until SIGINT or SIGTERM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/status.h"

namespace inferd::tools {

struct ServeOptions {
  std::string model_repository;
  std::string host = "127.0.0.1";
  std::string id = "inferd";  // server name in metadata (--id)
  int http_port = 8000;     // 0 = any free port (the log line names it)
  int grpc_port = 8001;     // 0 = any free port; -1 disables
  int metrics_port = 8002;  // 0 = any free port; -1 disables
  std::string max_request_bytes = "64MiB";  // HTTP body and gRPC message limit
  std::string log_level = "info";           // trace, debug, info, warn, error
  int http_threads = 2;                     // HTTP I/O threads
  int threads = 0;                          // inference cores; 0 = all
  // Lifecycle (see docs/serving.md, "Lifecycle").
  std::string model_control_mode = "none";  // none, poll, explicit
  int repository_poll_secs = 15;            // poll mode: seconds between repository scans
  std::vector<std::string> load_models;     // explicit mode: models loaded at start ("*" = all)
  int exit_timeout_secs = 30;               // shutdown: how long accepted requests may take
  std::string cache_dir;                    // compiled-model cache folder; "" = none
  // gRPC limits, restricted API and TLS (docs/serving.md, "Limits" and "Restricted API").
  int grpc_max_concurrent_streams = 100;         // HTTP/2 streams per connection
  int grpc_max_streams = 64;                     // ModelStreamInfer streams on the server
  int grpc_max_stream_pending_responses = 16;    // unwritten responses per stream
  int grpc_max_connection_idle_secs = 300;       // GOAWAY to idle connections; 0 = never
  bool grpc_accept_compressed_requests = false;  // gzip/deflate messages (see GrpcServerOptions)
  bool grpc_http2_bdp_probe = false;             // grow flow-control windows (GrpcServerOptions)
  std::vector<std::string> http_restricted_api;       // "cat,cat:header=value", repeatable
  std::vector<std::string> grpc_restricted_protocol;  // "cat,cat:key=value", repeatable
  bool grpc_use_ssl = false;
  std::string grpc_server_cert, grpc_server_key, grpc_root_cert;  // PEM files
  // Serving limits (hserve; docs/serving.md, "Limits (serving)").
  int max_load_time_secs = 300;              // one model's load; past it the load fails
  std::string max_warmup_bytes = "1GiB";     // input bytes of one warmup sample
  // HTTP limits (docs/serving.md, "Limits"; server::HttpServerOptions).
  int http_max_connections = 1024;
  double http_header_timeout_secs = 30;
  double http_body_timeout_secs = 60;
  double http_idle_timeout_secs = 60;
  std::string http_max_header_bytes = "64KiB";
  int http_max_headers = 100;
  std::string http_max_uri_bytes = "8KiB";
  std::string http_max_inflight_bytes = "512MiB";
  // HAProxy agent check (haproxy; docs/fleet.md, "Routing on HAProxy"; server/agent_check.h).
  int agent_port = -1;         // 0 = any free port; -1 = off
  double agent_capacity = 0;   // (0, 1] relative to the fleet's fastest node; 0 = threads / cores
  double agent_slow_speed = 0;  // shed below this share of the unloaded speed; 0 = never (off)
};

// Registers the `serve` subcommand and its flags on `app`, filling `options` when parsed.
CLI::App* AddServeSubcommand(CLI::App& app, ServeOptions* options);

// Parses "64MiB", "1GB", "4096", "512KiB" (B, KB/KiB, MB/MiB, GB/GiB; K/M/G = binary).
StatusOr<size_t> ParseByteSize(const std::string& text);

// Loads the repository, starts the servers, logs their URLs, blocks until SIGINT/SIGTERM, then
// shuts down gracefully: readiness false and new requests UNAVAILABLE (503) at once, accepted
// requests finish (at most exit_timeout_secs), then the frontends stop and it returns. Fails if a port cannot be bound or the
// repository cannot be read (models that fail to load are logged and skipped).
Status ServeCommand(const ServeOptions& options);

}  // namespace inferd::tools
