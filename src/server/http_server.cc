#include "server/http_server.h"

#include <fcntl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <limits>
#include <optional>
#include <thread>

#include "server/http_codec.h"
#include "server/http_compression.h"
#include "server/http_protocol.h"

namespace inferd::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// After a 413 the rest of the upload is read and discarded (so the client sees the reply rather
// than a connection reset), up to this much and this long.
constexpr size_t kMaxDrainBytes = size_t{1} << 30;
constexpr std::chrono::seconds kDrainTimeout{10};

// Headers handed to handlers (lower-case); the rest are not copied.
constexpr const char* kKeptHeaders[] = {"inference-header-content-length", "content-type",
                                        "accept-encoding"};

// The accept loop's wait after it could not accept (out of descriptors): doubling from the first
// to the last while the condition lasts, so a full process costs a few wake-ups a second.
constexpr std::chrono::milliseconds kMinHttpAcceptBackoff{5};
constexpr std::chrono::milliseconds kMaxHttpAcceptBackoff{500};

// The reply to a connection the server will not serve (too many connections, out of
// descriptors), written straight to the socket before its request is read.
const std::string& BusyReply() {
  static const std::string reply = [] {
    const std::string body = JsonError("the server has too many open connections; retry later");
    return "HTTP/1.1 503 Service Unavailable\r\nServer: inferd\r\nContent-Type: "
           "application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  return reply;
}

// Answers `fd` with BusyReply and closes it, never blocking: the reply fits an empty send buffer;
// what the client already sent is read first (up to 64 KiB) so the close does not turn into a
// reset that would discard the reply.
void ShedConnection(int fd) {
  const std::string& reply = BusyReply();
  (void)!::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
}

bool OutOfDescriptors(const beast::error_code& ec) {
  return ec == net::error::no_descriptors || ec.value() == ENFILE ||
         ec == net::error::no_buffer_space || ec == net::error::no_memory;
}

}  // namespace

bool HttpStream::Write(std::string data) {
  if (data.empty()) return !cancelled();
  {
    MutexLock lock(&mu_);
    if (cancelled_ || finished_) return false;
    pending_.push_back(std::move(data));
  }
  Wake();
  return true;
}

void HttpStream::Finish() {
  {
    MutexLock lock(&mu_);
    if (cancelled_ || finished_) return;
    finished_ = true;
  }
  Wake();
}

void HttpStream::SetOnCancel(std::function<void()> on_cancel) {
  {
    MutexLock lock(&mu_);
    if (!cancelled_) {
      on_cancel_ = std::move(on_cancel);
      return;
    }
  }
  on_cancel();
}

bool HttpStream::cancelled() const {
  MutexLock lock(&mu_);
  return cancelled_;
}

void HttpStream::Attach(std::function<void()> wake) {
  {
    MutexLock lock(&mu_);
    wake_ = std::move(wake);
  }
  Wake();
}

bool HttpStream::Take(std::vector<std::string>* out) {
  MutexLock lock(&mu_);
  out->insert(out->end(), std::make_move_iterator(pending_.begin()),
              std::make_move_iterator(pending_.end()));
  pending_.clear();
  return finished_;
}

void HttpStream::Cancel() {
  std::function<void()> on_cancel;
  {
    MutexLock lock(&mu_);
    if (cancelled_ || finished_) return;
    cancelled_ = true;
    pending_.clear();
    wake_ = nullptr;
    on_cancel = std::move(on_cancel_);
  }
  if (on_cancel) on_cancel();
}

void HttpStream::Wake() {
  std::function<void()> wake;
  {
    MutexLock lock(&mu_);
    wake = wake_;
  }
  if (wake) wake();
}

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpProtocolLimits limits;
  std::shared_ptr<ByteBudget> budget;  // request bytes in flight
  std::atomic<size_t> connections{0};  // live Sessions (declared before ioc, which owns them)
  HttpHandler handler;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  // The accept loop's state; only its own chain of handlers touches these.
  net::steady_timer accept_timer{ioc};
  std::chrono::milliseconds accept_backoff{0};
  int spare_fd = -1;  // freed to accept (and shed) a connection when out of descriptors
  std::vector<std::thread> threads;
  std::atomic<bool> stopped{false};
  uint16_t port = 0;

  explicit Impl(const HttpServerOptions& o) : options(o), ioc(std::max(1, o.io_threads)) {
    limits.max_header_bytes = o.max_header_bytes;
    limits.max_header_count = o.max_header_count;
    limits.max_uri_bytes = o.max_uri_bytes;
    budget =
        o.inflight_budget ? o.inflight_budget : std::make_shared<ByteBudget>(o.max_inflight_bytes);
  }
  ~Impl() {
    if (spare_fd >= 0) ::close(spare_fd);
  }
  void Accept();
  void OnAcceptError(const beast::error_code& ec);
  bool ShedOne();  // false: nothing shed (no spare descriptor, or no connection waiting)
};

namespace {

// A request body with its claim on the in-flight budget: they live and die together.
struct LeasedBody {
  ByteLease lease;
  std::string text;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl* server)
      : stream_(std::move(socket)), server_(server) {
    server_->connections.fetch_add(1);
    // Chunked bodies announce their size chunk by chunk: each is claimed before it is read.
    on_chunk_ = [this](std::uint64_t size, beast::string_view, beast::error_code& ec) {
      if (!lease_.Grow(size)) {
        inflight_full_ = true;
        ec = net::error::no_buffer_space;
      }
    };
  }
  ~Session() { server_->connections.fetch_sub(1); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

 private:
  // A new connection's first request, or the next one once its first byte is in: the head must
  // be complete within header_timeout.
  void ReadHeader() {
    reply_encoding_ = HttpEncoding::kIdentity;
    inflight_full_ = false;
    lease_ = ByteLease(server_->budget);
    parser_.emplace();
    // Checked by hand in OnHeader to answer 413 cleanly. (Not boost::none: Beast 1.74 compares
    // the content length against an empty optional and reports body_limit.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    parser_->header_limit(static_cast<std::uint32_t>(std::min<size_t>(
        server_->options.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
    parser_->on_chunk_header(on_chunk_);
    stream_.expires_after(server_->options.header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // Keep-alive: the connection may sit idle_timeout waiting for its next request.
  void WaitForRequest() {
    if (buffer_.size() > 0) return ReadHeader();  // pipelined: already here
    stream_.expires_after(server_->options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close(ec);
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    if (auto err = CheckRequestHead(parser_->get(), server_->limits)) {
      return Refuse(std::move(*err), /*drain=*/true);
    }
    const size_t limit = server_->options.max_request_bytes;
    auto length = parser_->content_length();
    // With Expect: 100-continue the client has not sent the body yet: no need to drain.
    const bool expects = parser_->get()[http::field::expect] == "100-continue";
    if (length && *length > limit) return TooLarge(*length, /*drain=*/!expects);
    if (length && !lease_.Resize(*length)) return Busy(/*drain=*/!expects);
    parser_->body_limit(limit);
    stream_.expires_after(server_->options.body_timeout);
    if (expects) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *cont,
                        [self = shared_from_this(), cont](beast::error_code ec2, size_t) {
                          if (ec2) return self->Close(ec2);
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (inflight_full_) return Busy(/*drain=*/true);
    if (ec == http::error::body_limit) return TooLarge(0, /*drain=*/true);
    if (ec) return OnReadError(ec);
    stream_.expires_never();
    http::request<http::string_body> msg = parser_->release();
    keep_alive_ = msg.keep_alive();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    std::string_view target(msg.target().data(), msg.target().size());
    req.path = std::string(target.substr(0, target.find('?')));
    for (const char* name : kKeptHeaders) {
      auto it = msg.find(name);
      if (it != msg.end()) req.headers.emplace_back(name, std::string(it->value()));
    }
    for (const std::string& name : server_->options.extra_headers) {
      auto it = msg.find(name);
      if (it != msg.end()) req.headers.emplace_back(name, std::string(it->value()));
    }
    // The body and its claim on the in-flight budget live and die together.
    auto holder = std::make_shared<LeasedBody>();
    holder->lease = std::move(lease_);
    holder->text = std::move(msg.body());
    if (!DecodeContentEncoding(msg, holder.get())) return;
    req.body = std::shared_ptr<std::string>(holder, &holder->text);
    if (auto it = msg.find(http::field::accept_encoding); it != msg.end()) {
      reply_encoding_ =
          ChooseResponseEncoding(std::string_view(it->value().data(), it->value().size()));
    }
    HttpResponder reply = [self = shared_from_this()](HttpReply r) {
      net::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable {
        if (r.render) {
          auto render = std::move(r.render);
          render(&r);
        }
        self->Write(std::move(r));
      });
    };
    server_->handler(std::move(req), std::move(reply));
  }

  // Inflates a gzip/deflate body in place (http_compression.h), bounded by the request limit.
  // On failure answers 413 (inflated size over the limit), 400 (corrupt) or 415 (unknown coding)
  // and returns false.
  // The inflated body takes the compressed one's place in the in-flight budget (503 if it does
  // not fit; it is at most max_request_bytes).
  bool DecodeContentEncoding(const http::request<http::string_body>& msg, LeasedBody* body) {
    auto it = msg.find(http::field::content_encoding);
    if (it == msg.end() || body->text.empty()) return true;
    auto encoding = ParseContentEncoding(std::string_view(it->value().data(), it->value().size()));
    StatusOr<std::string> plain = encoding.status();
    if (encoding.ok())
      plain = Decompress(*encoding, body->text, server_->options.max_request_bytes);
    if (plain.ok()) {
      if (!body->lease.Resize(std::max(plain->size(), body->text.size()))) {
        Busy(/*drain=*/false);
        return false;
      }
      body->text = std::move(*plain);
      body->lease.Resize(body->text.size());
      return true;
    }
    const StatusCode code = plain.status().code();
    HttpReply r;
    r.status = code == StatusCode::kResourceExhausted ? 413
               : code == StatusCode::kUnimplemented   ? 415
                                                      : 400;
    r.body = JsonError(plain.status().message());
    if (r.status == 413) keep_alive_ = false;
    Write(std::move(r));
    return false;
  }

  // Compresses a reply body for a client that sent Accept-Encoding gzip/deflate.
  void EncodeReplyBody(HttpReply& r) {
    if (!r.compressible || reply_encoding_ == HttpEncoding::kIdentity || r.body.empty()) return;
    for (const auto& h : r.headers) {
      if (beast::iequals(h.first, "content-encoding")) return;
    }
    auto packed = Compress(reply_encoding_, r.body);
    if (!packed.ok()) return;  // zlib failing: send the body as is
    r.body = std::move(*packed);
    r.headers.emplace_back("Content-Encoding", HttpEncodingName(reply_encoding_));
  }

  // A parse error gets its status (http_protocol.h) before the connection closes; a socket
  // error or timeout just closes.
  void OnReadError(beast::error_code ec) {
    const bool line_parsed = parser_.has_value() && !parser_->get().target().empty();
    auto err = ClassifyReadError(ec, line_parsed, server_->limits);
    if (!err) return Close(ec);
    Refuse(std::move(*err), /*drain=*/true);
  }

  // Answers `err` with Connection: close; `drain`: then reads what the client still sends.
  void Refuse(HttpProtocolError err, bool drain) {
    keep_alive_ = false;
    HttpReply r;
    r.status = err.status;
    r.body = JsonError(err.message);
    if (err.status == 503) r.headers.emplace_back("Retry-After", "1");
    drain_after_write_ = drain;
    Write(std::move(r));
  }

  void Busy(bool drain) {
    Refuse({503, fmt::format("the server has too many request bytes in flight (limit {} bytes); "
                             "retry later",
                             server_->budget->limit())},
           drain);
  }

  void TooLarge(uint64_t length, bool drain) {
    keep_alive_ = false;
    HttpReply r;
    r.status = 413;
    r.body =
        JsonError(length > 0 ? fmt::format("request body of {} bytes exceeds the limit of {} bytes",
                                           length, server_->options.max_request_bytes)
                             : fmt::format("request body exceeds the limit of {} bytes",
                                           server_->options.max_request_bytes));
    drain_after_write_ = drain;
    Write(std::move(r));
  }

  // Serializes the reply by hand into one header string plus the body (no Beast message or
  // serializer: at tens of thousands of small replies a second, its field allocations and buffer
  // sequence machinery were a visible share of the server's CPU).
  void Write(HttpReply r) {
    if (server_->stopped.load()) return;
    if (r.stream) return WriteStreamHead(std::move(r));
    // 1xx, 204 and 304 carry no body and no Content-Length.
    const bool bodiless = r.status < 200 || r.status == 204 || r.status == 304;
    if (!bodiless) EncodeReplyBody(r);
    const auto status = static_cast<http::status>(r.status);
    const beast::string_view reason = http::obsolete_reason(status);
    head_.clear();
    head_.append("HTTP/1.1 ").append(std::to_string(r.status)).append(" ");
    head_.append(reason.data(), reason.size()).append("\r\nServer: inferd\r\n");
    if (!r.content_type.empty())
      head_.append("Content-Type: ").append(r.content_type).append("\r\n");
    for (const auto& [k, v] : r.headers) head_.append(k).append(": ").append(v).append("\r\n");
    if (!bodiless)
      head_.append("Content-Length: ").append(std::to_string(r.body.size())).append("\r\n");
    if (!keep_alive_) head_.append("Connection: close\r\n");
    head_.append("\r\n");
    body_ = bodiless ? std::string() : std::move(r.body);
    stream_.expires_after(server_->options.idle_timeout);
    std::array<net::const_buffer, 2> buffers{net::buffer(head_), net::buffer(body_)};
    net::async_write(stream_, buffers, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->OnWrite(ec);
    });
  }

  void OnWrite(beast::error_code ec) {
    if (ec) return Close(ec);
    if (drain_after_write_) return Drain();
    if (!keep_alive_) return Close({});
    WaitForRequest();
  }

  // Streamed replies: the head, then chunks as the producer queues them (Flush), then the
  // terminating chunk and Connection: close (so no pipelined request has to wait behind the
  // stream, and the watch read below never races the next request's read).
  void WriteStreamHead(HttpReply r) {
    keep_alive_ = false;
    streaming_ = std::move(r.stream);
    r.headers.emplace_back("Transfer-Encoding", "chunked");
    r.headers.emplace_back("Cache-Control", "no-cache");
    head_.clear();
    head_.append("HTTP/1.1 ").append(std::to_string(r.status)).append(" ");
    const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(r.status));
    head_.append(reason.data(), reason.size()).append("\r\nServer: inferd\r\n");
    if (!r.content_type.empty())
      head_.append("Content-Type: ").append(r.content_type).append("\r\n");
    for (const auto& [k, v] : r.headers) head_.append(k).append(": ").append(v).append("\r\n");
    head_.append("Connection: close\r\n\r\n");
    stream_writing_ = true;
    stream_.expires_after(server_->options.idle_timeout);
    net::async_write(stream_, net::buffer(head_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->stream_writing_ = false;
                       if (ec) return self->Close(ec);
                       // idle_timeout bounds a write the client does not read; between writes
                       // the stream waits on the producer (a queued or preempted sequence may
                       // send nothing for minutes), which must not time out the connection.
                       self->stream_.expires_never();
                       std::weak_ptr<Session> weak = self;
                       self->streaming_->Attach([weak] {
                         if (auto s = weak.lock()) {
                           net::post(s->stream_.get_executor(), [s] { s->Flush(); });
                         }
                       });
                       self->WatchForDisconnect();
                     });
  }

  // Writes what the stream queued as HTTP chunks; one write in flight at a time.
  void Flush() {
    if (stream_writing_ || streaming_ == nullptr || stream_done_) return;
    std::vector<std::string> chunks;
    const bool finished = streaming_->Take(&chunks);
    if (chunks.empty() && !finished) return;
    body_.clear();
    for (const auto& c : chunks) {
      body_.append(fmt::format("{:x}\r\n", c.size())).append(c).append("\r\n");
    }
    if (finished) {
      body_.append("0\r\n\r\n");
      stream_done_ = true;
    }
    stream_writing_ = true;
    stream_.expires_after(server_->options.idle_timeout);
    net::async_write(stream_, net::buffer(body_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->stream_writing_ = false;
                       if (ec) return self->Close(ec);
                       if (self->stream_done_) return self->Close({});
                       self->stream_.expires_never();  // as after the head: the next chunk
                                                       // may be minutes away
                       self->Flush();
                     });
  }

  // A read pending while the body streams: the client sends nothing more (Connection: close),
  // so its completion with an error or EOF means the client went away.
  void WatchForDisconnect() {
    if (watch_buffer_.empty()) watch_buffer_.resize(4096);
    stream_.async_read_some(net::buffer(watch_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (self->stream_done_) return;
                              if (ec) return self->Close(ec);
                              self->WatchForDisconnect();  // stray bytes: ignore
                            });
  }

  // Reads and discards what the client still sends, then closes.
  void Drain() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (drain_buffer_.empty()) {
      drain_buffer_.resize(64 * 1024);
      stream_.expires_after(kDrainTimeout);
    }
    stream_.async_read_some(net::buffer(drain_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kMaxDrainBytes) return self->Close({});
                              self->Drain();
                            });
  }

  void Close(beast::error_code ec) {
    if (ec && ec != http::error::end_of_stream && ec != net::error::eof &&
        ec != beast::error::timeout && ec != net::error::operation_aborted &&
        ec != net::error::connection_reset) {
      spdlog::debug("http: closing connection: {}", ec.message());
    }
    // A stream still running loses its client here (no-op once finished).
    if (streaming_ != nullptr) streaming_->Cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  ByteLease lease_;             // the request being read's claim on the in-flight budget
  bool inflight_full_ = false;  // a chunk did not fit the budget
  std::function<void(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_;
  std::string head_, body_;  // the reply being written
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl* server_;
  bool keep_alive_ = true;
  HttpEncoding reply_encoding_ = HttpEncoding::kIdentity;  // from the request's Accept-Encoding
  bool drain_after_write_ = false;
  std::vector<char> drain_buffer_;
  size_t drained_ = 0;
  std::shared_ptr<HttpStream> streaming_;  // the streamed reply, once its head is written
  bool stream_writing_ = false;            // a head or chunk write is in flight
  bool stream_done_ = false;               // the terminating chunk is written or being written
  std::vector<char> watch_buffer_;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopped.load()) return;
    if (ec) return OnAcceptError(ec);
    accept_backoff = std::chrono::milliseconds(0);
    if (connections.load() >= options.max_connections) {
      ShedConnection(socket.native_handle());
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), this)->Start();
    }
    Accept();
  });
}

// Out of descriptors the connection stays in the listen backlog and the socket stays readable:
// re-arming at once would spin. Shed the waiting connection with the spare descriptor, then wait.
void HttpServer::Impl::OnAcceptError(const beast::error_code& ec) {
  if (ec == net::error::operation_aborted) return;            // the acceptor was closed
  if (ec == net::error::connection_aborted) return Accept();  // that client only
  if (accept_backoff.count() == 0) {
    spdlog::warn("http: cannot accept connections: {}; shedding new ones until it clears",
                 ec.message());
  }
  // Shedding a connection is progress (work per incoming connection, not a spin): go on at once.
  if (OutOfDescriptors(ec) && ShedOne()) return Accept();
  accept_backoff = std::clamp(accept_backoff * 2, kMinHttpAcceptBackoff, kMaxHttpAcceptBackoff);
  accept_timer.expires_after(accept_backoff);
  accept_timer.async_wait([this](beast::error_code tec) {
    if (!tec && !stopped.load()) Accept();
  });
}

bool HttpServer::Impl::ShedOne() {
  if (spare_fd < 0) spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // lost earlier
  if (spare_fd < 0) return false;
  ::close(spare_fd);
  const int fd =
      ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    ShedConnection(fd);
    ::close(fd);
  }
  spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd >= 0;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

uint16_t HttpServer::port() const { return impl_->port; }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                        HttpHandler handler) {
  if (options.io_threads < 1) return InvalidArgument("http: io_threads must be >= 1");
  if (options.max_connections < 1 || options.max_header_count < 1 ||
      options.max_header_bytes < 1024 || options.max_uri_bytes < 16 ||
      (options.inflight_budget == nullptr && options.max_inflight_bytes < 1)) {
    return InvalidArgument(
        "http: max_connections, max_header_count, max_inflight_bytes must be >= 1, "
        "max_header_bytes >= 1 KiB, max_uri_bytes >= 16");
  }
  if (options.header_timeout.count() <= 0 || options.body_timeout.count() <= 0 ||
      options.idle_timeout.count() <= 0) {
    return InvalidArgument("http: header, body and idle timeouts must be > 0");
  }
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
                   rl.rlim_cur < options.max_connections + 64) {
    spdlog::warn(
        "http: the descriptor limit ({}) is below max connections ({}) + 64; beyond it "
        "new connections get 503 (raise ulimit -n)",
        rl.rlim_cur, options.max_connections);
  }
  auto impl = std::make_unique<Impl>(options);
  impl->spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  impl->handler = std::move(handler);
  beast::error_code ec;
  auto address = net::ip::make_address(options.host, ec);
  if (ec) return InvalidArgument("http: invalid host address '{}': {}", options.host, ec.message());
  tcp::endpoint endpoint(address, options.port);
  auto fail = [&](const char* what) {
    return Unavailable("http: cannot {} {}:{}: {}", what, options.host, options.port, ec.message());
  };
  impl->acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (ec) return fail("configure");
  impl->acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen on");
  impl->port = impl->acceptor.local_endpoint(ec).port();
  impl->Accept();
  for (int i = 0; i < options.io_threads; ++i) {
    impl->threads.emplace_back([ioc = &impl->ioc] {
      pthread_setname_np(pthread_self(), "http-io");
      // Handlers do not throw (they return Status); an exception here is a bug worth a log line
      // rather than a terminated server.
      for (;;) {
        try {
          ioc->run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("http: unexpected exception in I/O thread: {}", e.what());
        }
      }
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

void HttpServer::Stop() {
  if (impl_ == nullptr || impl_->stopped.exchange(true)) return;
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_timer.cancel();
  });
  impl_->ioc.stop();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

}  // namespace inferd::server
