// A small asynchronous HTTP/1.1 server on Boost.Beast: keep-alive, a fixed pool of I/O threads,
// a request-size limit, and a handler that may answer later from any thread.
//
//   HttpServerOptions opts;
//   opts.port = 0;  // any free port
//   ASSIGN_OR_RETURN(auto server, HttpServer::Start(opts, [](HttpRequest req, HttpResponder reply) {
//     reply(HttpReply{200, "text/plain", "hello"});
//   }));
//   spdlog::info("listening on {}", server->port());
//
// The server knows nothing about KServe; kserve_http.h routes requests. One request per
// connection is in flight at a time (the next is read once the reply is written), so replies
// keep request order. Bodies over `max_request_bytes` get 413 with a JSON error and the
// connection is closed; a client that sends `Expect: 100-continue` gets the 100 first.
//
// Limits (HttpServerOptions; docs/serving.md "Limits"): a connection beyond max_connections is
// accepted, answered 503 (Connection: close, before its request is read) and closed, so a client
// learns why instead of hanging in the listen backlog; the same happens when the process is out
// of file descriptors (EMFILE/ENFILE: a spare descriptor is freed to accept and shed the
// connection, and the accept loop backs off 5-500 ms instead of spinning). A request head must
// arrive within header_timeout, its body within body_timeout, and a keep-alive connection may
// wait idle_timeout for its next request; past that the connection is closed. Protocol errors
// get 400/414/431/501 before the connection closes (http_protocol.h). Request bodies count
// against a budget of bytes in flight (max_inflight_bytes, or a budget shared with other
// servers) from the moment their size is known until the handler drops the body: a request
// that does not fit gets 503 at once, before anything is buffered.
//
// Streaming: a reply with `stream` set sends its headers with `Transfer-Encoding: chunked`, then
// each HttpStream::Write as one chunk as soon as the socket takes it (server-sent events), and
// closes the connection after HttpStream::Finish. While the body streams the connection watches
// the socket: a client that disconnects cancels the stream (HttpStream::SetOnCancel), so the
// producer can stop the work behind it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <chrono>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace inferd::server {

class ByteBudget;  // http_protocol.h

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // address to bind (IPv4 or IPv6 literal)
  uint16_t port = 8000;            // 0 = let the OS pick; see HttpServer::port()
  int io_threads = 2;              // threads running the event loop (>= 1)
  size_t max_request_bytes = size_t{64} << 20;  // body limit; larger bodies get 413

  // Limits (see the file comment). Timeouts must be > 0; limits >= 1.
  size_t max_connections = 1024;                 // open connections; beyond: 503 and close
  std::chrono::milliseconds header_timeout{std::chrono::seconds(30)};  // accept/first byte -> head
  std::chrono::milliseconds body_timeout{std::chrono::seconds(60)};    // head -> whole body
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};    // keep-alive wait; also a
                                                                       // reply the client won't read
  size_t max_header_bytes = 64 * 1024;           // request line + fields; beyond: 431 (414)
  size_t max_header_count = 100;                 // header fields; beyond: 431
  size_t max_uri_bytes = 8 * 1024;               // request target; beyond: 414
  size_t max_inflight_bytes = size_t{512} << 20;  // bodies read or being served; beyond: 503
  // When set, used instead of a budget of max_inflight_bytes of this server's own (to share one
  // budget between the KServe and metrics servers, or with gRPC).
  std::shared_ptr<ByteBudget> inflight_budget;
  // Lower-case names of further request headers handed to the handler (HttpRequest::headers),
  // e.g. the restricted-API keys (restricted_api.h).
  std::vector<std::string> extra_headers;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // target without the query string
  // Lower-cased header names; only the headers a handler may need are kept.
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<std::string> body;  // never null

  // Value of header `name` (lower-case), or nullptr.
  const std::string* Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

// A reply body written piece by piece (HttpReply::stream). The producer side (Write, Finish,
// SetOnCancel, cancelled) may be called from any thread, before or after the reply is handed to
// the responder: chunks written early wait in the stream. Stopping the server does not cancel
// streams; the producer's Write calls are then dropped.
class HttpStream {
 public:
  // Queues `data` (empty data is ignored) as one chunk. False (and dropped) once the stream was
  // cancelled or finished.
  bool Write(std::string data) EXCLUDES(mu_);
  // Ends the body (the terminating chunk follows the queued ones). Idempotent.
  void Finish() EXCLUDES(mu_);
  // `on_cancel` runs once when the client disconnects (or a write to it fails) before Finish; it
  // runs on an I/O thread and must not block. Called at once if the stream is already cancelled.
  void SetOnCancel(std::function<void()> on_cancel) EXCLUDES(mu_);
  bool cancelled() const EXCLUDES(mu_);

  // The connection's side (http_server.cc). Attach: `wake` is called (from the producer's
  // thread, outside the lock) whenever there is something new to take. Take moves the queued
  // chunks into *out and returns whether Finish was called. Cancel marks the client gone.
  void Attach(std::function<void()> wake) EXCLUDES(mu_);
  bool Take(std::vector<std::string>* out) EXCLUDES(mu_);
  void Cancel() EXCLUDES(mu_);

 private:
  void Wake() EXCLUDES(mu_);

  mutable Mutex mu_;
  std::vector<std::string> pending_ GUARDED_BY(mu_);
  bool finished_ GUARDED_BY(mu_) = false;
  bool cancelled_ GUARDED_BY(mu_) = false;
  std::function<void()> wake_ GUARDED_BY(mu_);
  std::function<void()> on_cancel_ GUARDED_BY(mu_);
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  // When set, runs on the connection's I/O thread just before the reply is written and fills in
  // the fields above. A handler that answers from another thread (a model worker finishing a
  // batch) uses it to move response encoding off that thread, so the I/O threads encode replies
  // in parallel while the worker goes on to the next batch.
  std::function<void(HttpReply*)> render;
  // When set, `body` is ignored and the body is streamed from here (see the file comment).
  std::shared_ptr<HttpStream> stream;
  // Compress the body per the request's Accept-Encoding (gzip/deflate). Only inference replies set
  // it, as Triton compresses only those: clients such as tritonclient's aiohttp one send
  // Accept-Encoding by default yet read every other reply (metadata, config, ...) as plain JSON.
  bool compressible = false;
};

// Must be called exactly once per request, from any thread.
using HttpResponder = std::function<void(HttpReply)>;
// Runs on an I/O thread: must not block (hand long work elsewhere and reply later).
using HttpHandler = std::function<void(HttpRequest, HttpResponder)>;

class HttpServer {
 public:
  // Binds, listens and starts the I/O threads. Fails (UNAVAILABLE) if the address is in use.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                     HttpHandler handler);
  // Stops accepting, closes connections and joins the I/O threads. Replies arriving later are
  // dropped. Idempotent; the destructor calls it.
  void Stop();
  ~HttpServer();

  uint16_t port() const;  // the bound port (useful with port 0)

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd::server
