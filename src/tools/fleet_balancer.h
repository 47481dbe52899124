// The decision logic of `inferd fleet balance` (docs/fleet.md, "A slow node: the fleet
// balancer"): from successive polls of HAProxy's per-server counters, find a server that is slow
// *compared with its peers* and take it out of service for a while.
//
// Why a controller outside the nodes: HAProxy 2.6's leastconn gives an idle server the key 0
// whatever its weight, so any non-zero weight keeps a slow node holding one request at a time
// (7-19% of them in the measurements), and those requests are the P99. Only state `drain` stops
// that. A node cannot tell by itself whether it is slow or the machine is (nodes sharing cores
// all measured themselves slow); HAProxy sees every node through the same clock and the same
// load, so comparing a node with its peers cancels what they share.
//
// Signals, per server, from HAProxy's cumulative `stot` (requests sent) and current `scur`
// (requests in flight) at each poll: completions in an interval = Δstot − Δscur.
//   - a stall: the server had requests in flight and completed none for longer than
//     max(min_stall, slower × the peers' median service time), while its peers completed at
//     least one request each on average in the same time (a pause of the whole machine stalls
//     every node and counts for none). A CPU quota (cgroup bandwidth) stops a busy process for
//     the rest of each period: a stall.
//   - a slow window: over `window`, busy time / completions (the service time of a node that has
//     work in flight: for one inference instance, the time per request without the queueing at
//     the node, which leastconn gives the fast nodes more of) is more than `slower` × the median
//     of its peers'. A node with fewer cores or threads: slow windows.
// `events_to_shed` such events within `event_memory` shed the server (drain): it gets no new
// requests for `hold`. Then it is *probed*: back in service at weight 1, so that least
// connections gives it one request at a time (it is chosen only while idle), and judged by
// `probation_slower` instead of `slower`; one event during probation sheds it again for twice the
// previous hold (at most max_hold). A probation passed without one restores it (its configured
// weight, the agent check). A probe of a node still slow therefore costs about one request.
// Never more than half of the servers (rounded down) are shed, and never the last usable one.
//
// The class is pure (time from the injected Clock, no I/O): the caller applies the returned
// actions (tools/haproxy_stats.h has the runtime-API commands). Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"

namespace inferd::tools {

// One server of one backend at one poll (HAProxy `show stat`).
struct ServerSample {
  std::string name;       // svname
  bool usable = false;    // may take new requests: status UP (or "UP n/m"), not DRAIN/MAINT/DOWN
  int64_t total = 0;      // stot: requests sent to it so far (cumulative)
  int64_t in_flight = 0;  // scur: requests it holds now
};

struct FleetBalancerOptions {
  double slower = 2.5;  // "slow" = taking this many times its peers' median service time
  std::chrono::milliseconds min_stall{30};  // shorter stalls never count
  std::chrono::milliseconds window{500};    // service-time window
  int events_to_shed = 2;                   // stalls or slow windows within event_memory
  std::chrono::milliseconds event_memory{2000};
  std::chrono::milliseconds hold{1000};  // first shed; doubled per failed probation
  std::chrono::milliseconds max_hold{8000};
  std::chrono::milliseconds probation{5000};  // probed at weight 1: one event sheds again
  double probation_slower = 1.5;              // the bar while on probation
  // A poll interval longer than this (the controller was paused) resets stalls and the window.
  std::chrono::milliseconds max_gap{1000};
};

struct BalancerAction {
  // kShed: drain. kProbe: ready at weight 1 (the agent still off). kRestore: ready at the
  // configured weight, the agent on again.
  enum Kind { kShed, kProbe, kRestore };
  Kind kind;
  std::string server;
  std::string reason;  // for the log: what was measured
};

class FleetBalancer {
 public:
  FleetBalancer(FleetBalancerOptions options, const Clock* clock);

  // Feeds one poll of every server of the backend; returns the changes to apply now, in order.
  // A server missing from `servers` is forgotten (one shed or on probation with a kRestore).
  std::vector<BalancerAction> Update(const std::vector<ServerSample>& servers);

  // kRestore for every server shed or on probation now (the controller's exit must not leave
  // nodes drained or at weight 1).
  std::vector<BalancerAction> ReturnAll();

  bool IsShed(const std::string& server) const;
  // The current service-time estimate in ms (0 = none yet), for logs and tests.
  double ServiceMs(const std::string& server) const;

 private:
  using TimePoint = Clock::TimePoint;
  using Duration = std::chrono::duration<double, std::milli>;
  struct Server {
    int64_t total = 0, in_flight = 0, done = 0;  // last sample; completions so far
    bool usable = false;
    Duration stall{0};  // busy with no completion since
    int64_t peers_done_at_stall = 0;
    bool stall_counted = false;
    Duration busy{0};  // in the current window
    int64_t window_done = 0;
    double service_ms = 0;  // 0 = unknown
    std::deque<TimePoint> events;
    bool shed = false, on_probation = false;
    TimePoint until{}, returned_at{};
    Duration last_hold{0};
  };

  void Observe(Server& s, const ServerSample& sample, Duration dt);
  void CloseWindow(std::vector<BalancerAction>& out);
  void CheckStalls(std::vector<BalancerAction>& out);
  void Event(const std::string& name, Server& s, std::string reason,
             std::vector<BalancerAction>& out);
  void ReturnExpired(std::vector<BalancerAction>& out);
  double Slower(const Server& s) const;  // the factor that makes `s` slow now
  double PeersMedianServiceMs(const std::string& name) const;
  int64_t PeersDone(const std::string& name) const;
  bool MayShedOneMore() const;

  FleetBalancerOptions options_;
  const Clock* clock_;
  std::map<std::string, Server> servers_;
  bool started_ = false;
  TimePoint last_{}, window_start_{};
};

}  // namespace inferd::tools
