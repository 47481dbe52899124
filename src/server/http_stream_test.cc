// Streamed replies over a real socket: chunked SSE framing, and a client that disconnects
// mid-stream cancelling its sequence in the generator.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <chrono>
#include <thread>

#include "server/fake_text_generator.h"
#include "server/http_server.h"
#include "server/openai_http.h"

namespace inferd::server {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Generous bound for a handshake between threads; reaching it means the test failed.
constexpr auto kWait = std::chrono::seconds(60);

class HttpStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto models = std::make_shared<GenerativeModels>();
    models->ready.push_back({"tiny", fake_, ChatTemplate::Default()});
    models->unavailable["broken"] = "tokenizer.model is corrupt";
    HttpServerOptions o;
    o.port = 0;
    auto server = HttpServer::Start(o, MakeGenerationHttpHandler(models, nullptr, nullptr));
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
  }

  // Connects and sends a POST of `body` to `path`.
  void Send(tcp::socket& socket, const std::string& path, const std::string& body) {
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()));
    std::string req = "POST " + path +
                      " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body;
    net::write(socket, net::buffer(req));
  }

  // Decodes a chunked body; false on a framing error.
  static bool Dechunk(const std::string& body, std::string* out) {
    size_t pos = 0;
    for (;;) {
      size_t eol = body.find("\r\n", pos);
      if (eol == std::string::npos) return false;
      size_t n = std::stoul(body.substr(pos, eol - pos), nullptr, 16);
      if (n == 0) return body.compare(eol, 4, "\r\n\r\n") == 0 && eol + 4 == body.size();
      if (eol + 2 + n + 2 > body.size() || body.compare(eol + 2 + n, 2, "\r\n") != 0) return false;
      out->append(body, eol + 2, n);
      pos = eol + 2 + n + 2;
    }
  }

  std::shared_ptr<FakeTextGenerator> fake_ = std::make_shared<FakeTextGenerator>(64);
  std::unique_ptr<HttpServer> server_;
  net::io_context io_;
};

TEST_F(HttpStreamTest, StreamsChunkedEventsAndCloses) {
  auto submitted = fake_->NextSubmit();
  tcp::socket socket(io_);
  Send(socket, "/v1/completions", R"({"model": "tiny", "prompt": "a", "stream": true})");
  ASSERT_EQ(submitted.wait_for(kWait), std::future_status::ready);
  const std::string id = submitted.get();
  fake_->Emit(id, TextEvent("Hi"));
  fake_->Emit(id, TextEvent("!", "length"));
  std::string response;
  boost::system::error_code ec;
  net::read(socket, net::dynamic_buffer(response), ec);  // until the server closes
  EXPECT_EQ(ec, net::error::eof);
  const size_t head_end = response.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << response;
  const std::string head = response.substr(0, head_end);
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Type: text/event-stream"), std::string::npos) << head;
  std::string sse;
  ASSERT_TRUE(Dechunk(response.substr(head_end + 4), &sse)) << response;
  EXPECT_NE(sse.find("\"text\":\"Hi\""), std::string::npos) << sse;
  EXPECT_NE(sse.find("\"finish_reason\":\"length\""), std::string::npos) << sse;
  EXPECT_TRUE(sse.ends_with("data: [DONE]\n\n")) << sse;
  EXPECT_TRUE(fake_->cancelled().empty());
}

TEST_F(HttpStreamTest, DisconnectMidStreamCancelsTheSequence) {
  auto submitted = fake_->NextSubmit();
  auto cancelled = fake_->NextCancel();
  tcp::socket socket(io_);
  Send(socket, "/v1/chat/completions",
       R"({"model": "tiny", "stream": true, "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_EQ(submitted.wait_for(kWait), std::future_status::ready);
  const std::string id = submitted.get();
  fake_->Emit(id, TextEvent("Once"));
  std::string response;
  net::read_until(socket, net::dynamic_buffer(response), "Once");  // the first chunk arrived
  socket.close();
  ASSERT_EQ(cancelled.wait_for(kWait), std::future_status::ready) << "the cancel never came";
  EXPECT_EQ(cancelled.get(), id);
  // The engine's last events after the cancel go nowhere, harmlessly.
  fake_->Emit(id, TextEvent(" upon"));
  fake_->Emit(id, TextEvent("", "cancelled"));
  EXPECT_EQ(fake_->cancelled(), std::vector<std::string>{id});
}

// A stream whose next event is further away than the idle timeout (a sequence queued behind a KV
// budget, or preempted, sends nothing for minutes) keeps its connection: idle_timeout bounds
// writes the client does not read, not the wait for the producer. Before the fix the watch read
// timed out with the head write's deadline, the stream was cancelled and the client saw EOF.
TEST_F(HttpStreamTest, AGapLongerThanTheIdleTimeoutKeepsTheStream) {
  HttpServerOptions o;
  o.port = 0;
  o.idle_timeout = std::chrono::milliseconds(300);
  auto models = std::make_shared<GenerativeModels>();
  models->ready.push_back({"tiny", fake_, ChatTemplate::Default()});
  auto server = HttpServer::Start(o, MakeGenerationHttpHandler(models, nullptr, nullptr));
  ASSERT_TRUE(server.ok()) << server.status().message();
  server_ = std::move(*server);
  auto submitted = fake_->NextSubmit();
  tcp::socket socket(io_);
  Send(socket, "/v1/completions", R"({"model": "tiny", "prompt": "a", "stream": true})");
  ASSERT_EQ(submitted.wait_for(kWait), std::future_status::ready);
  const std::string id = submitted.get();
  std::string response;
  net::read_until(socket, net::dynamic_buffer(response), "\r\n\r\n");  // the head
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // 4 idle timeouts, nothing sent
  fake_->Emit(id, TextEvent("Late"));
  net::read_until(socket, net::dynamic_buffer(response), "Late");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // and again after a chunk
  fake_->Emit(id, TextEvent("!", "length"));
  boost::system::error_code ec;
  net::read(socket, net::dynamic_buffer(response), ec);
  EXPECT_EQ(ec, net::error::eof);
  EXPECT_NE(response.find("\"finish_reason\":\"length\""), std::string::npos) << response;
  EXPECT_NE(response.find("data: [DONE]"), std::string::npos) << response;
  EXPECT_TRUE(fake_->cancelled().empty());
}

TEST_F(HttpStreamTest, ValidationErrorsAreNotStreamed) {
  tcp::socket socket(io_);
  Send(socket, "/v1/completions", R"({"model": "tiny", "prompt": "a", "stream": true, "n": 2})");
  std::string response;
  net::read_until(socket, net::dynamic_buffer(response), "\r\n\r\n");
  EXPECT_EQ(response.rfind("HTTP/1.1 400", 0), 0u) << response;
  EXPECT_EQ(response.find("chunked"), std::string::npos) << response;
}

}  // namespace
}  // namespace inferd::server
