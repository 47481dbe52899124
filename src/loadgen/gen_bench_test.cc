// Tests of the generation benchmark: the pure parts (lengths, datasets, SSE, chunks, arrivals,
// statistics) and the streaming client and RunGenBench against a tiny fake SSE server on
// loopback (canned answers, no model). No assertion depends on how long anything takes.
#include "loadgen/gen_bench.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "loadgen/gen_client.h"
#include "loadgen/gen_stats.h"
#include "loadgen/latency_stats.h"

namespace inferd::loadgen {
namespace {

TEST(GenStats, LengthRanges) {
  auto r = ParseLengthRange("64:512", "--input-len");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lo, 64);
  EXPECT_EQ(r->hi, 512);
  EXPECT_EQ(ParseLengthRange("7", "--x")->hi, 7);
  for (const char* bad : {"", "0", "5:2", "a", "1:", ":4", "1:2:3", "-3", "1:2000000"}) {
    auto s = ParseLengthRange(bad, "--output-len");
    EXPECT_FALSE(s.ok()) << bad;
    if (!s.ok()) {
      EXPECT_NE(s.status().message().find("--output-len"), std::string::npos);
    }
  }
}

TEST(GenStats, RandomPromptsAreInRangeAndDeterministic) {
  auto a = RandomPrompts(50, {4, 9}, {2, 3}, 100, 7);
  auto b = RandomPrompts(50, {4, 9}, {2, 3}, 100, 7);
  ASSERT_EQ(a.size(), 50u);
  bool lengths_vary = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, b[i].ids);
    EXPECT_GE(a[i].ids.size(), 4u);
    EXPECT_LE(a[i].ids.size(), 9u);
    EXPECT_EQ(a[i].prompt_tokens, static_cast<int>(a[i].ids.size()));
    EXPECT_TRUE(a[i].max_tokens == 2 || a[i].max_tokens == 3);
    for (int32_t id : a[i].ids) {
      EXPECT_GE(id, 3);
      EXPECT_LT(id, 100);
    }
    lengths_vary |= a[i].ids.size() != a[0].ids.size();
  }
  EXPECT_TRUE(lengths_vary);
  EXPECT_NE(RandomPrompts(1, {8, 8}, {1, 1}, 100, 8)[0].ids, a[0].ids);
}

TEST(GenStats, JsonlDataset) {
  auto p = ParseJsonlPrompts(
      "{\"prompt\": \"It is a truth\"}\n\n{\"prompt\": [1, 5, 9], \"max_tokens\": 4}\r\n", 3,
      {10, 10}, 1);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[0].text, "It is a truth");
  EXPECT_EQ((*p)[0].max_tokens, 10);
  EXPECT_EQ((*p)[1].ids, (std::vector<int32_t>{1, 5, 9}));
  EXPECT_EQ((*p)[1].max_tokens, 4);
  EXPECT_EQ((*p)[2].text, "It is a truth");  // cycles
  struct Bad {
    const char* text;
    const char* message;
  };
  for (const Bad& b :
       {Bad{"{\"prompt\": \"a\"}\nnot json\n", "line 2"}, Bad{"{\"text\": \"a\"}", "no \"prompt\""},
        Bad{"{\"prompt\": []}", "non-empty array"}, Bad{"{\"prompt\": [\"x\"]}", "non-token"},
        Bad{"{\"prompt\": \"a\", \"max_tokens\": 0}", "max_tokens"}, Bad{"\n\n", "no prompts"}}) {
    auto s = ParseJsonlPrompts(b.text, 2, {1, 1}, 1);
    ASSERT_FALSE(s.ok()) << b.text;
    EXPECT_NE(s.status().message().find(b.message), std::string::npos) << s.status().message();
  }
}

TEST(GenStats, CompletionBody) {
  GenPrompt p;
  p.ids = {1, 2, 3};
  p.max_tokens = 5;
  rapidjson::Document d;
  d.Parse(CompletionBody("tiny", p, true).c_str());
  ASSERT_TRUE(d.IsObject());
  EXPECT_STREQ(d["model"].GetString(), "tiny");
  EXPECT_EQ(d["prompt"].Size(), 3u);
  EXPECT_EQ(d["max_tokens"].GetInt(), 5);
  EXPECT_TRUE(d["stream"].GetBool());
  EXPECT_TRUE(d["ignore_eos"].GetBool());
  EXPECT_TRUE(d["stream_options"]["include_usage"].GetBool());
  p.ids.clear();
  p.text = "say \"hi\"\n";
  d.Parse(CompletionBody("tiny", p, false).c_str());
  EXPECT_STREQ(d["prompt"].GetString(), "say \"hi\"\n");
  EXPECT_FALSE(d["ignore_eos"].GetBool());
}

TEST(Sse, EventsAcrossPiecesAndLineEnds) {
  SseParser p;
  std::vector<std::string> got;
  auto feed = [&](std::string_view s) {
    for (auto& e : p.Feed(s)) got.push_back(e);
  };
  feed("data: one\r");
  feed("\n\r\ndata: tw");                        // CRLF split across pieces, then the blank line
  feed("o\n\n: keep-alive\n\n");                 // a comment alone dispatches nothing
  feed("event: x\nid: 3\ndata: a\ndata:b\n\n");  // multi-line data, other fields ignored
  feed("data: partial");                         // no blank line yet: not dispatched
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two", "a\nb"}));
  feed("\n\n");
  EXPECT_EQ(got.back(), "partial");
  feed("data\r\rdata: [DONE]\n\n");  // a bare "data" field is an empty value; CR line ends
  EXPECT_EQ(got[got.size() - 2], "");
  EXPECT_EQ(got.back(), "[DONE]");
}

TEST(Sse, CompletionChunks) {
  auto c = ParseCompletionChunk(R"({"choices":[{"index":0,"text":" the","finish_reason":null}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text, " the");
  EXPECT_TRUE(c->has_choice);
  EXPECT_EQ(c->completion_tokens, -1);
  c = ParseCompletionChunk(
      R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}})");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_choice);
  EXPECT_EQ(c->completion_tokens, 3);
  EXPECT_EQ(c->prompt_tokens, 7);
  c = ParseCompletionChunk(R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]})");
  EXPECT_EQ(c->text, "Hi");
  EXPECT_EQ(c->finish_reason, "stop");
  c = ParseCompletionChunk(R"({"error":{"message":"prompt too long","type":"invalid"}})");
  EXPECT_EQ(c->error, "prompt too long");
  EXPECT_TRUE(ParseCompletionChunk("[DONE]")->done);
  EXPECT_FALSE(ParseCompletionChunk("{oops").ok());
  EXPECT_FALSE(ParseCompletionChunk("[1,2]").ok());
}

TEST(Arrivals, GammaKeepsTheMeanAndSpreadsByShape) {
  for (double b : {0.25, 1.0, 4.0}) {
    ArrivalSchedule s(100, ArrivalSchedule::Distribution::kPoisson, 11, b);
    const int n = 40000;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; ++i) {
      const double g = static_cast<double>(s.NextGap().count()) / 1e9;
      sum += g;
      sq += g * g;
    }
    const double mean = sum / n, cv = std::sqrt(sq / n - mean * mean) / mean;
    EXPECT_NEAR(mean, 0.01, 0.0006) << b;
    EXPECT_NEAR(cv, 1 / std::sqrt(b), 0.08 / std::sqrt(b)) << b;
  }
}

GenRequestRecord Rec(double ttft, double e2e, int tokens) {
  GenRequestRecord r;
  r.ok = true;
  r.ttft = ttft;
  r.e2e = e2e;
  r.output_tokens = tokens;
  r.prompt_tokens = 10;
  for (int i = 1; i < tokens; ++i) r.itl.push_back((e2e - ttft) / (tokens - 1));
  return r;
}

TEST(GenStats, RunSummaryTpotAndGoodput) {
  std::vector<GenRequestRecord> recs = {Rec(0.1, 1.1, 11), Rec(0.3, 0.8, 6), Rec(2.0, 2.0, 1)};
  GenRequestRecord failed;
  failed.error = "http_503";
  recs.push_back(failed);
  EXPECT_DOUBLE_EQ(recs[0].Tpot(), 0.1);
  EXPECT_DOUBLE_EQ(recs[2].Tpot(), 0.0);  // one token: no TPOT
  GenRunResult r = SummarizeRun(recs, 4.0, {.ttft_ms = 500, .tpot_ms = 100.0001});
  EXPECT_EQ(r.completed, 3);
  EXPECT_EQ(r.failed, 1);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].first, "http_503");
  EXPECT_EQ(r.output_tokens, 18);
  EXPECT_EQ(r.input_tokens, 30);
  EXPECT_DOUBLE_EQ(r.request_throughput, 0.75);
  EXPECT_DOUBLE_EQ(r.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(r.goodput, 0.5);  // requests 0 and 1 (ttft 2 s misses the SLO)
  EXPECT_EQ(r.tpot.count, 2);        // single-token requests have no TPOT
  EXPECT_NEAR(r.tpot.mean, 100, 1e-9);
  EXPECT_NEAR(r.ttft.median, 300, 1e-9);
  EXPECT_NEAR(r.ttft.p99, 300 + 0.98 * 1700, 1e-6);  // linear interpolation, like numpy
  EXPECT_EQ(r.itl.count, 15);
  EXPECT_DOUBLE_EQ(SummarizeRun(recs, 4.0, {}).goodput, 0.75);  // no SLO: all completed
  std::string json = GenRunsToJson({r}, {});
  rapidjson::Document d;
  d.Parse(json.c_str());
  ASSERT_TRUE(d.IsArray());
  EXPECT_DOUBLE_EQ(d[0]["request_goodput"].GetDouble(), 0.5);
  EXPECT_NEAR(d[0]["p99_ttft_ms"].GetDouble(), 1966, 1e-6);
  EXPECT_EQ(d[0]["errors"]["http_503"].GetInt(), 1);
  EXPECT_NE(GenRunsSvg({r}, "t").find("TTFT (ms)"), std::string::npos);
}

// ---- A fake OpenAI server: answers every connection with the same canned bytes. ----

class FakeSseServer {
 public:
  // `pieces` are written with a flush between them (so the client sees several reads).
  explicit FakeSseServer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeSseServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  std::string last_body() {
    std::lock_guard<std::mutex> l(mu_);
    return last_body_;
  }

 private:
  void Serve() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      size_t header_end = std::string::npos, want = 0;
      while (true) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
        if (header_end == std::string::npos &&
            (header_end = req.find("\r\n\r\n")) != std::string::npos) {
          size_t cl = req.find("Content-Length: ");
          if (cl == std::string::npos) cl = req.find("content-length: ");
          want = header_end + 4 + (cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16)));
        }
        if (header_end != std::string::npos && req.size() >= want) break;
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        last_body_ = header_end == std::string::npos ? "" : req.substr(header_end + 4);
      }
      ++requests_;
      for (const std::string& p : pieces_) {
        if (write(c, p.data(), p.size()) < 0) break;
      }
      close(c);
    }
  }
  std::vector<std::string> pieces_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::string last_body_;
  std::thread thread_;
};

std::string Chunk(std::string_view s) { return fmt::format("{:x}\r\n{}\r\n", s.size(), s); }

std::vector<std::string> ChunkedStream() {
  return {
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
      Chunk("data: {\"choices\":[{\"index\":0,\"text\":\"It\"}]}\n\n"),
      Chunk("data: {\"choices\":[{\"index\":0,\"te"),  // an event split across chunks
      Chunk("xt\":\" is\"}]}\r\n\r\n: ping\n\n"),
      Chunk("data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":\"length\"}]}"
            "\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,"
            "\"completion_tokens\":3}}\n\ndata: [DONE]\n\n"),
      "0\r\n\r\n"};
}

GenRequestRecord CompleteOnce(const std::string& url, const std::string& body = "{}") {
  GenClientOptions o;
  o.url = *ParseServerUrl(url);
  o.timeout = std::chrono::milliseconds(20000);
  auto client = CreateCompletionClient(o);
  EXPECT_TRUE(client.ok());
  std::promise<GenRequestRecord> p;
  (*client)->AsyncComplete(body, 9, 3, [&](GenRequestRecord r) { p.set_value(std::move(r)); });
  GenRequestRecord r = p.get_future().get();
  (*client)->Shutdown(std::chrono::milliseconds(1000));
  return r;
}

TEST(GenClient, ChunkedStream) {
  FakeSseServer server(ChunkedStream());
  GenRequestRecord r = CompleteOnce(server.url(), "{\"x\":1}");
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output_tokens, 3);  // from usage
  EXPECT_EQ(r.prompt_tokens, 4);  // usage overrides the prompt's own count
  EXPECT_EQ(r.asked_tokens, 3);
  EXPECT_EQ(r.itl.size(), 2u);  // three text chunks
  EXPECT_GE(r.e2e, r.ttft);
  EXPECT_EQ(server.last_body(), "{\"x\":1}");
}

TEST(GenClient, CloseDelimitedStreamWithoutUsage) {
  FakeSseServer server(
      {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
       "Connection: close\r\n\r\n",
       "data: {\"choices\":[{\"text\":\"a\"}]}\n\n",
       "data: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n"});
  GenRequestRecord r = CompleteOnce(server.url());
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output_tokens, 2);  // counted chunks
  EXPECT_EQ(r.prompt_tokens, 9);
}

TEST(GenClient, ErrorsAreKinds) {
  {
    const std::string body = R"({"error":{"message":"max_tokens must be positive"}})";
    FakeSseServer server(
        {"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body});
    GenRequestRecord r = CompleteOnce(server.url());
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error.rfind("http_400", 0), 0u) << r.error;
    EXPECT_NE(r.error.find("max_tokens must be positive"), std::string::npos);
  }
  {
    FakeSseServer server({"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
                          "data: {\"error\":{\"message\":\"engine stopped\"}}\n\n"});
    EXPECT_EQ(CompleteOnce(server.url()).error, "server: engine stopped");
  }
  {
    FakeSseServer server({"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", "data: nonsense\n\n"});
    EXPECT_EQ(CompleteOnce(server.url()).error, "bad_stream");
  }
  {
    FakeSseServer server({"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", "data: [DONE]\n\n"});
    EXPECT_EQ(CompleteOnce(server.url()).error, "no_tokens");
  }
  FakeSseServer* gone = new FakeSseServer({});
  const std::string url = gone->url();
  delete gone;  // nothing listens there any more
  EXPECT_EQ(CompleteOnce(url).error, "connect");
}

TEST(GenBench, EndToEndAgainstTheFakeServer) {
  FakeSseServer server(ChunkedStream());
  const auto dir = std::filesystem::temp_directory_path() / "inferd_gen_bench_test";
  std::filesystem::create_directories(dir);
  GenBenchOptions o;
  o.url = server.url();
  o.model = "fake";
  o.num_prompts = 6;
  o.input_len = "3:5";
  o.output_len = "3";
  o.concurrency_range = "1:2";
  o.json_path = (dir / "runs.json").string();
  o.plot_path = (dir / "runs.svg").string();
  o.slo_ttft_ms = 60000;
  o.quiet = true;
  std::ostringstream out, err;
  Status s = RunGenBench(o, out, err);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server.requests(), 1 + 2 * 6);  // warmup + two levels
  EXPECT_NE(out.str().find("c=2"), std::string::npos) << out.str();
  std::ifstream f(o.json_path);
  std::stringstream ss;
  ss << f.rdbuf();
  rapidjson::Document d;
  d.Parse(ss.str().c_str());
  ASSERT_TRUE(d.IsArray());
  ASSERT_EQ(d.Size(), 2u);
  EXPECT_EQ(d[1]["max_concurrency"].GetDouble(), 2);
  EXPECT_EQ(d[1]["completed"].GetInt(), 6);
  EXPECT_EQ(d[1]["total_output_tokens"].GetInt(), 18);
  EXPECT_GT(d[1]["request_goodput"].GetDouble(), 0);
  EXPECT_TRUE(std::filesystem::exists(o.plot_path));
  rapidjson::Document body;
  body.Parse(server.last_body().c_str());
  ASSERT_TRUE(body.IsObject());
  EXPECT_STREQ(body["model"].GetString(), "fake");
  EXPECT_EQ(body["max_tokens"].GetInt(), 3);

  o.concurrency_range.clear();
  o.request_rate_range = "inf";
  o.json_path = o.plot_path = "";
  EXPECT_TRUE(RunGenBench(o, out, err).ok());
  std::filesystem::remove_all(dir);
}

TEST(GenBench, BadOptionsAndAFailingServer) {
  std::ostringstream out, err;
  GenBenchOptions o;
  o.url = "http://127.0.0.1:1";
  o.model = "m";
  o.quiet = true;
  auto fails_with = [&](const GenBenchOptions& opt, std::string_view text) {
    Status s = RunGenBench(opt, out, err);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  };
  GenBenchOptions b = o;
  b.concurrency_range = "2";
  b.request_rate_range = "1";
  fails_with(b, "not both");
  b = o;
  b.burstiness = 0;
  fails_with(b, "--burstiness");
  b = o;
  b.url = "grpc://127.0.0.1:1";
  fails_with(b, "http://");
  b = o;
  b.dataset = "/nonexistent/prompts.jsonl";
  fails_with(b, "--dataset");
  fails_with(o, "warmup");  // nothing listens
  const std::string body = R"({"error":{"message":"unknown model 'm'"}})";
  FakeSseServer server({"HTTP/1.1 404 Not Found\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\n\r\n" + body});
  b = o;
  b.url = server.url();
  fails_with(b, "unknown model 'm'");
  b.warmup_requests = 0;
  b.num_prompts = 2;
  fails_with(b, "every request failed");
}

}  // namespace
}  // namespace inferd::loadgen
