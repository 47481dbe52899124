#include "server/grpc_server.h"

#include <atomic>
#include <chrono>
#include <deque>

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "grpc_service.grpc.pb.h"
#include "common/mutex.h"
#include "model_config.pb.h"
#include "server/grpc_codec.h"
#include "server/http_protocol.h"
#include "server/kserve_http.h"
#include "server/repository_codec.h"
#include "server/restricted_api.h"
#include "server/shared_memory_grpc.h"

namespace inferd::server {
namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
using serving::ModelManager;
namespace pb = inference;

grpc::Status ToGrpc(const Status& s) {
  using G = grpc::StatusCode;
  G code = G::UNKNOWN;
  switch (s.code()) {
    case StatusCode::kOk: return grpc::Status::OK;
    case StatusCode::kInvalidArgument: code = G::INVALID_ARGUMENT; break;
    case StatusCode::kNotFound: code = G::NOT_FOUND; break;
    case StatusCode::kAlreadyExists: code = G::ALREADY_EXISTS; break;
    case StatusCode::kFailedPrecondition: code = G::FAILED_PRECONDITION; break;
    case StatusCode::kOutOfRange: code = G::OUT_OF_RANGE; break;
    case StatusCode::kUnimplemented: code = G::UNIMPLEMENTED; break;
    case StatusCode::kUnavailable: code = G::UNAVAILABLE; break;
    case StatusCode::kDeadlineExceeded: code = G::DEADLINE_EXCEEDED; break;
    case StatusCode::kResourceExhausted: code = G::RESOURCE_EXHAUSTED; break;
    case StatusCode::kInternal: code = G::INTERNAL; break;
  }
  return grpc::Status(code, s.message());
}

ServerUnaryReactor* Done(CallbackServerContext* ctx, const Status& s) {
  ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(s));
  return r;
}

void FillDuration(const serving::DurationStat& d, pb::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

// Takes `bytes` from `budget` (nullptr: no budget); the refusal status when it is spent.
Status AcquireInflight(ByteBudget* budget, size_t bytes) {
  if (budget == nullptr || budget->TryAcquire(bytes)) return Status::Ok();
  return ResourceExhausted("server busy: {} request bytes in flight would exceed the limit of {}",
                           budget->in_use() + bytes, budget->limit());
}

// Counts the ModelStreamInfer streams open on the server (GrpcServerOptions::max_streams).
struct StreamSlots {
  explicit StreamSlots(int max) : max(max) {}
  bool TryAcquire() {
    int n = open.load();
    while (n < max) {
      if (open.compare_exchange_weak(n, n + 1)) return true;
    }
    return false;
  }
  void Release() { open.fetch_sub(1); }
  const int max;
  std::atomic<int> open{0};
};

// Bidirectional stream: every request read is decoded and handed to the manager at once; responses
// are queued and written one at a time (gRPC allows one outstanding write). Backpressure: at most
// `max_pending` requests may be read and not yet answered on the wire; at the limit no read is
// started until a write completes, so a client that writes and never reads is held by HTTP/2 flow
// control instead of growing the server's memory. The call finishes once the client half-closed
// and every request has been answered.
class StreamReactor
    : public grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse> {
 public:
  // `slots`: the server's stream counter, already acquired for this stream (released in OnDone).
  StreamReactor(ModelManager* manager, StreamSlots* slots, int max_pending, ByteBudget* budget)
      : manager_(manager), slots_(slots), budget_(budget), max_pending_(max_pending) {
    RecursiveMutexLock lock(&mu_);
    MaybeStartRead();
  }

  void OnReadDone(bool ok) override {
    std::shared_ptr<pb::ModelInferRequest> msg;
    {
      RecursiveMutexLock lock(&mu_);
      reading_ = false;
      if (!ok) {
        reads_done_ = true;
      } else {
        msg = std::make_shared<pb::ModelInferRequest>(std::move(request_));
        request_.Clear();
        ++pending_;
      }
    }
    if (!ok) return MaybeFinish();
    Dispatch(msg);
    RecursiveMutexLock lock(&mu_);
    MaybeStartRead();
  }

  void OnWriteDone(bool /*ok*/) override {
    {
      RecursiveMutexLock lock(&mu_);
      queue_.pop_front();
      --pending_;
      if (!queue_.empty()) {
        StartWrite(&queue_.front());
      } else {
        writing_ = false;
      }
      MaybeStartRead();
    }
    MaybeFinish();
  }

  void OnDone() override {
    slots_->Release();
    delete this;
  }

 private:
  void Dispatch(const std::shared_ptr<pb::ModelInferRequest>& msg) {
    auto decoded = DecodeGrpcInferRequest(*msg, msg);
    auto shm = ResolveGrpcSharedMemoryOutputs(SharedMemoryRegistry::Default(), *msg);
    if (decoded.ok() && !shm.ok()) decoded = shm.status();
    if (!decoded.ok()) return Enqueue(ErrorResponse(*msg, decoded.status()));
    const size_t bytes = msg->ByteSizeLong();
    if (Status s = AcquireInflight(budget_, bytes); !s.ok()) return Enqueue(ErrorResponse(*msg, s));
    manager_->Infer(std::move(*decoded), [this, msg, bytes, shm = std::move(*shm)](
                                             Status s, serving::InferenceResponse resp) {
      if (budget_ != nullptr) budget_->Release(bytes);
      pb::ModelStreamInferResponse r;
      if (s.ok()) s = EncodeGrpcInferResponse(resp, r.mutable_infer_response());
      if (s.ok()) s = FinishGrpcSharedMemoryOutputs(shm, resp, r.mutable_infer_response());
      Enqueue(s.ok() ? std::move(r) : ErrorResponse(*msg, s));
    });
  }

  static pb::ModelStreamInferResponse ErrorResponse(const pb::ModelInferRequest& req,
                                                    const Status& s) {
    pb::ModelStreamInferResponse r;
    r.set_error_message(s.message());
    r.mutable_infer_response()->set_id(req.id());
    r.mutable_infer_response()->set_model_name(req.model_name());
    return r;
  }

  void Enqueue(pb::ModelStreamInferResponse r) {
    RecursiveMutexLock lock(&mu_);
    queue_.push_back(std::move(r));
    if (!writing_) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
  }

  // Starts the next read unless one is outstanding, the client half-closed, or max_pending_
  // responses are waiting to be written.
  void MaybeStartRead() REQUIRES(mu_) {
    if (reading_ || reads_done_ || finished_ || pending_ >= max_pending_) return;
    reading_ = true;
    StartRead(&request_);
  }

  void MaybeFinish() {
    {
      RecursiveMutexLock lock(&mu_);
      if (!reads_done_ || pending_ > 0 || writing_ || finished_) return;
      finished_ = true;
    }
    Finish(grpc::Status::OK);
  }

  ModelManager* manager_;
  StreamSlots* slots_;
  ByteBudget* budget_;  // nullptr: none
  const int64_t max_pending_;
  pb::ModelInferRequest request_;  // the read in progress
  // mu_ guards the write queue, the read state and the finish state; reactions (OnReadDone,
  // OnWriteDone) and response callbacks take it. Reactions may run inline from StartWrite or
  // StartRead, which are called under mu_ on the same thread: the mutex is recursive.
  RecursiveMutex mu_;
  std::deque<pb::ModelStreamInferResponse> queue_ GUARDED_BY(mu_);  // front is being written
  int64_t pending_ GUARDED_BY(mu_) = 0;                             // read, not yet written
  bool reading_ GUARDED_BY(mu_) = false;                            // a StartRead is outstanding
  bool writing_ GUARDED_BY(mu_) = false;
  bool reads_done_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
};

// A stream refused at its start (too many streams, or a restricted protocol): finishes at once.
class RefusedStream
    : public grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse> {
 public:
  explicit RefusedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

class Service final : public pb::GRPCInferenceService::CallbackService {
 public:
  Service(ModelManager* manager, ServerExtensions* ext, const GrpcServerOptions& options)
      : manager_(manager),
        ext_(ext),
        restricted_(options.restricted),
        stream_slots_(options.max_streams),
        max_stream_pending_(options.max_stream_pending_responses),
        budget_(options.inflight_budget) {}

  ServerUnaryReactor* ServerLive(CallbackServerContext* ctx, const pb::ServerLiveRequest*,
                                 pb::ServerLiveResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kHealth)) return r;
    res->set_live(manager_->IsLive());
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* ServerReady(CallbackServerContext* ctx, const pb::ServerReadyRequest*,
                                  pb::ServerReadyResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kHealth)) return r;
    res->set_ready(manager_->IsReady());
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* ModelReady(CallbackServerContext* ctx, const pb::ModelReadyRequest* req,
                                 pb::ModelReadyResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kHealth)) return r;
    auto version = ParseGrpcVersion(req->version());
    if (!version.ok()) return Done(ctx, version.status());
    res->set_ready(manager_->IsModelReady(req->name(), *version));
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* ServerMetadata(CallbackServerContext* ctx, const pb::ServerMetadataRequest*,
                                     pb::ServerMetadataResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kMetadata)) return r;
    res->set_name(ext_->id());
    res->set_version(kServerVersion);
    for (const char* e : ServerExtensions::Names()) res->add_extensions(e);
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* ModelMetadata(CallbackServerContext* ctx,
                                    const pb::ModelMetadataRequest* req,
                                    pb::ModelMetadataResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kMetadata)) return r;
    auto version = ParseGrpcVersion(req->version());
    if (!version.ok()) return Done(ctx, version.status());
    auto md = manager_->GetMetadata(req->name(), *version);
    if (!md.ok()) return Done(ctx, md.status());
    res->set_name(md->name);
    for (const auto& v : md->versions) res->add_versions(v);
    res->set_platform(md->platform);
    for (const auto& t : md->inputs) {
      auto* o = res->add_inputs();
      o->set_name(t.name);
      o->set_datatype(t.datatype);
      for (int64_t d : t.shape) o->add_shape(d);
    }
    for (const auto& t : md->outputs) {
      auto* o = res->add_outputs();
      o->set_name(t.name);
      o->set_datatype(t.datatype);
      for (int64_t d : t.shape) o->add_shape(d);
    }
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* ModelInfer(CallbackServerContext* ctx, const pb::ModelInferRequest* req,
                                 pb::ModelInferResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kInference)) return r;
    // Raw inputs view into *req, which gRPC keeps alive until the reactor is done, i.e. after
    // the response callback has called Finish.
    auto decoded = DecodeGrpcInferRequest(*req, nullptr);
    if (!decoded.ok()) return Done(ctx, decoded.status());
    auto shm = ResolveGrpcSharedMemoryOutputs(SharedMemoryRegistry::Default(), *req);
    if (!shm.ok()) return Done(ctx, shm.status());
    const size_t bytes = req->ByteSizeLong();
    if (Status s = AcquireInflight(budget_.get(), bytes); !s.ok()) return Done(ctx, s);
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    std::optional<TraceHandle> trace = ext_->StartTrace(req->model_name());
    manager_->Infer(std::move(*decoded), [reactor, res, trace, ext = ext_, shm = std::move(*shm),
                                          budget = budget_, bytes](
                                             Status s, serving::InferenceResponse resp) {
      if (budget) budget->Release(bytes);
      if (s.ok()) s = EncodeGrpcInferResponse(resp, res);
      if (s.ok()) s = FinishGrpcSharedMemoryOutputs(shm, resp, res);
      if (trace) ext->FinishTrace(*trace, resp.model_version);
      reactor->Finish(ToGrpc(s));
    });
    return reactor;
  }

  // Shared memory extension (shared_memory_grpc.h).
  ServerUnaryReactor* SystemSharedMemoryStatus(
      CallbackServerContext* ctx, const pb::SystemSharedMemoryStatusRequest* req,
      pb::SystemSharedMemoryStatusResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kSharedMemory)) return r;
    return Done(ctx, server::SystemSharedMemoryStatus(SharedMemoryRegistry::Default(), *req, res));
  }
  ServerUnaryReactor* SystemSharedMemoryRegister(
      CallbackServerContext* ctx, const pb::SystemSharedMemoryRegisterRequest* req,
      pb::SystemSharedMemoryRegisterResponse*) override {
    if (auto* r = Refused(ctx, ApiCategory::kSharedMemory)) return r;
    return Done(ctx, server::SystemSharedMemoryRegister(SharedMemoryRegistry::Default(), *req));
  }
  ServerUnaryReactor* SystemSharedMemoryUnregister(
      CallbackServerContext* ctx, const pb::SystemSharedMemoryUnregisterRequest* req,
      pb::SystemSharedMemoryUnregisterResponse*) override {
    if (auto* r = Refused(ctx, ApiCategory::kSharedMemory)) return r;
    return Done(ctx, server::SystemSharedMemoryUnregister(SharedMemoryRegistry::Default(), *req));
  }
  ServerUnaryReactor* CudaSharedMemoryStatus(CallbackServerContext* ctx,
                                             const pb::CudaSharedMemoryStatusRequest* req,
                                             pb::CudaSharedMemoryStatusResponse*) override {
    if (auto* r = Refused(ctx, ApiCategory::kSharedMemory)) return r;
    return Done(ctx, server::CudaSharedMemoryStatus(*req));
  }
  ServerUnaryReactor* CudaSharedMemoryRegister(CallbackServerContext* ctx,
                                               const pb::CudaSharedMemoryRegisterRequest*,
                                               pb::CudaSharedMemoryRegisterResponse*) override {
    if (auto* r = Refused(ctx, ApiCategory::kSharedMemory)) return r;
    return Done(ctx, Unimplemented("{}", kCudaSharedMemoryUnsupported));
  }
  ServerUnaryReactor* CudaSharedMemoryUnregister(CallbackServerContext* ctx,
                                                 const pb::CudaSharedMemoryUnregisterRequest*,
                                                 pb::CudaSharedMemoryUnregisterResponse*) override {
    if (auto* r = Refused(ctx, ApiCategory::kSharedMemory)) return r;
    return Done(ctx, Status::Ok());  // nothing can be registered
  }

  grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* ModelStreamInfer(
      CallbackServerContext* ctx) override {
    if (auto denied = CheckRestricted(ctx, ApiCategory::kInference)) {
      return new RefusedStream(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, *denied));
    }
    if (!stream_slots_.TryAcquire()) {
      return new RefusedStream(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          fmt::format("too many ModelStreamInfer streams open (the server allows {})",
                      stream_slots_.max)));
    }
    return new StreamReactor(manager_, &stream_slots_, max_stream_pending_, budget_.get());
  }

  ServerUnaryReactor* ModelConfig(CallbackServerContext* ctx, const pb::ModelConfigRequest* req,
                                  pb::ModelConfigResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kModelConfig)) return r;
    auto version = ParseGrpcVersion(req->version());
    if (!version.ok()) return Done(ctx, version.status());
    auto config = manager_->GetConfig(req->name(), *version);
    if (!config.ok()) return Done(ctx, config.status());
    res->mutable_config()->CopyFrom(**config);
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* ModelStatistics(CallbackServerContext* ctx,
                                      const pb::ModelStatisticsRequest* req,
                                      pb::ModelStatisticsResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kStatistics)) return r;
    auto version = ParseGrpcVersion(req->version());
    if (!version.ok()) return Done(ctx, version.status());
    auto stats = manager_->GetStatistics(req->name(), *version);
    if (!req->name().empty() && stats.empty()) {
      return Done(ctx, NotFound("Request for unknown model: '{}' is not found", req->name()));
    }
    for (const auto& s : stats) {
      auto* m = res->add_model_stats();
      m->set_name(s.name);
      m->set_version(std::to_string(s.version));
      m->set_last_inference(s.last_inference_ms);
      m->set_inference_count(s.inference_count);
      m->set_execution_count(s.execution_count);
      auto* is = m->mutable_inference_stats();
      FillDuration(s.success, is->mutable_success());
      FillDuration(s.fail, is->mutable_fail());
      FillDuration(s.queue, is->mutable_queue());
      FillDuration(s.compute_input, is->mutable_compute_input());
      FillDuration(s.compute_infer, is->mutable_compute_infer());
      FillDuration(s.compute_output, is->mutable_compute_output());
      is->mutable_cache_hit();
      is->mutable_cache_miss();
      for (const auto& b : s.batch_stats) {
        auto* bs = m->add_batch_stats();
        bs->set_batch_size(static_cast<uint64_t>(b.batch_size));
        FillDuration(b.compute_input, bs->mutable_compute_input());
        FillDuration(b.compute_infer, bs->mutable_compute_infer());
        FillDuration(b.compute_output, bs->mutable_compute_output());
      }
    }
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* ctx,
                                      const pb::RepositoryIndexRequest* req,
                                      pb::RepositoryIndexResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kModelRepository)) return r;
    for (const auto& e : manager_->Index()) {
      if (req->ready() && e.state != "READY") continue;
      auto* m = res->add_models();
      m->set_name(e.name);
      if (e.version >= 0) m->set_version(std::to_string(e.version));
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* ctx,
                                          const pb::RepositoryModelLoadRequest* req,
                                          pb::RepositoryModelLoadResponse*) override {
    if (auto* r = Refused(ctx, ApiCategory::kModelRepository)) return r;
    auto params = DecodeGrpcLoadRequest(*req);
    if (!params.ok()) return Done(ctx, params.status());
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    manager_->RequestLoad(req->model_name(), std::move(params).value(),
                          [reactor](Status s) { reactor->Finish(ToGrpc(s)); });
    return reactor;
  }

  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* ctx,
                                            const pb::RepositoryModelUnloadRequest* req,
                                            pb::RepositoryModelUnloadResponse*) override {
    if (auto* r = Refused(ctx, ApiCategory::kModelRepository)) return r;
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    manager_->RequestUnload(req->model_name(),
                            [reactor](Status s) { reactor->Finish(ToGrpc(s)); });
    return reactor;
  }

 ServerUnaryReactor* TraceSetting(CallbackServerContext* ctx, const pb::TraceSettingRequest* req,
                                   pb::TraceSettingResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kTrace)) return r;
    TraceSettings update;
    for (const auto& [name, value] : req->settings()) {
      update[name].assign(value.value().begin(), value.value().end());
    }
    if (!update.empty()) {
      if (Status s = ext_->UpdateTrace(req->model_name(), update); !s.ok()) return Done(ctx, s);
    }
    for (const auto& [name, values] : ext_->GetTrace(req->model_name())) {
      auto& out = (*res->mutable_settings())[name];
      for (const auto& v : values) out.add_value(v);
    }
    return Done(ctx, Status::Ok());
  }

  ServerUnaryReactor* LogSettings(CallbackServerContext* ctx, const pb::LogSettingsRequest* req,
                                  pb::LogSettingsResponse* res) override {
    if (auto* r = Refused(ctx, ApiCategory::kLogging)) return r;
    server::LogSettings update;
    for (const auto& [name, value] : req->settings()) {
      using V = pb::LogSettingsRequest::SettingValue;
      switch (value.parameter_choice_case()) {
        case V::kBoolParam: update[name] = value.bool_param(); break;
        case V::kUint32Param: update[name] = value.uint32_param(); break;
        case V::kStringParam: update[name] = value.string_param(); break;
        default: return Done(ctx, InvalidArgument("log setting '{}' has no value", name));
      }
    }
    if (Status s = ext_->UpdateLog(update); !s.ok()) return Done(ctx, s);
    for (const auto& [name, value] : ext_->GetLog()) {
      auto& out = (*res->mutable_settings())[name];
      if (const bool* b = std::get_if<bool>(&value)) out.set_bool_param(*b);
      else if (const uint32_t* u = std::get_if<uint32_t>(&value)) out.set_uint32_param(*u);
      else out.set_string_param(std::get<std::string>(value));
    }
    return Done(ctx, Status::Ok());
  }

 private:
  // The refusal message when `category` is restricted and the call lacks its metadata.
  std::optional<std::string> CheckRestricted(CallbackServerContext* ctx, ApiCategory category) {
    if (restricted_.Find(category) == nullptr) return std::nullopt;
    std::string value;
    return restricted_.Check(category, [&](std::string_view name) -> const std::string* {
      const auto& md = ctx->client_metadata();
      auto it = md.find(grpc::string_ref(name.data(), name.size()));
      if (it == md.end()) return nullptr;
      value.assign(it->second.data(), it->second.size());
      return &value;
    });
  }

  // nullptr when the call may proceed; else its reactor, finished with PERMISSION_DENIED.
  ServerUnaryReactor* Refused(CallbackServerContext* ctx, ApiCategory category) {
    auto denied = CheckRestricted(ctx, category);
    if (!denied) return nullptr;
    ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, *denied));
    return r;
  }

  ModelManager* manager_;
  ServerExtensions* ext_;
  const RestrictedApi restricted_;
  StreamSlots stream_slots_;
  const int max_stream_pending_;
  const std::shared_ptr<ByteBudget> budget_;
};

Status ValidateOptions(const GrpcServerOptions& o) {
  if (o.max_concurrent_streams < 1) {
    return InvalidArgument("grpc: max_concurrent_streams must be >= 1");
  }
  if (o.max_streams < 1) return InvalidArgument("grpc: max_streams must be >= 1");
  if (o.max_stream_pending_responses < 1) {
    return InvalidArgument("grpc: max_stream_pending_responses must be >= 1");
  }
  if (o.max_connection_idle.count() < 0) return InvalidArgument("grpc: max_connection_idle < 0");
  return Status::Ok();
}

// The channel arguments behind GrpcServerOptions' limits (all exist in Debian's gRPC 1.51).
void ApplyLimits(const GrpcServerOptions& o, grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, o.http2_bdp_probe ? 1 : 0);
  if (o.max_connection_idle.count() > 0) {
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_IDLE_MS,
        static_cast<int>(std::min<int64_t>(o.max_connection_idle.count(), INT32_MAX)));
  }
  // gRPC 1.51's decompression filter inflates the whole message and only then checks
  // GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH (measured: 796 KiB of gzip -> 882 MiB peak RSS, then
  // "Received message larger than max"), so no size limit bounds a gzip bomb. With only
  // `identity` enabled, a gzip/deflate message is refused (UNIMPLEMENTED) before it is inflated.
  if (!o.accept_compressed_requests) {
    builder.AddChannelArgument(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET,
                               1 << GRPC_COMPRESS_NONE);
  }
}

}  // namespace

struct GrpcServer::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool stopped = false;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcServer::~GrpcServer() { Stop(); }
uint16_t GrpcServer::port() const { return static_cast<uint16_t>(impl_->port); }

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                        ModelManager* manager,
                                                        ServerExtensions* extensions) {
  static ServerExtensions defaults;
  // Debian's Abseil is built without NDEBUG, so absl::Mutex keeps its deadlock detector on: every
  // lock updates a global lock-order graph (GraphCycles), a visible share of gRPC's per-call cost.
  // It is a debugging aid; the server turns it off (process-wide; gRPC is its only user here).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto impl = std::make_unique<Impl>();
  RETURN_IF_ERROR(ValidateOptions(options));
  impl->service = std::make_unique<Service>(
      manager, extensions != nullptr ? extensions : &defaults, options);
  grpc::ServerBuilder builder;
  std::string host = options.host;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6 literal
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls->root_pem;
    ssl.pem_key_cert_pairs.push_back({options.tls->key_pem, options.tls->cert_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(fmt::format("{}:{}", host, options.port), credentials, &impl->port);
  const int max_bytes =
      static_cast<int>(std::min<size_t>(options.max_message_bytes, size_t{INT32_MAX}));
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  ApplyLimits(options, builder);
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return Unavailable("grpc: cannot listen on {}:{}{}", options.host, options.port,
                       options.tls ? " (TLS: is the certificate/key pair valid PEM?)" : "");
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

void GrpcServer::Stop() {
  if (impl_ == nullptr || impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
}

}  // namespace inferd::server
