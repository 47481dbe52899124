// KServe v2 HTTP client on Boost.Beast: one I/O thread, a pool of keep-alive connections that
// grows on demand up to ClientOptions::max_connections, the request serialized once (JSON header +
// binary tensors) and written as raw bytes.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>  // before asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "loadgen/client.h"

namespace inferd::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr uint64_t kBodyLimit = uint64_t{1} << 34;

std::string ErrorKind(const beast::error_code& ec) {
  return ec == beast::error::timeout ? "timeout" : "io";
}

std::string ModelPath(const ClientOptions& o) {
  std::string p = "/v2/models/" + o.model;
  if (!o.version.empty()) p += "/versions/" + o.version;
  return p;
}

StatusOr<rapidjson::Document> ParseJson(const std::string& body, std::string_view what) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Internal("{}: the server's answer is not a JSON object", what);
  }
  return doc;
}

uint64_t Member(const rapidjson::Value& v, const char* key, const char* sub) {
  if (!v.IsObject() || !v.HasMember(key) || !v[key].IsObject()) return 0;
  const auto& o = v[key];
  if (!o.HasMember(sub) || !o[sub].IsUint64()) return 0;
  return o[sub].GetUint64();
}

class HttpClient final : public InferenceClient {
 public:
  explicit HttpClient(ClientOptions options)
      : options_(std::move(options)), work_(asio::make_work_guard(ioc_)) {}
  ~HttpClient() override { Shutdown(std::chrono::milliseconds(0)); }

  Status Start() {
    tcp::resolver resolver(ioc_);
    beast::error_code ec;
    endpoints_ = resolver.resolve(options_.url.host, options_.url.port, ec);
    if (ec) {
      return Unavailable("cannot resolve {}:{}: {}", options_.url.host, options_.url.port,
                         ec.message());
    }
    thread_ = std::thread([this] { ioc_.run(); });
    return Status::Ok();
  }

  StatusOr<ModelMetadata> GetMetadata() override {
    ASSIGN_OR_RETURN(std::string body, HttpGet(BaseUrl() + ModelPath(options_), options_.timeout));
    ASSIGN_OR_RETURN(rapidjson::Document doc, ParseJson(body, "model metadata"));
    ModelMetadata md;
    for (const char* key : {"inputs", "outputs"}) {
      if (!doc.HasMember(key) || !doc[key].IsArray()) {
        return Internal("model metadata has no '{}' list", key);
      }
      for (const auto& t : doc[key].GetArray()) {
        TensorSpec spec;
        if (!t.IsObject() || !t.HasMember("name") || !t["name"].IsString() ||
            !t.HasMember("datatype") || !t["datatype"].IsString() || !t.HasMember("shape") ||
            !t["shape"].IsArray()) {
          return Internal("model metadata: malformed tensor in '{}'", key);
        }
        spec.name = t["name"].GetString();
        spec.datatype = t["datatype"].GetString();
        for (const auto& d : t["shape"].GetArray()) {
          if (!d.IsInt64()) return Internal("model metadata: non-integer dim in '{}'", spec.name);
          spec.shape.push_back(d.GetInt64());
        }
        (std::string_view(key) == "inputs" ? md.inputs : md.outputs).push_back(std::move(spec));
      }
    }
    return md;
  }

  StatusOr<ServerStats> GetStats() override {
    ASSIGN_OR_RETURN(std::string body,
                     HttpGet(BaseUrl() + ModelPath(options_) + "/stats", options_.timeout));
    ASSIGN_OR_RETURN(rapidjson::Document doc, ParseJson(body, "model statistics"));
    ServerStats s;
    if (!doc.HasMember("model_stats") || !doc["model_stats"].IsArray()) {
      return Internal("model statistics have no 'model_stats' list");
    }
    // Several versions may answer; sum them (the load goes to whichever the server picks).
    for (const auto& m : doc["model_stats"].GetArray()) {
      if (!m.IsObject()) continue;
      if (m.HasMember("inference_count") && m["inference_count"].IsUint64()) {
        s.inference_count += m["inference_count"].GetUint64();
      }
      if (m.HasMember("execution_count") && m["execution_count"].IsUint64()) {
        s.execution_count += m["execution_count"].GetUint64();
      }
      if (!m.HasMember("inference_stats")) continue;
      const auto& is = m["inference_stats"];
      s.success_count += Member(is, "success", "count");
      s.queue_count += Member(is, "queue", "count");
      s.queue_ns += Member(is, "queue", "ns");
      s.compute_count += Member(is, "compute_infer", "count");
      s.compute_ns += Member(is, "compute_infer", "ns");
    }
    return s;
  }

  Status Prepare(const std::vector<InputTensor>& inputs) override {
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    w.StartObject();
    w.Key("inputs");
    w.StartArray();
    size_t binary = 0;
    for (const auto& in : inputs) {
      w.StartObject();
      w.Key("name");
      w.String(in.spec.name.c_str());
      w.Key("datatype");
      w.String(in.spec.datatype.c_str());
      w.Key("shape");
      w.StartArray();
      for (int64_t d : in.spec.shape) w.Int64(d);
      w.EndArray();
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(in.bytes.size());
      w.EndObject();
      w.EndObject();
      binary += in.bytes.size();
    }
    w.EndArray();
    w.Key("parameters");
    w.StartObject();
    w.Key("binary_data_output");
    w.Bool(true);
    w.EndObject();
    w.EndObject();
    const std::string header = sb.GetString();
    std::string req = "POST " + ModelPath(options_) + "/infer HTTP/1.1\r\nHost: " +
                      options_.url.host + ":" + options_.url.port +
                      "\r\nContent-Type: application/octet-stream\r\n"
                      "Inference-Header-Content-Length: " + std::to_string(header.size()) +
                      "\r\nContent-Length: " + std::to_string(header.size() + binary) +
                      "\r\nConnection: keep-alive\r\n\r\n" + header;
    for (const auto& in : inputs) req += in.bytes;
    request_ = std::make_shared<const std::string>(std::move(req));
    return Status::Ok();
  }

  void AsyncInfer(InferCallback done) override {
    outstanding_.fetch_add(1);
    asio::post(ioc_, [this, done = std::move(done)]() mutable { Dispatch(std::move(done)); });
  }

  void Shutdown(std::chrono::milliseconds timeout) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, timeout, [&] { return outstanding_.load() == 0; });
    }
    work_.reset();
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Conn {
    explicit Conn(asio::io_context& ioc) : stream(ioc) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    std::optional<http::response_parser<http::string_body>> parser;
    InferCallback done;
    bool from_pool = false;  // this request went out on a connection that sat idle in the pool
  };
  using ConnPtr = std::shared_ptr<Conn>;

  std::string BaseUrl() const { return "http://" + options_.url.host + ":" + options_.url.port; }

  // Everything below runs on the I/O thread.
  void Dispatch(InferCallback done) {
    if (!idle_.empty()) {
      ConnPtr c = std::move(idle_.back());
      idle_.pop_back();
      c->from_pool = true;
      Send(std::move(c), std::move(done));
    } else if (open_ < options_.max_connections) {
      Open(std::move(done));
    } else {
      pending_.push_back(std::move(done));
    }
  }

  void Open(InferCallback done) {
    ++open_;
    auto c = std::make_shared<Conn>(ioc_);
    c->done = std::move(done);
    c->stream.expires_after(options_.timeout);
    c->stream.async_connect(endpoints_, [this, c](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return Fail(c, ec == beast::error::timeout ? "timeout" : "connect");
      c->stream.socket().set_option(tcp::no_delay(true), ec);
      InferCallback d = std::move(c->done);
      Send(c, std::move(d));
    });
  }

  void Send(ConnPtr c, InferCallback done) {
    c->done = std::move(done);
    c->parser.reset();  // Stale() asks whether this request's answer has begun
    c->stream.expires_after(options_.timeout);
    auto req = request_;
    asio::async_write(c->stream, asio::buffer(*req), [this, c, req](beast::error_code ec, size_t) {
      if (ec) return Stale(c, ec) ? Resend(c) : Fail(c, ErrorKind(ec));
      c->parser.emplace();
      c->parser->body_limit(kBodyLimit);
      http::async_read(c->stream, c->buffer, *c->parser, [this, c](beast::error_code ec, size_t) {
        if (ec) return Stale(c, ec) ? Resend(c) : Fail(c, ErrorKind(ec));
        const auto& res = c->parser->get();
        const unsigned code = res.result_int();
        const bool keep = res.keep_alive();
        Complete(std::move(c->done), code == 200 ? "" : "http_" + std::to_string(code));
        if (keep) {
          Release(c);
        } else {
          Close(c);
        }
      });
    });
  }

  // A keep-alive connection can be closed by the server while it sits idle in the pool (its idle
  // timeout: 60 s by default in `inferd serve`, 5 s in many proxies). The request sent on it then
  // fails with EOF or a reset before a single byte of an answer: the server never read it, so it
  // goes out again on a new connection, once (a new connection is not from the pool), as HTTP
  // clients do for a stale connection. Counting it as a failed request would blame the server for
  // its normal idle close (the soak, bench/soak/run_soak.py, saw ~40 such "io" errors after
  // latency spikes had grown the pool).
  bool Stale(const ConnPtr& c, const beast::error_code& ec) const {
    const bool closed = ec == http::error::end_of_stream || ec == asio::error::eof ||
                        ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
    return closed && c->from_pool && !(c->parser && c->parser->got_some());
  }

  void Resend(const ConnPtr& c) {
    InferCallback d = std::move(c->done);
    beast::error_code ignored;
    c->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    c->stream.close();
    --open_;
    Open(std::move(d));
  }

  void Release(const ConnPtr& c) {
    c->from_pool = false;  // reused at once, or marked again when taken from the pool
    if (!pending_.empty()) {
      InferCallback next = std::move(pending_.front());
      pending_.pop_front();
      Send(c, std::move(next));
    } else {
      idle_.push_back(c);
    }
  }

  void Close(const ConnPtr& c) {
    beast::error_code ignored;
    c->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    c->stream.close();
    --open_;
    if (!pending_.empty()) {
      InferCallback next = std::move(pending_.front());
      pending_.pop_front();
      Open(std::move(next));
    }
  }

  void Fail(const ConnPtr& c, const std::string& kind) {
    Complete(std::move(c->done), kind);
    Close(c);
  }

  void Complete(InferCallback done, const std::string& error) {
    if (done) done(error);
    if (outstanding_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> l(mu_);
      cv_.notify_all();
    }
  }

  const ClientOptions options_;
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::resolver::results_type endpoints_;
  std::shared_ptr<const std::string> request_ = std::make_shared<const std::string>();
  std::thread thread_;
  std::atomic<int64_t> outstanding_{0};
  std::mutex mu_;  // pairs with cv_ for Shutdown's wait
  std::condition_variable cv_;
  // I/O thread only.
  std::vector<ConnPtr> idle_;
  std::deque<InferCallback> pending_;
  int open_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<InferenceClient>> CreateHttpClient(const ClientOptions& options) {
  if (options.max_connections < 1) return InvalidArgument("max_connections must be positive");
  auto client = std::make_unique<HttpClient>(options);
  RETURN_IF_ERROR(client->Start());
  return std::unique_ptr<InferenceClient>(std::move(client));
}

StatusOr<std::string> HttpGet(std::string_view url, std::chrono::milliseconds timeout) {
  std::string_view rest = url;
  if (!rest.starts_with("http://")) return InvalidArgument("'{}' is not an http:// URL", url);
  rest.remove_prefix(7);
  size_t slash = rest.find('/');
  std::string hostport(rest.substr(0, slash));
  std::string target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  size_t colon = hostport.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("'{}': no port", url);
  std::string host = hostport.substr(0, colon), port = hostport.substr(colon + 1);

  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return Unavailable("GET {}: cannot resolve: {}", url, ec.message());
  beast::tcp_stream stream(ioc);
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, hostport);
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  beast::flat_buffer buffer;
  beast::error_code result;
  stream.expires_after(timeout);
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if (e) {
      result = e;
      return;
    }
    http::async_write(stream, req, [&](beast::error_code e, size_t) {
      if (e) {
        result = e;
        return;
      }
      http::async_read(stream, buffer, parser, [&](beast::error_code e, size_t) { result = e; });
    });
  });
  ioc.run();
  if (result) return Unavailable("GET {}: {}", url, result.message());
  const auto& res = parser.get();
  if (res.result_int() != 200) {
    return Unavailable("GET {}: HTTP {}: {}", url, res.result_int(), res.body().substr(0, 200));
  }
  return std::string(res.body());
}

}  // namespace inferd::loadgen
