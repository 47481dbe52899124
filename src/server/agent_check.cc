#include "server/agent_check.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <thread>

#include "serving/model_config.h"
#include "serving/model_manager.h"

namespace inferd::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {
constexpr std::chrono::milliseconds kMinAcceptBackoff{5};
constexpr std::chrono::milliseconds kMaxAcceptBackoff{500};
}  // namespace

struct AgentCheckServer::Impl {
  AgentCheckServerOptions options;
  std::function<std::string()> reply_fn;
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_timer{ioc};
  std::chrono::milliseconds accept_backoff{0};
  std::atomic<bool> stopped{false};
  uint16_t port = 0;
  std::thread thread;
  // Only the I/O thread touches these.
  std::string reply;
  std::chrono::steady_clock::time_point reply_time{};

  void Accept();
  void OnAcceptError(const error_code& ec);
  void Answer(tcp::socket& socket);
  const std::string& CurrentReply();
};

const std::string& AgentCheckServer::Impl::CurrentReply() {
  const auto now = std::chrono::steady_clock::now();
  if (reply.empty() || now - reply_time >= options.refresh) {
    reply = reply_fn();
    reply_time = now;
  }
  return reply;
}

void AgentCheckServer::Impl::Answer(tcp::socket& socket) {
  const std::string& line = CurrentReply();
  // Non-blocking: a reply of a few bytes fits in a new socket's send buffer; if it does not
  // (a broken peer), the client gets what fit and the connection is closed anyway.
  ::send(socket.native_handle(), line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}

void AgentCheckServer::Impl::Accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (stopped.load()) return;
    if (ec) return OnAcceptError(ec);
    accept_backoff = std::chrono::milliseconds(0);
    Answer(socket);
    Accept();
  });
}

// Out of descriptors the connection stays in the backlog and the listener stays readable:
// re-arming at once would spin, so wait (doubling up to 0.5 s) until it clears.
void AgentCheckServer::Impl::OnAcceptError(const error_code& ec) {
  if (ec == net::error::operation_aborted) return;
  if (ec == net::error::connection_aborted) return Accept();
  if (accept_backoff.count() == 0) {
    spdlog::warn("agent check: cannot accept connections: {}; retrying", ec.message());
  }
  accept_backoff = std::clamp(accept_backoff * 2, kMinAcceptBackoff, kMaxAcceptBackoff);
  accept_timer.expires_after(accept_backoff);
  accept_timer.async_wait([this](error_code tec) {
    if (!tec && !stopped.load()) Accept();
  });
}

AgentCheckServer::AgentCheckServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AgentCheckServer::~AgentCheckServer() { Stop(); }

uint16_t AgentCheckServer::port() const { return impl_->port; }

StatusOr<std::unique_ptr<AgentCheckServer>> AgentCheckServer::Start(
    const AgentCheckServerOptions& options, std::function<std::string()> reply) {
  if (!reply) return InvalidArgument("agent check: no reply function");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->reply_fn = std::move(reply);
  error_code ec;
  auto address = net::ip::make_address(options.host, ec);
  if (ec) return InvalidArgument("agent check: invalid host address '{}'", options.host);
  tcp::endpoint endpoint(address, options.port);
  auto fail = [&](const char* what) {
    return Unavailable("agent check: cannot {} {}:{}: {}", what, options.host, options.port,
                       ec.message());
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
  impl->thread = std::thread([ioc = &impl->ioc] {
    for (;;) {
      try {
        ioc->run();
        return;
      } catch (const std::exception& e) {  // a bug worth a log line, not a dead listener
        spdlog::error("agent check: unexpected exception: {}", e.what());
      }
    }
  });
  return std::unique_ptr<AgentCheckServer>(new AgentCheckServer(std::move(impl)));
}

void AgentCheckServer::Stop() {
  if (impl_ == nullptr || impl_->stopped.exchange(true)) return;
  net::post(impl_->ioc, [impl = impl_.get()] {
    error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_timer.cancel();
  });
  impl_->ioc.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::vector<ModelSample> ManagerAgentReply::Samples() const {
  const int total_threads =
      inference_threads_ > 0 ? inference_threads_
                             : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<ModelSample> samples;
  for (const auto& s : manager_->GetStatistics()) {
    // Ensembles (no instances of their own) run on their steps' instances, counted on their own.
    if (s.instances <= 0) continue;
    // Threads per instance as serving resolved them at load (from the configured count;
    // autoscaling changes the count of running instances, not their threads).
    int threads = 0, configured = 0;
    if (auto config = manager_->GetConfig(s.name, s.version); config.ok()) {
      threads = static_cast<int>((*config)->inferd().threads_per_instance());
      configured = serving::ConfiguredInstanceCount(**config);
    }
    if (threads <= 0) threads = std::max(1, total_threads / std::max(1, configured));
    ModelSample sample{
        fmt::format("{}/{}", s.name, s.version), s.busy_ns, s.pending, s.instances, threads, {}};
    for (const serving::BatchStat& b : s.batch_stats) {
      sample.batches.push_back({b.batch_size, b.compute_infer.count,
                                b.compute_input.ns + b.compute_infer.ns + b.compute_output.ns});
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::string ManagerAgentReply::operator()() {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  return ReplyAt(now, std::chrono::seconds(cpu.tv_sec) + std::chrono::nanoseconds(cpu.tv_nsec));
}

std::string ManagerAgentReply::ReplyAt(std::chrono::nanoseconds now, std::chrono::nanoseconds cpu) {
  AgentInputs in;
  in.capacity = capacity_;
  if (draining_.load()) {
    in.state = NodeState::kDraining;
  } else if (!manager_->IsReady()) {
    in.state = NodeState::kNotReady;
  }
  if (in.state != NodeState::kReady) return AgentReply(in);
  const std::vector<ModelSample> samples = Samples();
  MutexLock l(&mu_);
  in.models = sampler_.Sample(now, samples, cpu);
  in.cpu_share = sampler_.cpu_share();
  in.speed = sampler_.speed();
  const bool shed = guard_.Shedding(now, in.speed, sampler_.excess_ns(), sampler_.speed_measured());
  if (shed != shedding_) {
    shedding_ = shed;
    if (shed) {
      spdlog::info(
          "agent check: the node runs at {:.0f}% of its unloaded speed: answering "
          "'drain' until it is faster again or probes",
          100 * in.speed);
    } else {
      spdlog::info("agent check: answering its weight again (speed {:.0f}%)", 100 * in.speed);
    }
  }
  if (shed) in.state = NodeState::kSlow;
  std::string reply = AgentReply(in);
  spdlog::debug("agent check: speed {:.2f}{} excess {:.2f} ms, CPU share {:.2f}: {}", in.speed,
                sampler_.speed_measured() ? "" : " (kept)", sampler_.excess_ns() / 1e6,
                in.cpu_share, reply.substr(0, reply.size() - 1));
  return reply;
}

}  // namespace inferd::server
