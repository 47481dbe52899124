// Beast client for streamed completions: connect -> write -> read header -> read the body piece by
// piece into a fixed buffer (http::buffer_body), feeding every piece to the SSE parser the moment
// it arrives, so each chunk is timed when it reaches the client rather than when the body ends.
#include "loadgen/gen_client.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <thread>
#include <utility>  // before asio: Boost 1.74 awaitable.hpp uses std::exchange

#include "common/clock.h"
#include "common/mutex.h"

namespace inferd::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr size_t kErrorBodyLimit = 300;  // of a non-200 answer, kept for the error message

struct Request {
  explicit Request(asio::io_context& ioc) : stream(ioc) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  http::response_parser<http::buffer_body> parser;
  char piece[16384];
  SseParser sse;
  GenRequestRecord rec;
  SteadyClock::time_point start, last_text;
  int text_chunks = 0;
  std::string error_body;  // non-200 answers
  std::function<void(GenRequestRecord)> done;
};
using RequestPtr = std::shared_ptr<Request>;

double Since(SteadyClock::time_point t0, SteadyClock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

class HttpCompletionClient final : public CompletionClient {
 public:
  explicit HttpCompletionClient(GenClientOptions o)
      : o_(std::move(o)), work_(asio::make_work_guard(ioc_)) {}
  ~HttpCompletionClient() override { Shutdown(std::chrono::milliseconds(0)); }

  Status Start() {
    tcp::resolver resolver(ioc_);
    beast::error_code ec;
    endpoints_ = resolver.resolve(o_.url.host, o_.url.port, ec);
    if (ec) {
      return Unavailable("cannot resolve {}:{}: {}", o_.url.host, o_.url.port, ec.message());
    }
    thread_ = std::thread([this] { ioc_.run(); });
    return Status::Ok();
  }

  void AsyncComplete(std::string body, int prompt_tokens, int asked_tokens,
                     std::function<void(GenRequestRecord)> done) override {
    outstanding_.fetch_add(1);
    auto r = std::make_shared<Request>(ioc_);
    r->rec.prompt_tokens = prompt_tokens;
    r->rec.asked_tokens = asked_tokens;
    r->done = std::move(done);
    r->req = http::request<http::string_body>(http::verb::post, o_.path, 11);
    r->req.set(http::field::host, o_.url.host + ":" + o_.url.port);
    r->req.set(http::field::content_type, "application/json");
    r->req.set(http::field::accept, "text/event-stream");
    r->req.body() = std::move(body);
    r->req.prepare_payload();
    asio::post(ioc_, [this, r] { Connect(r); });
  }

  void Shutdown(std::chrono::milliseconds timeout) override {
    {
      MutexLock l(&mu_);
      const auto deadline = SteadyClock::now() + timeout;
      while (outstanding_.load() > 0 && SteadyClock::now() < deadline) {
        cv_.WaitUntil(&mu_, RealClock::Get(), deadline);
      }
    }
    work_.reset();
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // Everything below runs on the I/O thread.
  void Connect(const RequestPtr& r) {
    r->start = SteadyClock::now();
    r->stream.expires_after(o_.timeout);  // one deadline for the whole request
    r->stream.async_connect(endpoints_, [this, r](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return Finish(r, ec == beast::error::timeout ? "timeout" : "connect");
      r->stream.socket().set_option(tcp::no_delay(true), ec);
      http::async_write(r->stream, r->req, [this, r](beast::error_code ec, size_t) {
        if (ec) return Finish(r, Kind(ec));
        http::async_read_header(r->stream, r->buffer, r->parser,
                                [this, r](beast::error_code ec, size_t) {
                                  if (ec) return Finish(r, Kind(ec));
                                  ReadSome(r);
                                });
      });
    });
  }

  static std::string Kind(const beast::error_code& ec) {
    return ec == beast::error::timeout ? "timeout" : "io";
  }

  void ReadSome(const RequestPtr& r) {
    if (r->parser.is_done()) return Finish(r, "");
    r->parser.get().body().data = r->piece;
    r->parser.get().body().size = sizeof(r->piece);
    http::async_read_some(r->stream, r->buffer, r->parser, [this, r](beast::error_code ec, size_t) {
      const size_t n = sizeof(r->piece) - r->parser.get().body().size;
      if (n > 0) Consume(r, std::string_view(r->piece, n));
      if (ec == http::error::need_buffer) ec = {};
      if (ec == http::error::end_of_stream || ec == asio::error::eof) {
        return Finish(r, "");  // a body delimited by the server closing the connection
      }
      if (ec) return Finish(r, Kind(ec));
      ReadSome(r);
    });
  }

  void Consume(const RequestPtr& r, std::string_view bytes) {
    if (r->parser.get().result_int() != 200) {
      r->error_body.append(
          bytes.substr(0, kErrorBodyLimit - std::min(kErrorBodyLimit, r->error_body.size())));
      return;
    }
    for (const std::string& data : r->sse.Feed(bytes)) {
      auto chunk = ParseCompletionChunk(data);
      if (!chunk.ok()) {
        if (r->rec.error.empty()) r->rec.error = "bad_stream";
        continue;
      }
      if (!chunk->error.empty() && r->rec.error.empty()) r->rec.error = "server: " + chunk->error;
      if (chunk->completion_tokens >= 0) r->rec.output_tokens = chunk->completion_tokens;
      if (chunk->prompt_tokens >= 0) r->rec.prompt_tokens = chunk->prompt_tokens;
      if (chunk->text.empty()) continue;
      const auto now = SteadyClock::now();
      if (r->text_chunks == 0) {
        r->rec.ttft = Since(r->start, now);
      } else {
        r->rec.itl.push_back(Since(r->last_text, now));
      }
      r->last_text = now;
      ++r->text_chunks;
    }
  }

  void Finish(const RequestPtr& r, const std::string& io_error) {
    GenRequestRecord& rec = r->rec;
    rec.e2e = Since(r->start, SteadyClock::now());
    const unsigned code = r->parser.is_header_done() ? r->parser.get().result_int() : 0;
    if (!io_error.empty() && !(io_error == "io" && r->parser.is_done())) {
      rec.error = io_error;
    } else if (code != 200) {
      rec.error = "http_" + std::to_string(code);
    } else if (rec.error.empty() && r->text_chunks == 0) {
      rec.error = "no_tokens";
    }
    if (code != 0 && code != 200 && !r->error_body.empty()) {
      rec.error += ": " + r->error_body;  // shown once in the error summary
    }
    if (rec.output_tokens == 0) rec.output_tokens = r->text_chunks;
    rec.ok = rec.error.empty();
    beast::error_code ignored;
    r->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    r->stream.close();
    if (r->done) r->done(std::move(rec));
    if (outstanding_.fetch_sub(1) == 1) {
      MutexLock l(&mu_);
      cv_.NotifyAll();
    }
  }

  const GenClientOptions o_;
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::resolver::results_type endpoints_;
  std::thread thread_;
  std::atomic<int64_t> outstanding_{0};
  Mutex mu_;  // pairs with cv_ for Shutdown's wait; guards nothing else
  CondVar cv_;
};

}  // namespace

StatusOr<std::unique_ptr<CompletionClient>> CreateCompletionClient(
    const GenClientOptions& options) {
  if (options.url.protocol != ServerUrl::Protocol::kHttp) {
    return InvalidArgument("--generate needs an http:// --url (OpenAI completions over HTTP)");
  }
  auto client = std::make_unique<HttpCompletionClient>(options);
  RETURN_IF_ERROR(client->Start());
  return std::unique_ptr<CompletionClient>(std::move(client));
}

}  // namespace inferd::loadgen
