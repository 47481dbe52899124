// The HAProxy configuration behind `inferd fleet haproxy-config` (docs/fleet.md, "Routing on
// HAProxy"): node specs parsed and validated, and the haproxy.cfg text built by a pure function,
// so both are unit-tested without HAProxy (the fleet tests also run `haproxy -c` on the output).
//
// The config has an HTTP frontend/backend (KServe v2 and OpenAI routes) and, unless disabled, a
// gRPC one (`proto h2` on the bind and on every server line: HAProxy speaks h2c to the nodes).
// Both backends balance by least connections (or random(2), or round-robin for comparisons),
// health-check every node with `GET /v2/health/ready` on its HTTP port, retry a failed request on
// another node (`retry-on` + `retries` + `option redispatch`), keep `backup` nodes for when every
// active node is down, and take each node's weight from its agent-check port (`inferd serve
// --agent-port`, server/agent_check.h). With agent checks, each frontend also has a fallback
// backend over the same nodes without agent checks (`inferd_http_fallback`,
// `inferd_grpc_fallback`), used while no server of the main backend is usable (`nbsrv() eq 0`:
// every agent answers drain, say because every node finds itself slow, and no backup is up).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace inferd::tools {

// One inferd node as HAProxy sees it.
struct FleetNode {
  std::string host;    // IPv4 literal, IPv6 literal (without brackets) or DNS name
  int http_port = 0;   // KServe HTTP port, also the health-check port
  int grpc_port = 0;   // KServe gRPC port; 0 when the config has no gRPC backend
  int agent_port = 0;  // agent-check port; 0 = no agent check for this node
  int weight = 100;    // HAProxy's initial weight (0..256); the agent's percentage scales it
  bool backup = false;
};

// Port defaults applied to node specs that do not name their ports.
struct FleetPortRules {
  int grpc_port_offset = 1;   // gRPC port = HTTP port + offset (inferd's 8000/8001); 0 = no gRPC
  int agent_port_offset = 3;  // agent port = HTTP port + offset; 0 = no agent checks
};

// Parses "HOST:PORT[:WEIGHT][,grpc=PORT][,agent=PORT]" ("[::1]:8000:50,agent=9000" for IPv6;
// agent=0 turns the node's agent check off). Errors name the spec and what is wrong: a bad host,
// a port outside 1..65535 (also after adding an offset), a weight outside 0..256, an unknown key.
StatusOr<FleetNode> ParseFleetNode(const std::string& spec, const FleetPortRules& rules,
                                   bool backup);

enum class FleetBalance { kLeastConn, kRandom2, kRoundRobin };
// "leastconn", "random2" (HAProxy's random(2): the less loaded of two random nodes), "roundrobin".
StatusOr<FleetBalance> ParseFleetBalance(const std::string& name);

struct HaproxyConfigOptions {
  std::vector<FleetNode> nodes;  // active and backup nodes; at least one active
  FleetBalance balance = FleetBalance::kLeastConn;
  std::string http_bind = "127.0.0.1:8080";  // HOST:PORT of the HTTP frontend
  std::string grpc_bind = "127.0.0.1:8081";  // HOST:PORT of the gRPC frontend; "" = none
  std::string stats_socket;                  // unix socket path for `show stat`; "" = none
  std::string stats_bind;                    // HOST:PORT serving /stats (HTML, ;csv); "" = none
  int check_inter_ms = 1000;                 // health-check interval
  int fall = 2;                              // failed checks before a node is marked down
  int rise = 2;                              // passed checks before it is marked up again
  int agent_inter_ms = 1000;                 // agent-check interval
  int retries = 3;  // attempts after the first; every retry goes to another node
  int connect_timeout_ms = 1000;
  int server_timeout_ms = 60000;  // longest a node may take to answer (a retry on expiry)
  int client_timeout_ms = 60000;
  // HAProxy copies a request into one buffer to be able to retry it; bigger requests are not
  // retried. Also its limit on a request's head.
  int buffer_bytes = 65536;
  int maxconn = 4096;
  bool log = false;  // one log line per request on HAProxy's stdout (for haproxy -db)
};

// Checks `options` (nodes as ParseFleetNode does, no duplicate address, at least one active node,
// gRPC ports on every node when there is a gRPC frontend, binds, ranges) and returns the
// haproxy.cfg text. Pure: no file, no network.
StatusOr<std::string> HaproxyConfigText(const HaproxyConfigOptions& options);

}  // namespace inferd::tools
