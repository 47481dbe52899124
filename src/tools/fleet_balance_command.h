// `inferd fleet balance`: a controller beside HAProxy that takes a node slower than its peers out
// of service (docs/fleet.md, "A slow node: the fleet balancer"). It polls HAProxy's stats socket,
// feeds each backend's per-server counters to a FleetBalancer (tools/fleet_balancer.h) and
// applies its decisions on HAProxy's runtime API (drain with the agent check disabled; ready with
// it enabled again). HAProxy stays the router; nothing here touches the nodes.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/fleet_balancer.h"

namespace inferd::tools {

struct FleetBalanceOptions {
  std::string stats_socket;  // HAProxy's CLI socket (haproxy-config --stats-socket)
  std::vector<std::string> backends = {"inferd_http", "inferd_grpc"};
  int poll_ms = 20;
  double slower = FleetBalancerOptions{}.slower;
  int min_stall_ms = 30, window_ms = 500, events = 2, event_memory_ms = 2000;
  double probation_slower = FleetBalancerOptions{}.probation_slower;
  int hold_ms = 1000, max_hold_ms = 8000, probation_ms = 5000;
  int start_timeout_ms = 10000;  // for the stats socket to answer at start
  bool dry_run = false;          // log the decisions, change nothing
  std::string log_level = "info";
};

// Registers `balance` under the `fleet` subcommand.
CLI::App* AddFleetBalanceSubcommand(CLI::App& fleet, FleetBalanceOptions* options);

// The balancer's own settings from the command line's; InvalidArgument for inconsistent ones.
StatusOr<FleetBalancerOptions> BalancerOptionsFrom(const FleetBalanceOptions& o);

// Runs until SIGINT/SIGTERM (or, when `stop` is given, until it is non-zero), then returns every
// server it shed to service. Unavailable when the stats socket does not answer within
// start_timeout_ms; InvalidArgument when a backend is not in HAProxy's stats. Later socket
// errors (an HAProxy reload) are logged and the poll retried.
Status FleetBalanceCommand(const FleetBalanceOptions& o, const std::atomic<int>* stop = nullptr);

}  // namespace inferd::tools
