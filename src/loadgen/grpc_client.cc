// KServe v2 gRPC client on gRPC++'s callback API: a few channels (separate HTTP/2 connections,
// round-robin), the request built once with raw_input_contents, no thread waiting per call.
#include <atomic>
#include <condition_variable>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "grpc_service.grpc.pb.h"
#include "loadgen/client.h"

namespace inferd::loadgen {

namespace {

constexpr int kChannels = 2;

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

class GrpcClient final : public InferenceClient {
 public:
  explicit GrpcClient(ClientOptions options) : options_(std::move(options)) {
    const std::string target = options_.url.host + ":" + options_.url.port;
    for (int i = 0; i < kChannels; ++i) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      // Distinct connections: channels with the same arguments would share one subchannel.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("inferd.loadgen.channel", i);
      auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
      stubs_.push_back(inference::GRPCInferenceService::NewStub(channel));
    }
  }
  ~GrpcClient() override { Shutdown(options_.timeout + std::chrono::seconds(5)); }

  StatusOr<ModelMetadata> GetMetadata() override {
    inference::ModelMetadataRequest req;
    req.set_name(options_.model);
    req.set_version(options_.version);
    inference::ModelMetadataResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    grpc::Status s = stubs_[0]->ModelMetadata(&ctx, req, &resp);
    if (!s.ok()) return Unavailable("gRPC ModelMetadata: {}", s.error_message());
    ModelMetadata md;
    for (const auto& t : resp.inputs()) {
      md.inputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    }
    for (const auto& t : resp.outputs()) {
      md.outputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    }
    return md;
  }

  StatusOr<ServerStats> GetStats() override {
    inference::ModelStatisticsRequest req;
    req.set_name(options_.model);
    req.set_version(options_.version);
    inference::ModelStatisticsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    grpc::Status s = stubs_[0]->ModelStatistics(&ctx, req, &resp);
    if (!s.ok()) return Unavailable("gRPC ModelStatistics: {}", s.error_message());
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

  void AsyncInfer(InferCallback done) override {
    struct Call {
      grpc::ClientContext ctx;
      inference::ModelInferResponse response;
      InferCallback done;
    };
    auto* call = new Call;
    call->done = std::move(done);
    call->ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    outstanding_.fetch_add(1);
    const size_t i = next_.fetch_add(1) % stubs_.size();
    stubs_[i]->async()->ModelInfer(&call->ctx, &request_, &call->response,
                                   [this, call](grpc::Status s) {
                                     std::string error;
                                     if (!s.ok()) error = "grpc_" + CodeName(s.error_code());
                                     call->done(error);
                                     delete call;
                                     if (outstanding_.fetch_sub(1) == 1) {
                                       std::lock_guard<std::mutex> l(mu_);
                                       cv_.notify_all();
                                     }
                                   });
  }

  // gRPC owns its threads; waiting for the outstanding calls is all there is to do. Calls still
  // running at the deadline finish later against this object, so the destructor waits for them
  // up to the request timeout.
  void Shutdown(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, timeout, [&] { return outstanding_.load() == 0; });
  }

 private:
  const ClientOptions options_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  inference::ModelInferRequest request_;  // read-only while calls run
  std::atomic<size_t> next_{0};
  std::atomic<int64_t> outstanding_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace

StatusOr<std::unique_ptr<InferenceClient>> CreateGrpcClient(const ClientOptions& options) {
  return std::unique_ptr<InferenceClient>(std::make_unique<GrpcClient>(options));
}

}  // namespace inferd::loadgen
