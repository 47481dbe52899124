// The transport side of the server load generator: one interface over KServe v2 HTTP (Boost.Beast,
// keep-alive connections) and gRPC (gRPC++ callback API; unary ModelInfer or ModelStreamInfer), so
// the load drivers don't know which protocol they measure.
//
// Thread-safety: AsyncInfer may be called from any thread, concurrently; completions run on the
// client's I/O threads and must not block. GetMetadata/GetStats are blocking and use their own
// connection, so they can be called while load runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd::loadgen {

// A tensor as KServe v2 names it: datatype "FP32", "INT64", ...; shape with -1 for variable dims.
struct TensorSpec {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
};

struct ModelMetadata {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// One request input: raw little-endian bytes of `shape` elements of `datatype`.
struct InputTensor {
  TensorSpec spec;
  std::string bytes;
};

// Cumulative counters of the model's statistics endpoint (Triton's `inference_stats`).
struct ServerStats {
  uint64_t inference_count = 0;  // rows inferred
  uint64_t execution_count = 0;  // batches run
  uint64_t success_count = 0;
  uint64_t queue_count = 0, queue_ns = 0;
  uint64_t compute_count = 0, compute_ns = 0;  // compute_infer
};

// "http://HOST:PORT" or "grpc://HOST:PORT" (a bare HOST:PORT means HTTP).
struct ServerUrl {
  enum class Protocol { kHttp, kGrpc };
  Protocol protocol = Protocol::kHttp;
  std::string host;
  std::string port;
};
StatusOr<ServerUrl> ParseServerUrl(std::string_view url);

struct ClientOptions {
  ServerUrl url;
  std::string model;
  std::string version;  // "" = the server's choice
  // Most HTTP connections kept open at once; requests beyond it wait in the client (and their
  // latency still counts from their intended send time).
  int max_connections = 256;
  std::chrono::milliseconds timeout{30000};  // per request (unary calls and HTTP)
  // gRPC: channels (separate HTTP/2 connections) requests are spread over, round-robin.
  int grpc_channels = 2;
  // gRPC: ModelStreamInfer instead of unary ModelInfer calls (perf_analyzer --streaming), one
  // bidirectional stream per channel; each request goes to the stream with the fewest in flight.
  // There is no per-request deadline on a stream: `timeout` bounds only metadata and statistics.
  bool grpc_streaming = false;
};

// Error kinds reported to InferCallback, as short stable keys: "" (success), "http_503",
// "grpc_UNAVAILABLE", "connect", "timeout", "io".
using InferCallback = std::function<void(std::string_view error)>;

class InferenceClient {
 public:
  virtual ~InferenceClient() = default;
  virtual StatusOr<ModelMetadata> GetMetadata() = 0;
  virtual StatusOr<ServerStats> GetStats() = 0;
  // Fixes the request every AsyncInfer sends (binary tensors; outputs requested binary).
  virtual Status Prepare(const std::vector<InputTensor>& inputs) = 0;
  // Sends one request; `done` runs exactly once on an I/O thread. Non-blocking.
  virtual void AsyncInfer(InferCallback done) = 0;
  // Waits up to `timeout` for outstanding requests, then stops the I/O threads (outstanding
  // requests after that complete with "io" errors or are dropped). Called by the destructor too.
  virtual void Shutdown(std::chrono::milliseconds timeout) = 0;
};

StatusOr<std::unique_ptr<InferenceClient>> CreateHttpClient(const ClientOptions& options);
StatusOr<std::unique_ptr<InferenceClient>> CreateGrpcClient(const ClientOptions& options);
StatusOr<std::unique_ptr<InferenceClient>> CreateClient(const ClientOptions& options);

// Blocking HTTP GET (its own connection) returning the body of a 200 answer. For metadata,
// statistics and the Prometheus metrics page. `url` is "http://HOST:PORT/PATH".
StatusOr<std::string> HttpGet(std::string_view url, std::chrono::milliseconds timeout);

// Builds the request inputs: each `files` entry "NAME=FILE.npy" supplies that input; the rest get
// random data (floats uniform in [-1, 1), integers in [0, 2), bools 0/1) of the metadata shape,
// with the first -1 dim set to `batch` and other -1 dims to 1 (or the `shapes` override
// "NAME=D1,D2,..."). Unknown names and unsupported datatypes (BYTES) are INVALID_ARGUMENT.
StatusOr<std::vector<InputTensor>> BuildInputs(const ModelMetadata& metadata, int batch,
                                               const std::vector<std::string>& files,
                                               const std::vector<std::string>& shapes,
                                               uint64_t seed);

// Bytes per element of a KServe datatype ("FP32" -> 4); 0 when unknown or BYTES.
size_t KserveDataTypeSize(std::string_view datatype);

}  // namespace inferd::loadgen
