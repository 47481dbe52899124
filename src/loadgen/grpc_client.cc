// KServe v2 gRPC clients on gRPC++'s callback API: a few channels (separate HTTP/2 connections),
// the request built once, no thread waiting per call.
//
// The client shares the machine with the server it measures (2 cores in this project's
// benchmarks), so its own cost per request is kept low: channels use gRPC's minimal stack (no
// census, idle or message-size filters; deadline checks are turned back on, since --timeout-ms
// uses them) and unary calls go through a generic stub with the request serialized once (every
// call sends the same bytes; a ByteBuffer copy shares its slices).
//
// Two ways to send (ClientOptions::grpc_streaming):
//   unary      ModelInfer calls, round-robin over the channels;
//   streaming  ModelStreamInfer, one bidirectional stream per channel (as perf_analyzer
//              --streaming); each request carries a sequence number as its id, which the
//              response echoes, and goes to the stream with the fewest requests in flight.
// First: Abseil (under gRPC) defines GUARDED_BY & co. again without checking; its definitions
// are the same attributes, and a redefinition inside a system header is not diagnosed, while ours
// after Abseil's would be.
#include "common/mutex.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <unordered_map>
#include <vector>

#include <absl/synchronization/mutex.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include "grpc_service.grpc.pb.h"
#include "loadgen/client.h"

namespace inferd::loadgen {

namespace {

namespace pb = inference;
using Stub = pb::GRPCInferenceService::Stub;

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    default: return std::to_string(static_cast<int>(code));
  }
}

std::string ErrorKind(const grpc::Status& s) {
  return s.ok() ? std::string() : "grpc_" + CodeName(s.error_code());
}

// Counts requests in flight so Shutdown can wait for them.
class Outstanding {
 public:
  void Add() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    ++n_;
  }
  void Done() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (--n_ == 0) zero_.NotifyAll();
  }
  // True when none is left by `timeout`.
  bool WaitForNone(std::chrono::milliseconds timeout) EXCLUDES(mu_) {
    Clock& clock = RealClock::Get();
    const Clock::TimePoint deadline = clock.Now() + timeout;
    MutexLock l(&mu_);
    while (n_ > 0 && clock.Now() < deadline) zero_.WaitUntil(&mu_, clock, deadline);
    return n_ == 0;
  }

 private:
  Mutex mu_;
  CondVar zero_;
  int64_t n_ GUARDED_BY(mu_) = 0;
};

// What both clients share: the channels, metadata, statistics and the request.
class GrpcClientBase : public InferenceClient {
 public:
  explicit GrpcClientBase(ClientOptions options) : options_(std::move(options)) {
    // Debian's Abseil is built without NDEBUG, so absl::Mutex (gRPC's lock) keeps its deadlock
    // detector on, updating a global lock-order graph on every lock: a debugging aid that costs
    // the client CPU the server needs. Off for the process, as `inferd serve` does
    // (src/server/grpc_server.cc).
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    const std::string target = options_.url.host + ":" + options_.url.port;
    for (int i = 0; i < std::max(1, options_.grpc_channels); ++i) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
      args.SetInt(GRPC_ARG_ENABLE_DEADLINE_CHECKS, 1);
      // Distinct connections: channels with the same arguments would share one subchannel.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("inferd.loadgen.channel", i);
      channels_.push_back(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
      stubs_.push_back(pb::GRPCInferenceService::NewStub(channels_.back()));
    }
  }

  StatusOr<ModelMetadata> GetMetadata() override {
    ASSIGN_OR_RETURN(auto resp, Blocking<pb::ModelMetadataRequest>("ModelMetadata",
                                                                   &Stub::ModelMetadata));
    auto specs = [](const auto& tensors) {
      std::vector<TensorSpec> out;
      for (const auto& t : tensors) {
        out.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
      }
      return out;
    };
    return ModelMetadata{specs(resp.inputs()), specs(resp.outputs())};
  }

  StatusOr<ServerStats> GetStats() override {
    ASSIGN_OR_RETURN(auto resp, Blocking<pb::ModelStatisticsRequest>("ModelStatistics",
                                                                     &Stub::ModelStatistics));
    ServerStats out;
    for (const auto& m : resp.model_stats()) {
      out.inference_count += m.inference_count();
      out.execution_count += m.execution_count();
      const auto& is = m.inference_stats();
      out.success_count += is.success().count();
      out.queue_count += is.queue().count();
      out.queue_ns += is.queue().ns();
      out.compute_count += is.compute_infer().count();
      out.compute_ns += is.compute_infer().ns();
    }
    return out;
  }

  Status Prepare(const std::vector<InputTensor>& inputs) override {
    request_.Clear();
    request_.set_model_name(options_.model);
    request_.set_model_version(options_.version);
    for (const auto& in : inputs) {
      auto* t = request_.add_inputs();
      t->set_name(in.spec.name);
      t->set_datatype(in.spec.datatype);
      for (int64_t d : in.spec.shape) t->add_shape(d);
      request_.add_raw_input_contents(in.bytes);
    }
    return Status::Ok();
  }

 protected:
  // A blocking call about the model (its name and version) on the first channel, with the
  // request timeout.
  template <class Request, class Response>
  StatusOr<Response> Blocking(const char* what, grpc::Status (Stub::*method)(
                                                    grpc::ClientContext*, const Request&, Response*)) {
    Request req;
    req.set_name(options_.model);
    req.set_version(options_.version);
    Response resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    grpc::Status s = (stubs_[0].get()->*method)(&ctx, req, &resp);
    if (!s.ok()) return Unavailable("gRPC {}: {}", what, s.error_message());
    return resp;
  }

  const ClientOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<Stub>> stubs_;
  pb::ModelInferRequest request_;  // read-only while requests run
};

class UnaryGrpcClient final : public GrpcClientBase {
 public:
  explicit UnaryGrpcClient(ClientOptions options) : GrpcClientBase(std::move(options)) {
    for (const auto& channel : channels_) {
      generic_.push_back(std::make_unique<grpc::GenericStub>(channel));
    }
  }
  ~UnaryGrpcClient() override { Shutdown(options_.timeout + std::chrono::seconds(5)); }

  Status Prepare(const std::vector<InputTensor>& inputs) override {
    RETURN_IF_ERROR(GrpcClientBase::Prepare(inputs));
    bool own = false;
    grpc::Status s = grpc::GenericSerialize<grpc::ProtoBufferWriter, pb::ModelInferRequest>(
        request_, &request_bytes_, &own);
    if (!s.ok()) return Internal("cannot serialize the ModelInfer request: {}", s.error_message());
    return Status::Ok();
  }

  void AsyncInfer(InferCallback done) override {
    struct Call {
      grpc::ClientContext ctx;
      grpc::ByteBuffer response;
      InferCallback done;
    };
    auto* call = new Call;
    call->done = std::move(done);
    call->ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    outstanding_.Add();
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed) % generic_.size();
    generic_[i]->UnaryCall(&call->ctx, method_, grpc::StubOptions(), &request_bytes_,
                           &call->response, [this, call](grpc::Status s) {
                             call->done(s.ok() ? ParseError(call->response) : ErrorKind(s));
                             delete call;
                             outstanding_.Done();
                           });
  }

  // gRPC owns its threads; waiting for the outstanding calls is all there is to do. Calls still
  // running at the deadline finish later against this object, so the destructor waits for them
  // up to the request timeout.
  void Shutdown(std::chrono::milliseconds timeout) override { outstanding_.WaitForNone(timeout); }

 private:
  const std::string method_ = "/inference.GRPCInferenceService/ModelInfer";

  // Parses the answer (what a typed stub does, and what a real client pays for).
  static std::string ParseError(grpc::ByteBuffer& bytes) {
    pb::ModelInferResponse response;
    return grpc::GenericDeserialize<grpc::ProtoBufferReader, pb::ModelInferResponse>(&bytes,
                                                                                    &response)
                   .ok()
               ? std::string()
               : std::string("bad_response");
  }

  std::vector<std::unique_ptr<grpc::GenericStub>> generic_;
  grpc::ByteBuffer request_bytes_;  // request_, serialized once by Prepare
  std::atomic<size_t> next_{0};
  Outstanding outstanding_;
};

class StreamGrpcClient;

// One ModelStreamInfer call. A read is always pending; writes go one at a time (gRPC allows one
// outstanding write per stream), the others wait in `queue_`. Deletes itself in OnDone, after
// failing the requests still waiting for an answer.
class Stream final : public grpc::ClientBidiReactor<pb::ModelInferRequest,
                                                    pb::ModelStreamInferResponse> {
 public:
  Stream(StreamGrpcClient& client, Stub& stub);
  // Queues one request, taking `*done` (left alone when it returns false: the stream has ended
  // or is closing, and the caller opens another).
  bool Send(const pb::ModelInferRequest& request, InferCallback* done) EXCLUDES(mu_);
  // No more requests: half-closes once the last answer is in (or at once when idle).
  void Close() EXCLUDES(mu_);
  void Cancel() { ctx_.TryCancel(); }
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

  void OnWriteDone(bool ok) override EXCLUDES(mu_);
  void OnReadDone(bool ok) override EXCLUDES(mu_);
  void OnDone(const grpc::Status& status) override EXCLUDES(mu_);

 private:
  void WriteNextLocked() REQUIRES(mu_);
  void MaybeHalfCloseLocked() REQUIRES(mu_);

  StreamGrpcClient& client_;
  grpc::ClientContext ctx_;
  pb::ModelStreamInferResponse response_;  // the pending read's target
  Mutex mu_;
  pb::ModelInferRequest out_ GUARDED_BY(mu_);  // the write in progress
  std::deque<std::pair<uint64_t, const pb::ModelInferRequest*>> queue_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, InferCallback> waiting_ GUARDED_BY(mu_);  // by request id
  uint64_t next_id_ GUARDED_BY(mu_) = 0;
  bool writing_ GUARDED_BY(mu_) = false;
  bool ended_ GUARDED_BY(mu_) = false;     // a write or read failed: the call is over
  bool closing_ GUARDED_BY(mu_) = false;   // Close was called
  bool half_closed_ GUARDED_BY(mu_) = false;
  std::atomic<int64_t> in_flight_{0};      // sent or queued, not answered
};

class StreamGrpcClient final : public GrpcClientBase {
 public:
  explicit StreamGrpcClient(ClientOptions options)
      : GrpcClientBase(std::move(options)), streams_(stubs_.size(), nullptr) {}
  ~StreamGrpcClient() override { Shutdown(options_.timeout + std::chrono::seconds(5)); }

  void AsyncInfer(InferCallback done) override EXCLUDES(mu_) {
    outstanding_.Add();
    MutexLock l(&mu_);
    // The stream with the fewest requests in flight keeps the load even across connections
    // (a closed loop re-sends on whichever stream answered).
    size_t best = 0;
    for (size_t i = 1; i < streams_.size(); ++i) {
      if (Load(i) < Load(best)) best = i;
    }
    if (streams_[best] == nullptr || !streams_[best]->Send(request_, &done)) {
      streams_[best] = Open(best);
      streams_[best]->Send(request_, &done);
    }
  }

  // Called by a Stream after each request's callback.
  void Answered() { outstanding_.Done(); }

  // Waits for the answers, then half-closes every stream and waits for the calls to end; calls
  // still open at the deadline are cancelled (their requests fail with grpc_CANCELLED).
  void Shutdown(std::chrono::milliseconds timeout) override EXCLUDES(mu_) {
    outstanding_.WaitForNone(timeout);
    {
      MutexLock l(&mu_);
      for (Stream*& s : streams_) {
        if (s != nullptr) s->Close();
        s = nullptr;
      }
    }
    if (!live_.WaitForNone(std::chrono::seconds(5))) {
      MutexLock l(&mu_);
      for (Stream* s : open_) s->Cancel();
    }
    live_.WaitForNone(std::chrono::hours(24));  // a cancelled call ends promptly
  }

  // Called by a Stream as the last thing before it deletes itself.
  void Ended(Stream* s) EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      for (Stream*& slot : streams_) {
        if (slot == s) slot = nullptr;
      }
      std::erase(open_, s);
    }
    live_.Done();
  }

 private:
  int64_t Load(size_t i) REQUIRES(mu_) {
    return streams_[i] == nullptr ? 0 : streams_[i]->in_flight();
  }
  Stream* Open(size_t i) REQUIRES(mu_) {
    live_.Add();
    auto* s = new Stream(*this, *stubs_[i]);
    open_.push_back(s);
    return s;
  }

  Mutex mu_;
  std::vector<Stream*> streams_ GUARDED_BY(mu_);  // per channel: the stream taking requests
  std::vector<Stream*> open_ GUARDED_BY(mu_);     // every stream not yet ended
  Outstanding outstanding_;                       // requests
  Outstanding live_;                              // streams
};

Stream::Stream(StreamGrpcClient& client, Stub& stub) : client_(client) {
  stub.async()->ModelStreamInfer(&ctx_, this);
  StartRead(&response_);
  StartCall();
}

bool Stream::Send(const pb::ModelInferRequest& request, InferCallback* done) {
  MutexLock l(&mu_);
  if (ended_ || closing_) return false;
  const uint64_t id = next_id_++;
  waiting_.emplace(id, std::move(*done));
  queue_.emplace_back(id, &request);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  if (!writing_) WriteNextLocked();
  return true;
}

void Stream::WriteNextLocked() {
  if (queue_.empty() || ended_) return;
  out_ = *queue_.front().second;
  out_.set_id(std::to_string(queue_.front().first));
  queue_.pop_front();
  writing_ = true;
  StartWrite(&out_);
}

void Stream::Close() {
  MutexLock l(&mu_);
  closing_ = true;
  MaybeHalfCloseLocked();
}

void Stream::MaybeHalfCloseLocked() {
  if (closing_ && !half_closed_ && !ended_ && !writing_ && waiting_.empty()) {
    half_closed_ = true;
    StartWritesDone();  // the server then finishes the call and the pending read fails
  }
}

void Stream::OnWriteDone(bool ok) {
  MutexLock l(&mu_);
  writing_ = false;
  if (!ok) {
    ended_ = true;  // OnDone follows and fails what is waiting
    return;
  }
  WriteNextLocked();
  MaybeHalfCloseLocked();
}

void Stream::OnReadDone(bool ok) {
  if (!ok) return;  // the call is over; OnDone follows
  const std::string error = response_.error_message().empty() ? "" : "stream_error";
  const uint64_t id = std::strtoull(response_.infer_response().id().c_str(), nullptr, 10);
  InferCallback done;
  {
    MutexLock l(&mu_);
    auto it = waiting_.find(id);
    if (it != waiting_.end()) {
      done = std::move(it->second);
      waiting_.erase(it);
      in_flight_.fetch_sub(1, std::memory_order_relaxed);
    }
    MaybeHalfCloseLocked();
  }
  StartRead(&response_);
  if (done) {
    done(error);  // may Send again, so not under mu_
    client_.Answered();
  }
}

void Stream::OnDone(const grpc::Status& status) {
  std::unordered_map<uint64_t, InferCallback> failed;
  {
    MutexLock l(&mu_);
    ended_ = true;
    failed.swap(waiting_);
  }
  // The callbacks may send again: Send refuses (ended_) and AsyncInfer opens another stream.
  const std::string error = status.ok() ? std::string("io") : ErrorKind(status);
  for (auto& [id, done] : failed) {
    done(error);
    client_.Answered();
  }
  client_.Ended(this);  // the client may be destroyed from here on
  delete this;
}

}  // namespace

StatusOr<std::unique_ptr<InferenceClient>> CreateGrpcClient(const ClientOptions& options) {
  if (options.grpc_channels < 1) {
    return InvalidArgument("--grpc-channels must be at least 1, got {}", options.grpc_channels);
  }
  if (options.grpc_streaming) return std::unique_ptr<InferenceClient>(new StreamGrpcClient(options));
  return std::unique_ptr<InferenceClient>(new UnaryGrpcClient(options));
}

}  // namespace inferd::loadgen
