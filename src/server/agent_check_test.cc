#include "server/agent_check.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "serving/model_manager.h"
#include "serving/test_models.h"

namespace inferd::server {
namespace {

int Connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// Reads until the server closes the connection.
std::string ReadAll(int fd) {
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
  ::close(fd);
  return out;
}

std::unique_ptr<AgentCheckServer> StartServer(std::function<std::string()> reply,
                                              std::chrono::milliseconds refresh) {
  AgentCheckServerOptions o;
  o.refresh = refresh;
  auto server = AgentCheckServer::Start(o, std::move(reply));
  EXPECT_TRUE(server.ok()) << server.status().message();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(AgentCheckServerTest, WritesOneLineAndCloses) {
  auto server =
      StartServer([] { return std::string("up ready 42%\n"); }, std::chrono::milliseconds(0));
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(ReadAll(Connect(server->port())), "up ready 42%\n");
  // A client that sends something (HAProxy's agent-send) still gets the line.
  const int fd = Connect(server->port());
  ASSERT_EQ(::write(fd, "hello\n", 6), 6);
  EXPECT_EQ(ReadAll(fd), "up ready 42%\n");
}

TEST(AgentCheckServerTest, SurvivesResetsNonReadersAndAFlood) {
  std::atomic<int> calls{0};
  // A long refresh: the whole flood is answered from one statistics read.
  auto server = StartServer(
      [&] {
        ++calls;
        return std::string("up ready 7%\n");
      },
      std::chrono::hours(1));
  ASSERT_NE(server, nullptr);
  for (int i = 0; i < 200; ++i) {
    // Reset at once (SO_LINGER 0), or connect and never read, or read.
    const int fd = Connect(server->port());
    if (i % 3 == 0) {
      linger l{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      ::close(fd);
    } else if (i % 3 == 1) {
      ::close(fd);
    } else {
      EXPECT_EQ(ReadAll(fd), "up ready 7%\n");
    }
  }
  EXPECT_EQ(ReadAll(Connect(server->port())), "up ready 7%\n");
  EXPECT_EQ(calls.load(), 1);
  server->Stop();
  server->Stop();  // idempotent
}

TEST(AgentCheckServerTest, RefusesBadHostAndBusyPort) {
  AgentCheckServerOptions o;
  o.host = "not-an-address";
  auto bad = AgentCheckServer::Start(o, [] { return std::string("x\n"); });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("invalid host"), std::string::npos);
  auto first = StartServer([] { return std::string("x\n"); }, std::chrono::milliseconds(0));
  ASSERT_NE(first, nullptr);
  o.host = "127.0.0.1";
  o.port = first->port();
  auto busy = AgentCheckServer::Start(o, [] { return std::string("x\n"); });
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(busy.status().message().find("cannot bind"), std::string::npos);
}

TEST(ManagerAgentReplyTest, DownWhileLoadingThenWeightThenDrain) {
  const auto repo = serving::testing::FreshRepository("agent_");
  serving::testing::WriteAddModel(repo / "double" / "1" / "model.onnx");
  serving::ModelManagerOptions o;
  o.repository = repo;
  o.total_threads = 1;
  auto manager = serving::ModelManager::Create(o);
  ASSERT_TRUE(manager.ok()) << manager.status().message();
  ManagerAgentReply full(manager->get(), 1.0, 1), half(manager->get(), 0.5, 1);
  EXPECT_EQ(full(), "down#not ready\n");  // the repository is not loaded yet
  ASSERT_TRUE((*manager)->Start().ok());
  // Idle: the capacity alone (the CPU share starts at 1).
  EXPECT_EQ(full(), "up ready 100%\n");
  EXPECT_EQ(half(), "up ready 50%\n");
  auto r = serving::testing::InferSync(
      **manager,
      serving::testing::Request("double", Tensor::FromVector<float>({1.f, 2.f}, {1, 2})));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(full().rfind("up ready ", 0), 0u);
  full.SetDraining();
  EXPECT_EQ(full(), "drain\n");
  // Only the one told drains (the other's weight now depends on the inference's timing).
  EXPECT_EQ(half().rfind("up ready ", 0), 0u);
}

}  // namespace
}  // namespace inferd::server
