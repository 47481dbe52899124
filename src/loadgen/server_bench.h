// `inferd bench --url ...`: a load generator for KServe v2 servers (inferd serve, Triton), in the
// class of Triton's perf_analyzer.
//
//   inferd bench --url http://127.0.0.1:8000 --model resnet50 --concurrency-range 1:8:1
//                --json points.json --plot chart.svg
//   inferd bench --url grpc://127.0.0.1:8001 --model dlrm --request-rate-range 100:400:100
//   inferd bench --url http://127.0.0.1:8000 --model dlrm --concurrency-range 8 --duration 30m
//                --metrics-url http://127.0.0.1:8002/metrics          (soak)
//
// Each load level runs in windows of --measurement-interval-ms; a level is accepted when the last
// three windows agree (throughput and average latency within --stability-percentage) or after
// --max-trials windows (then reported with "stable": false). The reported numbers merge the last
// three windows; --warmup-ms runs the load first without counting it. Open-loop latency counts
// from each request's intended send time (see load_driver.h). Server-side queue and compute times
// are deltas of the model's statistics over the measured windows, averaged per request.
//
// gRPC sends unary ModelInfer calls over --grpc-channels connections, or with --streaming
// ModelStreamInfer requests over one stream per connection (perf_analyzer --streaming):
//   inferd bench --url grpc://127.0.0.1:8001 --model identity --concurrency-range 64
//                --grpc-channels 4 --streaming
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/status.h"
#include "loadgen/report.h"

namespace inferd::loadgen {

// The `inferd bench --url` flags (src/tools/bench_command.cc registers them; the defaults here
// are the documented ones).
struct ServerBenchOptions {
  std::string url;                // http://HOST:PORT or grpc://HOST:PORT
  std::string model;
  std::string version;            // "" = server's choice
  std::string concurrency_range;  // "A:B:STEP"; default "1" when no request rate is given
  std::string request_rate_range; // "A:B:STEP" requests/s (open loop)
  std::string distribution = "poisson";
  int batch = 1;                         // rows per request (the first variable dim)
  std::vector<std::string> inputs;       // NAME=FILE.npy
  std::vector<std::string> shapes;       // NAME=D1,D2,... for variable dims
  bool random = true;                    // the default; --random states it explicitly
  int warmup_ms = 0;                     // load before each level's first window, not counted
  int measurement_interval_ms = 5000;
  double stability_percentage = 10;
  int max_trials = 10;                   // windows per level at most (>= 3)
  std::string json_path, csv_path, plot_path;
  std::string duration;                  // soak mode: "30m"
  std::string metrics_url;               // http://HOST:PORT/metrics, for server CPU and RSS
  int max_connections = 256;             // HTTP connection pool bound
  int grpc_channels = 2;                 // gRPC connections (ClientOptions::grpc_channels)
  bool streaming = false;                // gRPC ModelStreamInfer, a stream per channel
  int timeout_ms = 30000;                // per request
  uint64_t seed = 1;
  bool quiet = false;                    // no progress lines
};

// Runs the sweep (or soak), prints a table to `out`, progress to `err`, writes the files asked
// for. Fails on bad options, an unreachable server or a level where every request failed.
Status RunServerBench(const ServerBenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace inferd::loadgen
