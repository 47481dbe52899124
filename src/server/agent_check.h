// HAProxy's agent check for `inferd serve --agent-port` (docs/fleet.md, "Routing on HAProxy"):
// a TCP listener that writes one reply line to every connection and closes it
// (AgentCheckServer), and the reply computed from a ModelManager's statistics
// (ManagerAgentReply; the formula is server/agent_weight.h).
//
// The listener holds no per-connection state: a connection gets its line written without
// blocking (it always fits in a new socket's send buffer), a FIN, and is closed — a client that
// never reads, resets, or connects in a flood costs one accept and one write each, never a
// thread or a buffer. Nothing sent by the client is read.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "common/status.h"
#include "server/agent_weight.h"

namespace inferd::serving {
class ModelManager;
}

namespace inferd::server {

struct AgentCheckServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0 = any free port (see port())
  // A reply is reused for this long: a flood of connections costs one statistics read per
  // period, not one per connection.
  std::chrono::milliseconds refresh{100};
};

class AgentCheckServer {
 public:
  // Binds, listens and starts one I/O thread; `reply` is called on it (at most once per
  // `refresh`) and must return a '\n'-terminated line. UNAVAILABLE if the port is in use,
  // INVALID_ARGUMENT for a bad host.
  static StatusOr<std::unique_ptr<AgentCheckServer>> Start(const AgentCheckServerOptions& options,
                                                           std::function<std::string()> reply);
  // Stops accepting and joins the thread. Idempotent; the destructor calls it.
  void Stop();
  ~AgentCheckServer();
  uint16_t port() const;

  struct Impl;

 private:
  explicit AgentCheckServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The reply of a node serving `manager` (which must outlive it): "drain" once SetDraining was
// called, "down#not ready" while !manager->IsReady(), "drain#slow ..." while the SlowNodeGuard
// sheds, else "up ready W%" from every loaded version's statistics (busy time and instances now,
// for the utilization over the time since the previous call; pending requests; per-batch-size
// execution times, for the speed; threads per instance as serving resolves them from
// `inference_threads`; the process's CPU time). Thread-safe.
//
// A reload does not change the reply: serving's reloads are blue-green (the running versions
// serve until the new ones are ready, then readiness switches atomically), so a node stays "up"
// through them (docs/fleet.md, "Reloads").
class ManagerAgentReply {
 public:
  // inference_threads: the manager's total_threads (0 = the machine's cores).
  ManagerAgentReply(const serving::ModelManager* manager, double capacity, int inference_threads,
                    SlowNodePolicy slow = {})
      : manager_(manager),
        capacity_(capacity),
        inference_threads_(inference_threads),
        guard_(slow) {}
  std::string operator()() EXCLUDES(mu_);
  // As operator() at `now` (steady clock since its epoch) with the process's CPU time `cpu`:
  // for tests, which drive time by hand.
  std::string ReplyAt(std::chrono::nanoseconds now, std::chrono::nanoseconds cpu) EXCLUDES(mu_);
  // The node begins its shutdown: answer "drain" from now on.
  void SetDraining() { draining_.store(true); }

 private:
  std::vector<ModelSample> Samples() const;

  const serving::ModelManager* manager_;
  const double capacity_;
  const int inference_threads_;
  std::atomic<bool> draining_{false};
  Mutex mu_;
  LoadSampler sampler_ GUARDED_BY(mu_);
  SlowNodeGuard guard_ GUARDED_BY(mu_);
  bool shedding_ GUARDED_BY(mu_) = false;  // for the log line when it changes
};

}  // namespace inferd::server
