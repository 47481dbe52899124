#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include <gtest/gtest.h>

#include "loadgen/client.h"
#include "loadgen/latency_stats.h"
#include "loadgen/load_driver.h"
#include "loadgen/report.h"
#include "loadgen/server_bench.h"

namespace inferd::loadgen {
namespace {

TEST(LatencyStats, InterpolatedPercentilesInWholeMicroseconds) {
  std::vector<int64_t> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  LatencySummary s = Summarize(v);
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.avg_us, 50.5);
  EXPECT_EQ(s.p50_us, 51);  // 50.5, rounded
  EXPECT_EQ(s.p90_us, 90);  // 90.1
  EXPECT_EQ(s.p95_us, 95);  // 95.05
  EXPECT_EQ(s.p99_us, 99);  // 99.01
  EXPECT_EQ(s.max_us, 100);
  std::vector<int64_t> one = {7};
  EXPECT_EQ(Summarize(one).p99_us, 7);
  std::vector<int64_t> none;
  EXPECT_EQ(Summarize(none).count, 0);
  EXPECT_EQ(Summarize(none).p99_us, 0);
}

TEST(LatencyStats, LastThreeAgree) {
  EXPECT_FALSE(LastAgree({100, 100}, 10));
  EXPECT_TRUE(LastAgree({1, 100, 105, 109}, 10));
  EXPECT_FALSE(LastAgree({100, 105, 111}, 10));
  EXPECT_FALSE(LastAgree({0, 0, 0}, 10));  // no throughput is never stable
  EXPECT_TRUE(LastAgree({50, 200, 400, 800, 800, 800}, 1));
}

TEST(ArrivalSchedule, ConstantAndPoissonRates) {
  ArrivalSchedule c(200, ArrivalSchedule::Distribution::kConstant);
  EXPECT_EQ(c.NextGap(), std::chrono::nanoseconds(5'000'000));
  ArrivalSchedule p(1000, ArrivalSchedule::Distribution::kPoisson, 7);
  double total = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) total += static_cast<double>(p.NextGap().count());
  EXPECT_NEAR(total / n, 1e6, 0.03e6);  // mean gap 1 ms
  EXPECT_TRUE(ParseDistribution("poisson").ok());
  EXPECT_FALSE(ParseDistribution("uniform").ok());
}

TEST(Parsing, Ranges) {
  auto r = ParseRange("1:8:2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<double>{1, 3, 5, 7}));
  EXPECT_EQ(*ParseRange("4"), (std::vector<double>{4}));
  EXPECT_EQ(*ParseRange("1:3"), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(ParseRange("0.5:1.5:0.5")->size(), 3u);
  for (const char* bad : {"", "x", "0", "4:2", "1:4:0", "1:2:3:4", "1:100000:1", "-1:2"}) {
    EXPECT_FALSE(ParseRange(bad).ok()) << bad;
  }
}

TEST(Parsing, Durations) {
  EXPECT_EQ(*ParseDuration("30m"), std::chrono::minutes(30));
  EXPECT_EQ(*ParseDuration("45s"), std::chrono::seconds(45));
  EXPECT_EQ(*ParseDuration("1500ms"), std::chrono::milliseconds(1500));
  EXPECT_EQ(*ParseDuration("2h"), std::chrono::hours(2));
  EXPECT_EQ(*ParseDuration("90"), std::chrono::seconds(90));
  for (const char* bad : {"", "m", "-5s", "0", "abc", "5d"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

TEST(Parsing, ServerUrls) {
  auto h = ParseServerUrl("http://127.0.0.1:8000/");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->protocol, ServerUrl::Protocol::kHttp);
  EXPECT_EQ(h->host, "127.0.0.1");
  EXPECT_EQ(h->port, "8000");
  auto g = ParseServerUrl("grpc://localhost:8001");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->protocol, ServerUrl::Protocol::kGrpc);
  EXPECT_EQ(ParseServerUrl("localhost:8000")->protocol, ServerUrl::Protocol::kHttp);
  for (const char* bad : {"https://h:1", "http://h", "http://h:", "http://:80", "http://h:8x",
                          "http://h:80/v2"}) {
    EXPECT_FALSE(ParseServerUrl(bad).ok()) << bad;
  }
}

ModelMetadata TwoInputs() {
  ModelMetadata md;
  md.inputs = {{"dense", "FP32", {-1, 13}}, {"ids", "INT64", {-1, 26, -1}}};
  md.outputs = {{"p", "FP32", {-1, 1}}};
  return md;
}

TEST(BuildInputs, RandomDataFromMetadata) {
  auto in = BuildInputs(TwoInputs(), 4, {}, {}, 1);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_EQ(in->size(), 2u);
  EXPECT_EQ((*in)[0].spec.shape, (std::vector<int64_t>{4, 13}));
  EXPECT_EQ((*in)[0].bytes.size(), 4u * 13 * 4);
  EXPECT_EQ((*in)[1].spec.shape, (std::vector<int64_t>{4, 26, 1}));
  const int64_t* ids = reinterpret_cast<const int64_t*>((*in)[1].bytes.data());
  for (int i = 0; i < 4 * 26; ++i) EXPECT_TRUE(ids[i] == 0 || ids[i] == 1);
  const float* dense = reinterpret_cast<const float*>((*in)[0].bytes.data());
  for (int i = 0; i < 4 * 13; ++i) EXPECT_TRUE(dense[i] >= -1 && dense[i] < 1);
}

TEST(BuildInputs, ShapeOverrideAndErrors) {
  auto in = BuildInputs(TwoInputs(), 1, {}, {"ids=2,26,3"}, 1);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ((*in)[1].spec.shape, (std::vector<int64_t>{2, 26, 3}));
  EXPECT_FALSE(BuildInputs(TwoInputs(), 1, {}, {"nope=1"}, 1).ok());
  EXPECT_FALSE(BuildInputs(TwoInputs(), 1, {}, {"ids=1,x"}, 1).ok());
  EXPECT_FALSE(BuildInputs(TwoInputs(), 1, {}, {"ids"}, 1).ok());
  EXPECT_FALSE(BuildInputs(TwoInputs(), 0, {}, {}, 1).ok());
  EXPECT_FALSE(BuildInputs(TwoInputs(), 1, {"dense=/nonexistent.npy"}, {}, 1).ok());
  EXPECT_FALSE(BuildInputs(TwoInputs(), 1, {"other=/x.npy"}, {}, 1).ok());
  ModelMetadata strings;
  strings.inputs = {{"text", "BYTES", {1}}};
  EXPECT_FALSE(BuildInputs(strings, 1, {}, {}, 1).ok());
  EXPECT_EQ(KserveDataTypeSize("BF16"), 2u);
  EXPECT_EQ(KserveDataTypeSize("BYTES"), 0u);
}

TEST(Recorder, SplitsSuccessesAndErrors) {
  Recorder r;
  r.Add(std::chrono::microseconds(1500), "");
  r.Add(std::chrono::microseconds(10), "http_503");
  r.Add(std::chrono::microseconds(10), "http_503");
  Recorder::Window w = r.Take();
  EXPECT_EQ(w.latencies_us, (std::vector<int64_t>{1500}));
  EXPECT_EQ(w.errors["http_503"], 2);
  EXPECT_TRUE(r.Take().latencies_us.empty());
}

std::vector<PointResult> SamplePoints() {
  std::vector<PointResult> pts(2);
  for (int i = 0; i < 2; ++i) {
    pts[i].level = i + 1;
    pts[i].throughput = 100.0 * (i + 1);
    pts[i].requests_per_s = pts[i].throughput;
    pts[i].latency = {100, 2000, 1000 * (i + 1), 2000, 2500, 3000 * (i + 1), 4000 * (i + 1)};
    pts[i].server_compute_us = 800;
    pts[i].stable = true;
    pts[i].windows = 3;
  }
  pts[1].errors["timeout"] = 2;
  pts[1].error_count = 2;
  return pts;
}

TEST(Report, JsonHasTheDocumentedFields) {
  std::string json = PointsToJson(SamplePoints());
  for (const char* key : {"\"concurrency\":1", "\"throughput\":100", "\"p50_ms\":1.0",
                          "\"p90_ms\"", "\"p95_ms\"", "\"p99_ms\":6.0", "\"max_ms\":8.0",
                          "\"errors\":2", "\"server_queue_us\":null", "\"server_compute_us\":800",
                          "\"timeout\":2", "\"stable\":true"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  auto pts = SamplePoints();
  pts[0].mode = PointResult::Mode::kRequestRate;
  pts[0].level = 12.5;
  EXPECT_NE(PointsToJson(pts).find("\"request_rate\":12.5"), std::string::npos);
}

TEST(Report, CsvRowPerPoint) {
  std::string csv = PointsToCsv(SamplePoints());
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_EQ(csv.rfind("mode,level,throughput,", 0), 0u);
  EXPECT_NE(csv.find("concurrency,2,200.00,"), std::string::npos) << csv;
}

TEST(Report, SvgChart) {
  std::string svg = LatencyThroughputSvg(SamplePoints(), "m <&> x");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  size_t polylines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(svg.find("m &lt;&amp;&gt; x"), std::string::npos);
  EXPECT_NE(svg.find("P99 latency"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // Empty input still gives a valid (empty) chart.
  EXPECT_NE(LatencyThroughputSvg({}, "empty").find("</svg>"), std::string::npos);
  EXPECT_DOUBLE_EQ(NiceStep(1000, 5), 200);
  EXPECT_DOUBLE_EQ(NiceStep(7, 6), 2);
}

TEST(ServerBench, BadOptionsFailCleanly) {
  std::ostringstream out, err;
  ServerBenchOptions o;
  o.url = "http://127.0.0.1:1";
  EXPECT_FALSE(RunServerBench(o, out, err).ok());  // no model
  o.model = "m";
  o.concurrency_range = "1";
  o.request_rate_range = "10";
  EXPECT_FALSE(RunServerBench(o, out, err).ok());  // both modes
  o.request_rate_range.clear();
  o.max_trials = 2;
  EXPECT_FALSE(RunServerBench(o, out, err).ok());
  o.max_trials = 3;
  o.concurrency_range = "1.5";
  EXPECT_FALSE(RunServerBench(o, out, err).ok());
  o.concurrency_range = "1";
  o.url = "ftp://x:1";
  EXPECT_FALSE(RunServerBench(o, out, err).ok());
  o.url = "http://127.0.0.1:1";  // nothing listens on port 1
  o.timeout_ms = 2000;
  Status s = RunServerBench(o, out, err);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("127.0.0.1:1"), std::string::npos) << s.message();
}


// A stand-in server for the HTTP client: takes `connections` connections one after another; on
// each it answers one request with a keep-alive 200 (or, with answer = false, reads it and
// answers nothing) and then closes the connection, as a server's idle timeout does to a pooled
// connection. WaitClosed(i) returns once connection i is closed.
class ClosingServer {
 public:
  ClosingServer(int connections, bool answer)
      : connections_(connections), acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, connections, answer] {
      namespace http = boost::beast::http;
      for (int i = 0; i < connections; ++i) {
        boost::asio::ip::tcp::socket socket(ioc_);
        boost::beast::error_code ec;
        acceptor_.accept(socket, ec);
        if (ec) return;
        boost::beast::flat_buffer buffer;
        http::request<http::string_body> req;
        http::read(socket, buffer, req, ec);
        if (ec) return;
        if (answer) {
          http::response<http::string_body> res{http::status::ok, 11};
          res.keep_alive(true);
          res.body() = "{}";
          res.prepare_payload();
          http::write(socket, res, ec);
        }
        socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
        socket.close();
        ++served_;
        closed_[i].set_value();
      }
    });
  }
  ~ClosingServer() {
    // A blocking accept() is not woken by closing the acceptor from another thread: connect (and
    // hang up) once per connection it may still wait for, so a failed test cannot hang here.
    for (int i = served_; i < connections_; ++i) {
      boost::asio::ip::tcp::socket wake(ioc_);
      boost::beast::error_code ec;
      wake.connect(acceptor_.local_endpoint(), ec);
    }
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  void WaitClosed(int i) { closed_[i].get_future().wait(); }
  int served() const { return served_; }

 private:
  const int connections_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::promise<void> closed_[2];
  std::atomic<int> served_{0};
  std::thread thread_;
};

std::string InferOnce(InferenceClient* client) {
  std::promise<std::string> result;
  client->AsyncInfer([&](std::string_view error) { result.set_value(std::string(error)); });
  return result.get_future().get();
}

// The regression of the soak's "io" errors: a request on a pooled connection that the server
// closed while it was idle goes out again on a new connection and succeeds.
TEST(HttpClient, ResendsOnAPooledConnectionTheServerClosed) {
  ClosingServer server(2, /*answer=*/true);
  ClientOptions o;
  o.url = *ParseServerUrl("http://127.0.0.1:" + std::to_string(server.port()));
  o.model = "m";
  o.timeout = std::chrono::milliseconds(10000);
  auto client = CreateHttpClient(o);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE((*client)->Prepare({}).ok());
  EXPECT_EQ(InferOnce(client->get()), "");
  server.WaitClosed(0);  // the connection the client keeps in its pool is closed now
  EXPECT_EQ(InferOnce(client->get()), "");
  server.WaitClosed(1);  // the count is taken after the server's close, the client may be faster
  EXPECT_EQ(server.served(), 2);
  (*client)->Shutdown(std::chrono::milliseconds(1000));
}

// A request that fails on a new connection is an error, sent once: a server that reads it and
// hangs up gets it once, and the client reports "io".
TEST(HttpClient, ARequestLostOnANewConnectionIsAnError) {
  ClosingServer server(1, /*answer=*/false);
  ClientOptions o;
  o.url = *ParseServerUrl("http://127.0.0.1:" + std::to_string(server.port()));
  o.model = "m";
  o.timeout = std::chrono::milliseconds(2000);
  auto client = CreateHttpClient(o);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Prepare({}).ok());
  EXPECT_EQ(InferOnce(client->get()), "io");
  server.WaitClosed(0);
  EXPECT_EQ(server.served(), 1);
}

}  // namespace
}  // namespace inferd::loadgen
