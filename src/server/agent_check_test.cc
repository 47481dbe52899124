#include "server/agent_check.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

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

// A reload is blue-green: the running version serves until the new one is ready, so the agent
// answers "up" before, while the new version loads, while the replaced one retires, and after.
// The replaced version's retirement is held open deterministically: its only worker runs a
// request whose callback blocks until the test releases it, and the manager waits for that
// version's requests before LoadModel returns.
TEST(ManagerAgentReplyTest, StaysUpThroughAVersionedReload) {
  const auto repo = serving::testing::FreshRepository("agent_reload_");
  serving::testing::WriteFile(
      repo / "m" / "config.pbtxt",
      "max_batch_size: 4\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n");
  serving::testing::WriteAddModel(repo / "m" / "1" / "model.onnx");
  serving::ModelManagerOptions o;
  o.repository = repo;
  o.total_threads = 1;
  o.retire_timeout = std::chrono::minutes(10);  // the release below ends the retirement
  auto manager = serving::ModelManager::Create(o);
  ASSERT_TRUE(manager.ok()) << manager.status().message();
  serving::ModelManager& m = **manager;
  ASSERT_TRUE(m.Start().ok());
  ManagerAgentReply agent(&m, 1.0, 1);
  std::vector<std::string> replies;
  auto sample = [&](int64_t t_ms) {
    replies.push_back(agent.ReplyAt(std::chrono::milliseconds(t_ms), std::chrono::milliseconds(0)));
    EXPECT_TRUE(m.IsModelReady("m"));  // some version serves at every instant
  };
  sample(0);
  // Version 1's only worker is held by a request.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  m.Infer(serving::testing::Request("m", Tensor::FromVector<float>({1.f}, {1, 1})),
          [&entered, released](Status, serving::InferenceResponse) {
            entered.set_value();
            released.wait();
          });
  entered.get_future().wait();
  serving::testing::WriteAddModel(repo / "m" / "2" / "model.onnx");
  std::future<Status> load = std::async(std::launch::async, [&] { return m.LoadModel("m"); });
  int64_t t = 1;
  while (!m.IsModelReady("m", 2)) sample(t++);  // version 2 loading, version 1 serving
  // Version 2 serves; version 1 retires (LoadModel waits for its held request).
  EXPECT_NE(load.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  sample(t++);
  release.set_value();
  EXPECT_TRUE(load.get().ok());
  sample(t++);
  EXPECT_GE(replies.size(), 3u);
  for (const std::string& r : replies) EXPECT_EQ(r.rfind("up ready ", 0), 0u) << r;
  // A reload that fails keeps version 2 serving, and the agent "up".
  serving::testing::WriteFile(repo / "m" / "3" / "model.onnx", "not a model");
  EXPECT_FALSE(m.LoadModel("m").ok());
  EXPECT_TRUE(m.IsModelReady("m", 2));
  EXPECT_EQ(agent.ReplyAt(std::chrono::milliseconds(t), {}).rfind("up ready ", 0), 0u);
}

}  // namespace
}  // namespace inferd::server
