// Streaming OpenAI completions client for `inferd bench --generate`: POSTs a /v1/completions body
// with "stream": true over HTTP/1.1 (Boost.Beast, as the KServe client in http_client.cc) and
// times the server-sent events of the answer as they arrive: time to the first text chunk, the
// gaps between text chunks (inter-token latency), the end. Reads bodies that are chunked,
// length-delimited or delimited by the server closing the connection, so any OpenAI-compatible
// server (inferd serve, vLLM, llama.cpp's server, the naive PyTorch peer) can be driven.
//
// One connection per request (opened at send, closed at the end): a streamed completion holds
// its connection for its whole generation anyway, and open-loop arrivals must not wait for a free
// one. Thread-safety: AsyncComplete may be called from any thread; `done` runs on the client's
// single I/O thread and must not block.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "loadgen/client.h"
#include "loadgen/gen_stats.h"

namespace inferd::loadgen {

struct GenClientOptions {
  ServerUrl url;  // http only
  std::string path = "/v1/completions";
  std::chrono::milliseconds timeout{600000};  // whole request, send to last byte
};

class CompletionClient {
 public:
  virtual ~CompletionClient() = default;
  // Sends `body`; `done` gets the request's record exactly once (ok, or the error kind: "connect",
  // "timeout", "io", "http_NNN" with the server's message, "server: MESSAGE" for an error event,
  // "bad_stream" for data that is not a completion chunk, "no_tokens" for a stream without text).
  // `asked_tokens`/`prompt_tokens` are copied into the record (usage counts override them).
  virtual void AsyncComplete(std::string body, int prompt_tokens, int asked_tokens,
                             std::function<void(GenRequestRecord)> done) = 0;
  // Waits up to `timeout` for outstanding requests, then stops the I/O thread.
  virtual void Shutdown(std::chrono::milliseconds timeout) = 0;
};

StatusOr<std::unique_ptr<CompletionClient>> CreateCompletionClient(const GenClientOptions& options);

}  // namespace inferd::loadgen
