// `inferd fleet haproxy-config`: writes an haproxy.cfg that routes HTTP and gRPC over a list of
// inferd nodes (tools/haproxy_config.h builds the text; docs/fleet.md, "Routing on HAProxy").
// `inferd fleet balance` (tools/fleet_balance_command.h) drains a node slower than its peers.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/fleet_balance_command.h"
#include "tools/haproxy_config.h"

namespace inferd::tools {

struct FleetCommandOptions {
  std::vector<std::string> nodes;    // --node specs (ParseFleetNode)
  std::vector<std::string> backups;  // --backup specs
  std::string balance = "leastconn";
  FleetPortRules ports;
  HaproxyConfigOptions config;  // everything but nodes and balance
  std::string output = "-";     // file, or "-" for stdout
};

// Registers `fleet` with its `haproxy-config` and `balance` subcommands on `app`; returns the
// `haproxy-config` subcommand and sets *balance_cmd to `balance` (parsed() when it ran).
CLI::App* AddFleetSubcommand(CLI::App& app, FleetCommandOptions* options,
                             FleetBalanceOptions* balance, CLI::App** balance_cmd);

// Parses the node specs, builds the config and writes it to options.output (`out` for "-").
// Nothing is written when a node or option is bad.
Status FleetHaproxyConfigCommand(const FleetCommandOptions& options, std::ostream& out);

}  // namespace inferd::tools
