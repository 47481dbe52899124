#include "tools/fleet_command.h"

#include <fstream>

namespace inferd::tools {

CLI::App* AddFleetSubcommand(CLI::App& app, FleetCommandOptions* o, FleetBalanceOptions* balance,
                             CLI::App** balance_cmd) {
  CLI::App* fleet = app.add_subcommand("fleet", "Tools for running several inferd nodes");
  fleet->require_subcommand(1, 1);
  CLI::App* cmd =
      fleet->add_subcommand("haproxy-config",
                            "Write an haproxy.cfg routing HTTP and gRPC over inferd nodes "
                            "(least connections, health checks, retries, agent weights)");
  cmd->add_option("--node", o->nodes,
                  "HOST:PORT[:WEIGHT][,grpc=PORT][,agent=PORT]: an inferd node by its HTTP port "
                  "(repeatable; weight 0..256, default 100)")
      ->required();
  cmd->add_option("--backup", o->backups,
                  "A standby node (same syntax), used only while every --node is down "
                  "(repeatable)");
  cmd->add_option("--balance", o->balance, "leastconn, random2 or roundrobin")
      ->capture_default_str();
  cmd->add_option("--grpc-port-offset", o->ports.grpc_port_offset,
                  "A node's gRPC port is its HTTP port + this, unless grpc=PORT (0 = none)")
      ->check(CLI::Range(-65535, 65535))
      ->capture_default_str();
  cmd->add_option("--agent-port-offset", o->ports.agent_port_offset,
                  "A node's agent-check port (inferd serve --agent-port) is its HTTP port + "
                  "this, unless agent=PORT (0 = no agent checks)")
      ->check(CLI::Range(-65535, 65535))
      ->capture_default_str();
  HaproxyConfigOptions& c = o->config;
  cmd->add_option("--http-bind", c.http_bind, "HOST:PORT of the HTTP frontend")
      ->capture_default_str();
  cmd->add_option("--grpc-bind", c.grpc_bind, "HOST:PORT of the gRPC (h2) frontend; '' = none")
      ->capture_default_str();
  cmd->add_option("--stats-socket", c.stats_socket, "Unix socket for HAProxy's CLI (show stat)");
  cmd->add_option("--stats-bind", c.stats_bind, "HOST:PORT serving HAProxy's /stats page");
  cmd->add_option("--check-inter-ms", c.check_inter_ms, "Health-check interval")
      ->capture_default_str();
  cmd->add_option("--fall", c.fall, "Failed checks before a node is marked down")
      ->capture_default_str();
  cmd->add_option("--rise", c.rise, "Passed checks before a node is marked up")
      ->capture_default_str();
  cmd->add_option("--agent-inter-ms", c.agent_inter_ms, "Agent-check interval")
      ->capture_default_str();
  cmd->add_option("--retries", c.retries, "Retries of a failed request, each on another node")
      ->capture_default_str();
  cmd->add_option("--server-timeout-ms", c.server_timeout_ms,
                  "Longest a node may take to answer before the request is retried")
      ->capture_default_str();
  cmd->add_option("--buffer-bytes", c.buffer_bytes,
                  "HAProxy's buffer (tune.bufsize): larger requests are not retried")
      ->capture_default_str();
  cmd->add_flag("--log", c.log, "Log every request to HAProxy's stdout (run with haproxy -db)");
  cmd->add_option("--output,-o", o->output, "Where to write the config ('-' = stdout)")
      ->capture_default_str();
  *balance_cmd = AddFleetBalanceSubcommand(*fleet, balance);
  return cmd;
}

Status FleetHaproxyConfigCommand(const FleetCommandOptions& o, std::ostream& out) {
  HaproxyConfigOptions config = o.config;
  config.nodes.clear();
  ASSIGN_OR_RETURN(config.balance, ParseFleetBalance(o.balance));
  FleetPortRules rules = o.ports;
  if (config.grpc_bind.empty()) rules.grpc_port_offset = 0;
  for (const auto* list : {&o.nodes, &o.backups}) {
    for (const std::string& spec : *list) {
      ASSIGN_OR_RETURN(FleetNode node, ParseFleetNode(spec, rules, list == &o.backups));
      config.nodes.push_back(node);
    }
  }
  ASSIGN_OR_RETURN(std::string text, HaproxyConfigText(config));
  if (o.output == "-") {
    out << text;
    return Status::Ok();
  }
  std::ofstream file(o.output, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) return InvalidArgument("cannot write '{}'", o.output);
  return Status::Ok();
}

}  // namespace inferd::tools
