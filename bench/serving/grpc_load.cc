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
//
// Channels use gRPC's minimal stack and unary calls send a request serialized once (see main):
// the client shares the 2 cores with the server, so its own cost per call is kept low.
//
// --streams N uses ModelStreamInfer instead (as perf_analyzer --streaming does): N bidirectional
// streams, one per channel, carrying --concurrency requests in flight between them.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

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
  int streams = 0;  // > 0: ModelStreamInfer over this many streams
  double seconds = 10;
  double warmup_seconds = 1;
};

struct Call {
  grpc::ClientContext ctx;
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> reader;
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
               "[--concurrency 64] [--channels 4] [--threads 1] [--streams 0] [--seconds 10] "
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
    else if (a == "--streams") o.streams = std::atoi(v.c_str());
    else if (a == "--seconds") o.seconds = std::atof(v.c_str());
    else if (a == "--warmup-seconds") o.warmup_seconds = std::atof(v.c_str());
    else Usage();
  }
  if (o.concurrency < 1 || o.channels < 1 || o.threads < 1 || o.streams < 0 || o.seconds <= 0) {
    Usage();
  }
  return o;
}

int Report(std::vector<int64_t>& all, double elapsed, int64_t errors, std::string first_error) {
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

// Whether a serialized ModelInferResponse carries exactly one raw output (the check a typed stub
// would do after parsing; parsing here costs the same, but only the response is parsed).
bool HasOneRawOutput(grpc::ByteBuffer& bytes) {
  pb::ModelInferResponse response;
  return grpc::GenericDeserialize<grpc::ProtoBufferReader, pb::ModelInferResponse>(&bytes,
                                                                                  &response)
             .ok() &&
         response.raw_output_contents_size() == 1;
}

// One bidirectional stream: a read is always pending; writes go one at a time (gRPC allows one
// outstanding write per stream). Requests carry their sequence number as id, for latency.
struct Stream {
  enum Op { kStart, kRead, kWrite, kWritesDone, kFinish };
  struct Tag {
    Stream* stream;
    Op op;
  };
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<pb::ModelInferRequest, pb::ModelStreamInferResponse>>
      rw;
  pb::ModelStreamInferResponse response;
  pb::ModelInferRequest out;
  grpc::Status status;
  Tag tags[5] = {{this, kStart}, {this, kRead}, {this, kWrite}, {this, kWritesDone},
                 {this, kFinish}};
  int to_send = 0;    // requests waiting for the write slot
  int in_flight = 0;  // sent, not answered
  bool writing = false;
  bool started = false;
  bool closing = false;
  uint64_t next_id = 0;
  std::vector<Clock::time_point> sent;  // by id
};

int RunStreams(const Options& o, const pb::ModelInferRequest& request,
               std::vector<std::unique_ptr<pb::GRPCInferenceService::Stub>>& stubs) {
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < o.streams; ++i) {
    auto s = std::make_unique<Stream>();
    s->to_send = o.concurrency / o.streams + (i < o.concurrency % o.streams ? 1 : 0);
    s->rw = stubs[i % stubs.size()]->PrepareAsyncModelStreamInfer(&s->ctx, &cq);
    s->rw->StartCall(&s->tags[Stream::kStart]);
    streams.push_back(std::move(s));
  }
  std::atomic<bool> measuring{false}, stopping{false};
  std::vector<int64_t> latencies_us;
  int64_t errors = 0;
  std::string first_error;
  auto pump = [&](Stream& s) {
    if (!s.started || s.writing || s.to_send == 0 || s.closing) return;
    s.out = request;
    s.out.set_id(std::to_string(s.next_id));
    if (s.sent.size() <= s.next_id) s.sent.resize(s.next_id + 1);
    s.sent[s.next_id++] = Clock::now();
    --s.to_send;
    ++s.in_flight;
    s.writing = true;
    s.rw->Write(s.out, &s.tags[Stream::kWrite]);
  };
  auto close = [&](Stream& s) {
    if (s.closing) return;
    s.closing = true;
    s.rw->WritesDone(&s.tags[Stream::kWritesDone]);
  };
  std::thread loop([&] {
    int open = o.streams;
    void* raw;
    bool ok;
    while (open > 0 && cq.Next(&raw, &ok)) {
      auto* tag = static_cast<Stream::Tag*>(raw);
      Stream& s = *tag->stream;
      switch (tag->op) {
        case Stream::kStart:
          s.started = ok;
          if (!ok) {
            s.closing = true;
            s.rw->Finish(&s.status, &s.tags[Stream::kFinish]);
            break;
          }
          s.rw->Read(&s.response, &s.tags[Stream::kRead]);
          pump(s);
          break;
        case Stream::kWrite:
          s.writing = false;
          if (stopping.load() && s.in_flight == 0) close(s);
          pump(s);
          break;
        case Stream::kRead: {
          if (!ok) {  // the server ended the stream
            s.rw->Finish(&s.status, &s.tags[Stream::kFinish]);
            break;
          }
          --s.in_flight;
          const std::string& err = s.response.error_message();
          if (measuring.load(std::memory_order_relaxed)) {
            if (!err.empty() || s.response.infer_response().raw_output_contents_size() != 1) {
              if (errors++ == 0) first_error = err.empty() ? "no raw_output_contents" : err;
            } else {
              const uint64_t id =
                  std::strtoull(s.response.infer_response().id().c_str(), nullptr, 10);
              if (id < s.sent.size()) {
                latencies_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                                           Clock::now() - s.sent[id])
                                           .count());
              }
            }
          }
          if (!stopping.load(std::memory_order_relaxed)) ++s.to_send;
          s.rw->Read(&s.response, &s.tags[Stream::kRead]);
          if (stopping.load() && s.in_flight == 0 && !s.writing) close(s);
          pump(s);
          break;
        }
        case Stream::kWritesDone:
          break;  // the pending Read returns !ok once the server finishes the call
        case Stream::kFinish:
          if (!s.status.ok() && errors++ == 0) first_error = s.status.error_message();
          --open;
          break;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup_seconds));
  measuring = true;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  stopping = true;
  loop.join();
  cq.Shutdown();
  void* raw;
  bool ok;
  while (cq.Next(&raw, &ok)) {
  }
  return Report(latencies_us, elapsed, errors, first_error);
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

  // The client's own cost shares the machine with the server, so it is kept small: channels use
  // gRPC's minimal stack (no client-side deadline, compression or census filters; the load
  // generator uses none of them), and unary calls go through a generic stub with the request
  // serialized once (every call sends the same bytes; a ByteBuffer copy shares its slices).
  std::vector<std::unique_ptr<pb::GRPCInferenceService::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::GenericStub>> generic;
  for (int c = 0; c < o.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", c);  // distinct args: one TCP connection per channel
    args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    auto channel = grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args);
    stubs.push_back(pb::GRPCInferenceService::NewStub(channel));
    generic.push_back(std::make_unique<grpc::GenericStub>(channel));
  }

  if (o.streams > 0) return RunStreams(o, request, stubs);

  grpc::ByteBuffer request_bytes;
  {
    bool own = false;
    if (!grpc::GenericSerialize<grpc::ProtoBufferWriter, pb::ModelInferRequest>(
             request, &request_bytes, &own)
             .ok()) {
      std::fprintf(stderr, "grpc_load: cannot serialize the request\n");
      return 1;
    }
  }
  const std::string method = "/inference.GRPCInferenceService/ModelInfer";

  std::atomic<bool> measuring{false}, stopping{false};
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < o.threads; ++t) workers.push_back(std::make_unique<Worker>());

  auto issue = [&](Worker& w, int channel) {
    auto* call = new Call;
    call->channel = channel;
    call->start = Clock::now();
    call->reader = generic[channel]->PrepareUnaryCall(&call->ctx, method, request_bytes, &w.cq);
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
          if (!ok || !call->status.ok() || !HasOneRawOutput(call->response)) {
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
  return Report(all, elapsed, errors, first_error);
}
