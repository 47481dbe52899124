// grpc_load: a closed-loop load generator for KServe v2 ModelInfer over gRPC (a small `ghz`,
// which Debian does not package). Keeps --concurrency unary calls in flight over --channels
// connections, for --seconds after --warmup-seconds, and prints a summary line:
//
//   GRPC_JSON {"requests": N, "seconds": S, "rps": R, "p50_us": ..., "p90_us": ..., "p99_us": ...,
//              "max_us": ..., "errors": E, "first_error": "..."}
//
// The request is an FP32 [1, 16] tensor named --input (raw_input_contents, as tritonclient sends
// it). Built by bench/serving/build_grpc_load.sh against the protos the main build generates.
//
//   grpc_load --target 127.0.0.1:8001 --model identity --concurrency 64 --seconds 10
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpc_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace pb = inference;

struct Options {
  std::string target = "127.0.0.1:8001";
  std::string model = "identity";
  std::string input = "x";
  int concurrency = 64;
  int channels = 4;
  int threads = 1;
  double seconds = 10;
  double warmup_seconds = 1;
};

struct Call {
  grpc::ClientContext ctx;
  pb::ModelInferResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::ModelInferResponse>> reader;
  Clock::time_point start;
  int channel = 0;
};

struct Worker {
  grpc::CompletionQueue cq;
  std::vector<int64_t> latencies_us;  // measured phase only
  int64_t errors = 0;
  std::string first_error;
};

void Usage() {
  std::fprintf(stderr,
               "usage: grpc_load [--target HOST:PORT] [--model NAME] [--input NAME] "
               "[--concurrency 64] [--channels 4] [--threads 1] [--seconds 10] "
               "[--warmup-seconds 1]\n");
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) Usage();
    std::string v = argv[++i];
    if (a == "--target") o.target = v;
    else if (a == "--model") o.model = v;
    else if (a == "--input") o.input = v;
    else if (a == "--concurrency") o.concurrency = std::atoi(v.c_str());
    else if (a == "--channels") o.channels = std::atoi(v.c_str());
    else if (a == "--threads") o.threads = std::atoi(v.c_str());
    else if (a == "--seconds") o.seconds = std::atof(v.c_str());
    else if (a == "--warmup-seconds") o.warmup_seconds = std::atof(v.c_str());
    else Usage();
  }
  if (o.concurrency < 1 || o.channels < 1 || o.threads < 1 || o.seconds <= 0) Usage();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  pb::ModelInferRequest request;
  request.set_model_name(o.model);
  auto* in = request.add_inputs();
  in->set_name(o.input);
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(16);
  float values[16];
  for (int i = 0; i < 16; ++i) values[i] = static_cast<float>(i);
  request.add_raw_input_contents(reinterpret_cast<const char*>(values), sizeof(values));

  std::vector<std::unique_ptr<pb::GRPCInferenceService::Stub>> stubs;
  for (int c = 0; c < o.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", c);  // distinct args: one TCP connection per channel
    stubs.push_back(pb::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args)));
  }

  std::atomic<bool> measuring{false}, stopping{false};
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < o.threads; ++t) workers.push_back(std::make_unique<Worker>());

  auto issue = [&](Worker& w, int channel) {
    auto* call = new Call;
    call->channel = channel;
    call->start = Clock::now();
    call->reader = stubs[channel]->PrepareAsyncModelInfer(&call->ctx, request, &w.cq);
    call->reader->StartCall();
    call->reader->Finish(&call->response, &call->status, call);
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      Worker& w = *workers[t];
      for (int i = t; i < o.concurrency; i += o.threads) issue(w, i % o.channels);
      int in_flight = (o.concurrency - t + o.threads - 1) / o.threads;
      void* tag;
      bool ok;
      while (in_flight > 0 && w.cq.Next(&tag, &ok)) {
        std::unique_ptr<Call> call(static_cast<Call*>(tag));
        if (measuring.load(std::memory_order_relaxed)) {
          if (!ok || !call->status.ok() || call->response.raw_output_contents_size() != 1) {
            if (w.errors++ == 0) {
              w.first_error = ok ? call->status.error_message() : "completion queue failure";
              if (w.first_error.empty()) w.first_error = "no raw_output_contents";
            }
          } else {
            w.latencies_us.push_back(
                std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - call->start)
                    .count());
          }
        }
        if (stopping.load(std::memory_order_relaxed)) {
          --in_flight;
        } else {
          issue(w, call->channel);
        }
      }
      w.cq.Shutdown();
      while (w.cq.Next(&tag, &ok)) delete static_cast<Call*>(tag);
    });
  }

  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup_seconds));
  measuring = true;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  stopping = true;
  for (auto& th : threads) th.join();

  std::vector<int64_t> all;
  int64_t errors = 0;
  std::string first_error;
  for (auto& w : workers) {
    all.insert(all.end(), w->latencies_us.begin(), w->latencies_us.end());
    errors += w->errors;
    if (first_error.empty()) first_error = w->first_error;
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) -> long long {
    if (all.empty()) return 0;
    return all[std::min(all.size() - 1, static_cast<size_t>(p / 100.0 * all.size()))];
  };
  for (char& c : first_error) {
    if (c == '"' || c == '\\' || c < 0x20) c = '\'';
  }
  std::printf(
      "GRPC_JSON {\"requests\": %zu, \"seconds\": %.3f, \"rps\": %.1f, \"p50_us\": %lld, "
      "\"p90_us\": %lld, \"p99_us\": %lld, \"max_us\": %lld, \"errors\": %lld, "
      "\"first_error\": \"%s\"}\n",
      all.size(), elapsed, all.size() / elapsed, pct(50), pct(90), pct(99),
      all.empty() ? 0LL : static_cast<long long>(all.back()), static_cast<long long>(errors),
      first_error.substr(0, 200).c_str());
  return errors > 0 && all.empty() ? 1 : 0;
}
