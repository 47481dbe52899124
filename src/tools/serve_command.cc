#include "tools/serve_command.h"

#include <pthread.h>
#include <signal.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <fstream>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/mutex.h"
#include "kernels/cpu/onednn/cpu_info.h"
#include "server/agent_check.h"
#include "server/dashboard.h"
#include "server/grpc_server.h"
#include "server/http_protocol.h"
#include "server/http_server.h"
#include "server/kserve_http.h"
#include "server/openai_http.h"
#include "server/restricted_api.h"
#include "serving/model_manager.h"
#include "tools/log_level.h"
#include "tools/serve_generation.h"

namespace inferd::tools {
namespace {

// Takes SIGINT/SIGTERM (blocked in every thread) on a thread of its own from the manager's
// creation on, and begins the manager's shutdown at once: a signal that arrives while a load is
// stuck (at start or through the repository API) abandons that load instead of waiting for it.
class SignalWatcher {
 public:
  SignalWatcher(const sigset_t& signals, serving::ModelManager* manager) : signals_(signals) {
    thread_ = std::thread([this, manager] {
      int sig = 0;
      sigwait(&signals_, &sig);
      {
        MutexLock l(&mu_);
        if (stopping_) return;  // the destructor's wake-up, not a signal
      }
      manager->BeginShutdown();
      {
        // Set after BeginShutdown returned: whoever sees it may destroy the manager.
        MutexLock l(&mu_);
        signal_ = sig;
      }
      changed_.NotifyAll();
    });
  }
  ~SignalWatcher() {
    {
      MutexLock l(&mu_);
      stopping_ = true;
      // No signal taken yet: the thread is in sigwait; wake it with one of its own.
      if (signal_ == 0) pthread_kill(thread_.native_handle(), SIGTERM);
    }
    thread_.join();
  }
  // The signal taken, or 0 while none.
  int Received() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return signal_;
  }
  // Blocks until a signal was taken (and the manager's shutdown begun); returns it.
  int Wait() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (signal_ == 0) changed_.Wait(&mu_);
    return signal_;
  }

 private:
  sigset_t signals_;
  Mutex mu_;
  CondVar changed_;
  int signal_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

const char* SignalName(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

// An abandoned model load still runs on its own thread and uses the heap: returning from main
// would run static destructors under it, so the process leaves with _exit (status 0) instead.
void ExitIfLoadsRunning() {
  if (const int n = serving::ModelManager::RunningLoads(); n > 0) {
    spdlog::warn("exiting with {} abandoned model load(s) still running", n);
    spdlog::info("stopped");
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(0);
  }
}

}  // namespace

namespace {

// gRPC limits, the restricted API (HTTP and gRPC) and gRPC TLS; Triton's flag names where Triton
// has the flag.
void AddGrpcLimitAndAccessFlags(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("--grpc-max-concurrent-streams", o->grpc_max_concurrent_streams,
                  "HTTP/2 streams (calls in flight) one gRPC connection may open at once")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--grpc-max-streams", o->grpc_max_streams,
                  "ModelStreamInfer streams open at once on the server; more get "
                  "RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--grpc-max-stream-pending-responses", o->grpc_max_stream_pending_responses,
                  "Per ModelStreamInfer stream: responses not yet written before the server "
                  "stops reading the stream (backpressure)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--grpc-max-connection-idle-secs", o->grpc_max_connection_idle_secs,
                  "gRPC connections with no call for this long get GOAWAY (0 = never)")
      ->check(CLI::Range(0, 86400 * 7))
      ->capture_default_str();
  cmd->add_flag("--grpc-accept-compressed-requests", o->grpc_accept_compressed_requests,
                "Accept gzip/deflate gRPC messages (off: Debian's gRPC 1.51 inflates a whole "
                "message before checking its size, so a small gzip bomb costs GBs of memory)");
  cmd->add_flag("--grpc-http2-bdp-probe", o->grpc_http2_bdp_probe,
                "Let gRPC grow its HTTP/2 flow-control windows (faster uploads on long links; "
                "off: a client that never reads can park at most 64 KiB per stream)");
  cmd->add_option("--http-restricted-api", o->http_restricted_api,
                  "<api>,<api>...:<header>=<value>: HTTP requests to these API categories need "
                  "the header (repeatable; categories: health, metadata, inference, "
                  "shared-memory, model-config, model-repository, statistics, trace, logging)");
  cmd->add_option("--grpc-restricted-protocol", o->grpc_restricted_protocol,
                  "<protocol>,<protocol>...:<key>=<value>: gRPC calls to these categories need "
                  "metadata 'triton-grpc-protocol-<key>: <value>' (repeatable; categories as "
                  "for --http-restricted-api)");
  cmd->add_flag("--grpc-use-ssl", o->grpc_use_ssl, "Serve gRPC over TLS");
  cmd->add_option("--grpc-server-cert", o->grpc_server_cert, "PEM certificate for gRPC TLS");
  cmd->add_option("--grpc-server-key", o->grpc_server_key, "PEM private key for gRPC TLS");
  cmd->add_option("--grpc-root-cert", o->grpc_root_cert,
                  "PEM root certificates (client certificates are not required)");
}

StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return InvalidArgument("{}: cannot read '{}'", flag, path);
  if (text.find("-----BEGIN") == std::string::npos) {
    return InvalidArgument("{}: '{}' is not a PEM file", flag, path);
  }
  return text;
}

Status ConfigureGrpcTls(const ServeOptions& o, server::GrpcServerOptions* go) {
  if (!o.grpc_use_ssl) {
    if (!o.grpc_server_cert.empty() || !o.grpc_server_key.empty() || !o.grpc_root_cert.empty()) {
      return InvalidArgument("--grpc-server-cert/--grpc-server-key/--grpc-root-cert need "
                             "--grpc-use-ssl");
    }
    return Status::Ok();
  }
  if (o.grpc_server_cert.empty() || o.grpc_server_key.empty()) {
    return InvalidArgument("--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key");
  }
  server::GrpcServerOptions::Tls tls;
  ASSIGN_OR_RETURN(tls.cert_pem, ReadPem(o.grpc_server_cert, "--grpc-server-cert"));
  ASSIGN_OR_RETURN(tls.key_pem, ReadPem(o.grpc_server_key, "--grpc-server-key"));
  if (!o.grpc_root_cert.empty()) {
    ASSIGN_OR_RETURN(tls.root_pem, ReadPem(o.grpc_root_cert, "--grpc-root-cert"));
  }
  go->tls = std::move(tls);
  return Status::Ok();
}

// Fills the gRPC limits, restrictions and TLS of `go` from the flags.
Status ConfigureGrpc(const ServeOptions& o, server::GrpcServerOptions* go) {
  go->max_concurrent_streams = o.grpc_max_concurrent_streams;
  go->max_streams = o.grpc_max_streams;
  go->max_stream_pending_responses = o.grpc_max_stream_pending_responses;
  go->max_connection_idle = std::chrono::seconds(o.grpc_max_connection_idle_secs);
  go->accept_compressed_requests = o.grpc_accept_compressed_requests;
  go->http2_bdp_probe = o.grpc_http2_bdp_probe;
  ASSIGN_OR_RETURN(go->restricted,
                   server::RestrictedApi::Parse(server::RestrictedApi::Protocol::kGrpc,
                                                o.grpc_restricted_protocol));
  return ConfigureGrpcTls(o, go);
}

}  // namespace

namespace {

// ---- HTTP limits (owner: hhttp; docs/serving.md "Limits") ----
void AddHttpLimitFlags(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("--http-max-connections", o->http_max_connections,
                  "Open HTTP connections; beyond it new ones get 503 and are closed")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--http-header-timeout-secs", o->http_header_timeout_secs,
                  "Time for a request's head to arrive (from connect or its first byte)")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  cmd->add_option("--http-body-timeout-secs", o->http_body_timeout_secs,
                  "Time for a request's body to arrive after its head")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  cmd->add_option("--http-idle-timeout-secs", o->http_idle_timeout_secs,
                  "Time a keep-alive connection may wait for its next request (and a reply may "
                  "wait for the client to read it)")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  cmd->add_option("--http-max-header-bytes", o->http_max_header_bytes,
                  "Request line + header fields; beyond: 431 (414 for the request line)")
      ->capture_default_str();
  cmd->add_option("--http-max-headers", o->http_max_headers, "Header fields; beyond: 431")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--http-max-uri-bytes", o->http_max_uri_bytes, "Request target; beyond: 414")
      ->capture_default_str();
  cmd->add_option("--http-max-inflight-bytes", o->http_max_inflight_bytes,
                  "Request bodies being read or served, all connections together; a request "
                  "beyond it gets 503 before its body is read")
      ->capture_default_str();
}

Status ApplyHttpLimits(const ServeOptions& o, server::HttpServerOptions* ho) {
  auto ms = [](double secs) {
    return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000 + 0.5));
  };
  ho->max_connections = static_cast<size_t>(o.http_max_connections);
  ho->header_timeout = ms(o.http_header_timeout_secs);
  ho->body_timeout = ms(o.http_body_timeout_secs);
  ho->idle_timeout = ms(o.http_idle_timeout_secs);
  auto size = [](const std::string& text, const char* flag, size_t* out) -> Status {
    auto v = ParseByteSize(text);
    if (!v.ok()) return v.status().WithContext(flag);
    *out = *v;
    return Status::Ok();
  };
  RETURN_IF_ERROR(size(o.http_max_header_bytes, "--http-max-header-bytes", &ho->max_header_bytes));
  ho->max_header_count = static_cast<size_t>(o.http_max_headers);
  RETURN_IF_ERROR(size(o.http_max_uri_bytes, "--http-max-uri-bytes", &ho->max_uri_bytes));
  RETURN_IF_ERROR(
      size(o.http_max_inflight_bytes, "--http-max-inflight-bytes", &ho->max_inflight_bytes));
  if (ho->max_header_bytes < 1024 || ho->max_header_bytes > (size_t{1} << 30)) {
    return InvalidArgument("--http-max-header-bytes must be between 1KiB and 1GiB");
  }
  if (ho->max_uri_bytes < 16) return InvalidArgument("--http-max-uri-bytes must be >= 16 bytes");
  return Status::Ok();
}
// ---- end HTTP limits ----

// ---- HAProxy agent check (owner: haproxy; docs/fleet.md "Routing on HAProxy") ----
void AddAgentCheckFlags(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("--agent-port", o->agent_port,
                  "Serve HAProxy's agent check on this port: a weight from the node's load and "
                  "capacity, 'drain' while shutting down, 'down' when not ready (0 = any free "
                  "port, -1 = off)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  cmd->add_option("--agent-capacity", o->agent_capacity,
                  "This node's capacity relative to the fleet's fastest node, (0, 1] (0 = its "
                  "inference threads / the machine's cores)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--agent-slow-speed", o->agent_slow_speed,
                  "Answer 'drain' while the node executes batches at less than this share of its "
                  "own unloaded speed, probing now and then (0 = never)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

// The capacity the agent reports: the flag, or the share of the machine's cores inference uses.
double AgentCapacity(const ServeOptions& o) {
  if (o.agent_capacity > 0) return o.agent_capacity;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  return o.threads <= 0 ? 1.0 : std::min(1.0, static_cast<double>(o.threads) / cores);
}

// Starts the agent-check listener when --agent-port is set (null otherwise).
StatusOr<std::unique_ptr<server::AgentCheckServer>> StartAgentCheck(
    const ServeOptions& o, std::shared_ptr<server::ManagerAgentReply> reply) {
  if (o.agent_port < 0) return std::unique_ptr<server::AgentCheckServer>();
  server::AgentCheckServerOptions ao;
  ao.host = o.host;
  ao.port = static_cast<uint16_t>(o.agent_port);
  ASSIGN_OR_RETURN(auto agent,
                   server::AgentCheckServer::Start(ao, [reply] { return (*reply)(); }));
  spdlog::info("agent check listening on {}:{} (capacity {:.2f})", o.host, agent->port(),
               AgentCapacity(o));
  return agent;
}
// ---- end HAProxy agent check ----

}  // namespace

CLI::App* AddServeSubcommand(CLI::App& app, ServeOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve a model repository over KServe v2 HTTP/gRPC with Prometheus metrics");
  cmd->add_option("--model-repository", o->model_repository,
                  "Triton-layout repository: DIR/<model>/[config.pbtxt] and "
                  "DIR/<model>/<version>/model.onnx")
      ->required();
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--id", o->id, "Server name in /v2 metadata (Triton clients may expect 'triton')")
      ->capture_default_str();
  cmd->add_option("--http-port", o->http_port, "HTTP port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--grpc-port", o->grpc_port, "gRPC port (0 = any free port, -1 = off)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  cmd->add_option("--metrics-port", o->metrics_port, "Metrics port (0 = any free port, -1 = off)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  cmd->add_option("--max-request-bytes", o->max_request_bytes,
                  "Largest HTTP body / gRPC message (e.g. 64MiB)")
      ->capture_default_str();
  AddLogLevelOption(cmd, &o->log_level);
  cmd->add_option("--http-threads", o->http_threads, "HTTP I/O threads")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Cores for inference (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--model-control-mode", o->model_control_mode,
                  "none: load every model at start; poll: also re-scan the repository and "
                  "(re)load/unload what changed; explicit: load --load-model models, then the "
                  "repository API loads/unloads")
      ->check(CLI::IsMember({"none", "poll", "explicit"}))
      ->capture_default_str();
  cmd->add_option("--repository-poll-secs", o->repository_poll_secs,
                  "Seconds between repository scans in poll mode")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--load-model", o->load_models,
                  "Model to load at start in explicit mode (repeatable; '*' = all)");
  cmd->add_option("--exit-timeout-secs", o->exit_timeout_secs,
                  "On SIGTERM/SIGINT, how long accepted requests may take to finish")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  cmd->add_option("--cache-dir", o->cache_dir,
                  "Compiled-model cache folder (optimized graphs keyed by model, options, "
                  "inferd build and CPU); empty = no cache");
  AddGrpcLimitAndAccessFlags(cmd, o);
  // ---- serving limits (hserve) ----
  cmd->add_option("--max-load-time-secs", o->max_load_time_secs,
                  "Longest one model's load may take; past it the load fails (running versions "
                  "keep serving) and is abandoned")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--max-warmup-bytes", o->max_warmup_bytes,
                  "Most input bytes of one warmup sample (config model_warmup over it fails the "
                  "load; a default warmup step over it is skipped)")
      ->capture_default_str();
  // ---- end serving limits ----
  AddHttpLimitFlags(cmd, o);
  AddAgentCheckFlags(cmd, o);
  return cmd;
}

StatusOr<size_t> ParseByteSize(const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr == text.data()) {
    return InvalidArgument("invalid size '{}': expected e.g. 64MiB", text);
  }
  std::string unit(ptr, end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kib") mult = uint64_t{1} << 10;
  else if (unit == "kb") mult = 1000;
  else if (unit == "m" || unit == "mib") mult = uint64_t{1} << 20;
  else if (unit == "mb") mult = 1000 * 1000;
  else if (unit == "g" || unit == "gib") mult = uint64_t{1} << 30;
  else if (unit == "gb") mult = 1000 * 1000 * 1000;
  else return InvalidArgument("invalid size unit in '{}': use B, KiB, MiB, GiB, KB, MB or GB", text);
  if (value == 0 || value > (uint64_t{1} << 40) / mult) {
    return InvalidArgument("size '{}' must be between 1 byte and 1 TiB", text);
  }
  return static_cast<size_t>(value * mult);
}

Status ServeCommand(const ServeOptions& o) {
  ApplyLogLevel(o.log_level);
  spdlog::flush_on(spdlog::level::trace);  // log lines are rare; tests and operators read them live
  ASSIGN_OR_RETURN(size_t max_bytes, ParseByteSize(o.max_request_bytes));
  spdlog::info("cpu: {}", cpu::DescribeCpu(cpu::DetectCpu()));

  // Block the signals before any thread starts, so every thread inherits the mask and only the
  // sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const auto start_time = std::chrono::steady_clock::now();
  serving::ModelManagerOptions mo;
  mo.repository = o.model_repository;
  mo.total_threads = o.threads;
  ASSIGN_OR_RETURN(mo.control_mode, serving::ParseModelControlMode(o.model_control_mode));
  mo.poll_interval = std::chrono::seconds(o.repository_poll_secs);
  mo.startup_models = o.load_models;
  mo.cache_dir = o.cache_dir;
  mo.build_id = server::kServerVersion;
  // ---- serving limits (hserve) ----
  mo.max_load_time = std::chrono::seconds(o.max_load_time_secs);
  ASSIGN_OR_RETURN(mo.max_warmup_bytes, ParseByteSize(o.max_warmup_bytes));
  // ---- end serving limits ----
  if (!o.load_models.empty() && mo.control_mode != serving::ModelControlMode::kExplicit) {
    return InvalidArgument("--load-model needs --model-control-mode explicit");
  }
  // Generative folders go to their engines (the generation API), not to the ModelManager.
  ServedGenerativeModels generative = LoadGenerativeModels(o.model_repository, o.threads);
  mo.external_models = generative.folders;
  ASSIGN_OR_RETURN(auto manager, serving::ModelManager::Create(mo));
  // The agent says "down" while the repository loads, then the node's weight.
  server::SlowNodePolicy slow;
  slow.shed_below = o.agent_slow_speed;
  slow.serve_above = std::min(1.0, o.agent_slow_speed + 0.2);
  auto agent_reply = std::make_shared<server::ManagerAgentReply>(manager.get(), AgentCapacity(o),
                                                                 o.threads, slow);
  ASSIGN_OR_RETURN(auto agent, StartAgentCheck(o, agent_reply));  // stopped before the manager
  SignalWatcher watcher(signals, manager.get());  // destroyed before the manager
  spdlog::info("loading model repository {} (model control mode {})", o.model_repository,
               o.model_control_mode);
  RETURN_IF_ERROR(manager->Start());
  if (int sig = watcher.Received(); sig != 0) {
    spdlog::info("received {} while loading the repository; stopping", SignalName(sig));
    if (agent) agent->Stop();
    manager.reset();
    ExitIfLoadsRunning();
    return Status::Ok();
  }
  for (const auto& e : manager->Index()) {
    if (e.state == "READY") {
      spdlog::info("model '{}' version {} is READY", e.name, e.version);
    } else {
      spdlog::warn("model '{}'{} is {}: {}", e.name,
                   e.version >= 0 ? fmt::format(" version {}", e.version) : "", e.state,
                   e.reason);
    }
  }

  const std::string url_host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  if (o.id.empty()) return InvalidArgument("--id must not be empty");
  server::ServerExtensions extensions(o.id);  // outlives the frontends (stopped below)
  server::HttpServerOptions ho;
  ho.host = o.host;
  ho.port = static_cast<uint16_t>(o.http_port);
  ho.io_threads = o.http_threads;
  ho.max_request_bytes = max_bytes;
  RETURN_IF_ERROR(ApplyHttpLimits(o, &ho));
  ASSIGN_OR_RETURN(auto http_restricted,
                   server::RestrictedApi::Parse(server::RestrictedApi::Protocol::kHttp,
                                                o.http_restricted_api));
  ho.extra_headers = http_restricted.HeaderNames();
  server::GrpcServerOptions go;  // validated before anything listens
  RETURN_IF_ERROR(ConfigureGrpc(o, &go));
  // One budget of request bytes in flight for HTTP and gRPC together.
  if (!ho.inflight_budget) {
    ho.inflight_budget = std::make_shared<server::ByteBudget>(ho.max_inflight_bytes);
  }
  go.inflight_budget = ho.inflight_budget;
  ASSIGN_OR_RETURN(auto http, server::HttpServer::Start(
                                   ho, server::RestrictHttpHandler(
                                           std::move(http_restricted),
                                           server::MakeRepositoryRedactingHandler(
                                               server::MakeGenerationHttpHandler(
                                                   generative.models, manager.get(),
                                                   server::MakeKServeHttpHandler(manager.get(),
                                                                                 &extensions)),
                                               o.model_repository))));
  spdlog::info("HTTP KServe v2 listening on http://{}:{}", url_host, http->port());
  if (!generative.models->ready.empty()) {
    spdlog::info("OpenAI-compatible API on http://{}:{}/v1 ({} generative model(s))", url_host,
                 http->port(), generative.models->ready.size());
  }

  std::unique_ptr<server::GrpcServer> grpc;
  if (o.grpc_port >= 0) {
    go.host = o.host;
    go.port = static_cast<uint16_t>(o.grpc_port);
    go.max_message_bytes = max_bytes;
    ASSIGN_OR_RETURN(grpc, server::GrpcServer::Start(go, manager.get(), &extensions));
    spdlog::info("gRPC KServe v2 listening on {}:{}{}", url_host, grpc->port(),
                 go.tls ? " (TLS)" : "");
  }
  std::unique_ptr<server::HttpServer> metrics;
  if (o.metrics_port >= 0) {
    server::HttpServerOptions mho;
    mho.host = o.host;
    mho.port = static_cast<uint16_t>(o.metrics_port);
    mho.io_threads = 1;
    RETURN_IF_ERROR(ApplyHttpLimits(o, &mho));
    mho.max_request_bytes = 64 * 1024;
    ASSIGN_OR_RETURN(metrics, server::HttpServer::Start(
                                  mho, server::MakeDashboardHttpHandler(
                                           server::MakeGenerationMetricsHttpHandler(
                                               generative.models, manager.get()))));
    spdlog::info("metrics listening on http://{}:{}/metrics", url_host, metrics->port());
    spdlog::info("dashboard on http://{}:{}/dashboard", url_host, metrics->port());
  }

  spdlog::info("server is ready ({:.0f} ms after start)",
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                         start_time).count());

  const int sig = watcher.Wait();
  agent_reply->SetDraining();  // HAProxy stops sending new requests here
  spdlog::info("received {}, shutting down: not ready, new requests get 503; waiting up to {} s "
               "for {} accepted request(s)",
               SignalName(sig), o.exit_timeout_secs, manager->InFlight());
  // Readiness false and new requests rejected first; the frontends keep running so that every
  // accepted request's response is written.
  manager->BeginShutdown();
  if (!manager->WaitForIdle(std::chrono::seconds(o.exit_timeout_secs))) {
    spdlog::warn("exit timeout: {} request(s) still in flight", manager->InFlight());
  }
  // The last responses were handed to the I/O threads; give them a moment to reach the sockets.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  http->Stop();
  if (metrics) metrics->Stop();
  if (grpc) grpc->Stop();
  if (agent) agent->Stop();
  manager.reset();
  generative.models.reset();  // the engines cancel what still runs and join their threads
  ExitIfLoadsRunning();
  spdlog::info("stopped");
  return Status::Ok();
}

}  // namespace inferd::tools
