#include "tools/haproxy_config.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <sstream>

namespace inferd::tools {
namespace {

bool ParseInt(std::string_view text, int* out) {
  if (text.empty() || text.size() > 9) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool IsIpv4(const std::string& host) {
  in_addr a;
  return inet_pton(AF_INET, host.c_str(), &a) == 1;
}

bool IsIpv6(const std::string& host) {
  in6_addr a;
  return inet_pton(AF_INET6, host.c_str(), &a) == 1;
}

// RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens. All-digit names
// that are not valid IPv4 ("256.1.1.1", "1.2.3") are refused: they are mistyped addresses.
bool IsDnsName(const std::string& host) {
  if (host.empty() || host.size() > 253) return false;
  bool all_digits_and_dots = true;
  size_t label = 0;
  for (size_t i = 0; i <= host.size(); ++i) {
    if (i == host.size() || host[i] == '.') {
      if (label == 0 || label > 63 || host[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(host[i]);
    if (!std::isalnum(c) && c != '-') return false;
    if (c == '-' && label == 0) return false;
    if (!std::isdigit(c)) all_digits_and_dots = false;
    ++label;
  }
  return !all_digits_and_dots;
}

Status CheckPort(int port, const std::string& spec, const char* what) {
  if (port < 1 || port > 65535) {
    return InvalidArgument("'{}': {} {} is outside 1..65535", spec, what, port);
  }
  return Status::Ok();
}

// Splits "HOST:REST" with HOST possibly "[v6]"; validates HOST.
Status SplitHost(const std::string& spec, const std::string& addr, std::string* host,
                 std::string* rest) {
  size_t colon = 0;
  if (!addr.empty() && addr[0] == '[') {
    const size_t close = addr.find(']');
    if (close == std::string::npos || close + 1 >= addr.size() || addr[close + 1] != ':') {
      return InvalidArgument("'{}': expected [IPv6]:PORT", spec);
    }
    *host = addr.substr(1, close - 1);
    if (!IsIpv6(*host)) return InvalidArgument("'{}': '{}' is not an IPv6 address", spec, *host);
    colon = close + 1;
  } else {
    colon = addr.find(':');
    if (colon == std::string::npos) return InvalidArgument("'{}': expected HOST:PORT", spec);
    *host = addr.substr(0, colon);
    if (!IsIpv4(*host) && !IsDnsName(*host)) {
      return InvalidArgument("'{}': '{}' is not an IPv4 address or host name", spec, *host);
    }
  }
  *rest = addr.substr(colon + 1);
  return Status::Ok();
}

// "HOST:PORT" of a bind line.
Status CheckBind(const std::string& bind, const char* flag) {
  std::string host, rest;
  RETURN_IF_ERROR(SplitHost(bind, bind, &host, &rest).WithContext(flag));
  int port = 0;
  if (!ParseInt(rest, &port)) return InvalidArgument("{}: '{}': bad port '{}'", flag, bind, rest);
  return CheckPort(port, bind, "port").WithContext(flag);
}

Status ApplyNodeKey(const std::string& spec, const std::string& item, FleetNode* node) {
  const size_t eq = item.find('=');
  const std::string key = item.substr(0, eq);
  int value = 0;
  if (eq == std::string::npos || !ParseInt(item.substr(eq + 1), &value)) {
    return InvalidArgument("'{}': expected grpc=PORT or agent=PORT, got '{}'", spec, item);
  }
  if (key == "grpc") {
    RETURN_IF_ERROR(CheckPort(value, spec, "gRPC port"));
    node->grpc_port = value;
  } else if (key == "agent") {
    if (value != 0) RETURN_IF_ERROR(CheckPort(value, spec, "agent port"));
    node->agent_port = value;
  } else {
    return InvalidArgument("'{}': unknown key '{}' (grpc=PORT, agent=PORT)", spec, key);
  }
  return Status::Ok();
}

std::string Address(const FleetNode& n) {
  return n.host.find(':') != std::string::npos ? "[" + n.host + "]" : n.host;
}

const char* BalanceLine(FleetBalance b) {
  switch (b) {
    case FleetBalance::kLeastConn:
      return "leastconn";
    case FleetBalance::kRandom2:
      return "random(2)";
    case FleetBalance::kRoundRobin:
      return "roundrobin";
  }
  return "leastconn";
}

Status CheckOptions(const HaproxyConfigOptions& o) {
  if (o.nodes.empty()) return InvalidArgument("no nodes: give at least one --node HOST:PORT");
  bool active = false;
  std::set<std::string> seen;
  for (const FleetNode& n : o.nodes) {
    const std::string name = fmt::format("{}:{}", Address(n), n.http_port);
    if (!seen.insert(name).second) return InvalidArgument("node {} is listed twice", name);
    RETURN_IF_ERROR(CheckPort(n.http_port, name, "HTTP port"));
    if (n.weight < 0 || n.weight > 256) {
      return InvalidArgument("node {}: weight {} is outside 0..256", name, n.weight);
    }
    if (!o.grpc_bind.empty() && n.grpc_port == 0) {
      return InvalidArgument(
          "node {} has no gRPC port (grpc=PORT or a gRPC port offset), but "
          "the config has a gRPC frontend",
          name);
    }
    active = active || !n.backup;
  }
  if (!active) return InvalidArgument("every node is a backup: give at least one --node");
  RETURN_IF_ERROR(CheckBind(o.http_bind, "HTTP bind"));
  if (!o.grpc_bind.empty()) RETURN_IF_ERROR(CheckBind(o.grpc_bind, "gRPC bind"));
  if (!o.stats_bind.empty()) RETURN_IF_ERROR(CheckBind(o.stats_bind, "stats bind"));
  if (!o.stats_socket.empty() && o.stats_socket[0] != '/') {
    // HAProxy reads anything else as HOST:PORT.
    return InvalidArgument("stats socket path '{}' must be absolute", o.stats_socket);
  }
  if (o.stats_socket.find_first_of(" \t\n\"'#") != std::string::npos) {
    return InvalidArgument("stats socket path '{}' has a space, quote or '#'", o.stats_socket);
  }
  auto range = [](int v, int lo, int hi, const char* what) -> Status {
    if (v < lo || v > hi) return InvalidArgument("{} {} is outside {}..{}", what, v, lo, hi);
    return Status::Ok();
  };
  RETURN_IF_ERROR(range(o.check_inter_ms, 10, 3600000, "check interval (ms)"));
  RETURN_IF_ERROR(range(o.agent_inter_ms, 10, 3600000, "agent interval (ms)"));
  RETURN_IF_ERROR(range(o.fall, 1, 100, "fall"));
  RETURN_IF_ERROR(range(o.rise, 1, 100, "rise"));
  RETURN_IF_ERROR(range(o.retries, 0, 100, "retries"));
  RETURN_IF_ERROR(range(o.connect_timeout_ms, 1, 3600000, "connect timeout (ms)"));
  RETURN_IF_ERROR(range(o.server_timeout_ms, 1, 86400000, "server timeout (ms)"));
  RETURN_IF_ERROR(range(o.client_timeout_ms, 1, 86400000, "client timeout (ms)"));
  RETURN_IF_ERROR(range(o.buffer_bytes, 16384, 64 << 20, "buffer size (bytes)"));
  return range(o.maxconn, 1, 1 << 20, "maxconn");
}

// Whether any active node has an agent check (then the config has fallback backends).
bool HasAgents(const HaproxyConfigOptions& o) {
  for (const FleetNode& n : o.nodes) {
    if (!n.backup && n.agent_port != 0) return true;
  }
  return false;
}

// The server lines of one backend; `grpc` selects the gRPC port and `proto h2`, `agents` whether
// the nodes' agent checks are used.
void WriteServers(const HaproxyConfigOptions& o, bool grpc, bool agents, std::ostringstream& out) {
  int active = 0, backup = 0;
  for (const FleetNode& n : o.nodes) {
    const std::string name =
        n.backup ? fmt::format("backup{}", ++backup) : fmt::format("node{}", ++active);
    out << fmt::format("    server {} {}:{} weight {}", name, Address(n),
                       grpc ? n.grpc_port : n.http_port, n.weight);
    // The health check always goes to the HTTP port, over HTTP/1.1.
    out << fmt::format(" check port {}", n.http_port);
    if (grpc) out << " proto h2 check-proto h1";
    if (agents && n.agent_port != 0) {
      out << fmt::format(" agent-check agent-port {}", n.agent_port);
    }
    if (n.backup) out << " backup";
    out << "\n";
  }
}

void WriteBackend(const HaproxyConfigOptions& o, const std::string& name, bool grpc, bool agents,
                  std::ostringstream& out) {
  out << "backend " << name << "\n";
  out << "    balance " << BalanceLine(o.balance) << "\n";
  // A request can only be retried if HAProxy holds all of it when it sends it: wait for the body
  // (clients often write the head and the body separately). Not for gRPC, whose bidirectional
  // streams (ModelStreamInfer) must flow.
  if (!grpc) out << "    option http-buffer-request\n";
  out << "    option httpchk\n";
  out << "    http-check send meth GET uri /v2/health/ready\n";
  out << "    http-check expect status 200\n";
  const bool any_agent = std::any_of(o.nodes.begin(), o.nodes.end(),
                                     [](const FleetNode& n) { return n.agent_port != 0; });
  if (agents && any_agent) {
    out << fmt::format("    default-server inter {}ms fall {} rise {} agent-inter {}ms\n",
                       o.check_inter_ms, o.fall, o.rise, o.agent_inter_ms);
  } else {
    out << fmt::format("    default-server inter {}ms fall {} rise {}\n", o.check_inter_ms, o.fall,
                       o.rise);
  }
  WriteServers(o, grpc, agents, out);
  out << "\n";
}

}  // namespace

StatusOr<FleetNode> ParseFleetNode(const std::string& spec, const FleetPortRules& rules,
                                   bool backup) {
  FleetNode node;
  node.backup = backup;
  std::vector<std::string> items;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
  if (items.empty() || items[0].empty()) return InvalidArgument("empty node spec");
  std::string rest;
  RETURN_IF_ERROR(SplitHost(spec, items[0], &node.host, &rest));
  const size_t colon = rest.find(':');
  const std::string port = rest.substr(0, colon);
  if (!ParseInt(port, &node.http_port)) {
    return InvalidArgument("'{}': bad port '{}' (HOST:PORT[:WEIGHT])", spec, port);
  }
  RETURN_IF_ERROR(CheckPort(node.http_port, spec, "port"));
  if (colon != std::string::npos) {
    const std::string weight = rest.substr(colon + 1);
    if (!ParseInt(weight, &node.weight) || node.weight < 0 || node.weight > 256) {
      return InvalidArgument("'{}': weight '{}' is not an integer in 0..256", spec, weight);
    }
  }
  if (rules.grpc_port_offset != 0) {
    node.grpc_port = node.http_port + rules.grpc_port_offset;
    RETURN_IF_ERROR(CheckPort(node.grpc_port, spec, "gRPC port (port + offset)"));
  }
  if (rules.agent_port_offset != 0) {
    node.agent_port = node.http_port + rules.agent_port_offset;
    RETURN_IF_ERROR(CheckPort(node.agent_port, spec, "agent port (port + offset)"));
  }
  for (size_t i = 1; i < items.size(); ++i) RETURN_IF_ERROR(ApplyNodeKey(spec, items[i], &node));
  return node;
}

StatusOr<FleetBalance> ParseFleetBalance(const std::string& name) {
  if (name == "leastconn") return FleetBalance::kLeastConn;
  if (name == "random2" || name == "random(2)") return FleetBalance::kRandom2;
  if (name == "roundrobin") return FleetBalance::kRoundRobin;
  return InvalidArgument("unknown balance '{}' (leastconn, random2, roundrobin)", name);
}

StatusOr<std::string> HaproxyConfigText(const HaproxyConfigOptions& o) {
  RETURN_IF_ERROR(CheckOptions(o));
  std::ostringstream out;
  out << "# Generated by `inferd fleet haproxy-config` (docs/fleet.md, \"Routing on HAProxy\").\n";
  out << "global\n";
  out << fmt::format("    maxconn {}\n", o.maxconn);
  out << fmt::format("    tune.bufsize {}\n", o.buffer_bytes);
  if (!o.stats_socket.empty()) {
    out << fmt::format("    stats socket {} mode 600 level admin\n", o.stats_socket);
  }
  if (o.log) out << "    log stdout format raw local0\n";
  out << "\n";
  out << "defaults\n";
  out << "    mode http\n";
  if (o.log) out << "    log global\n    option httplog\n";
  out << "    option http-keep-alive\n";
  out << fmt::format("    timeout connect {}ms\n", o.connect_timeout_ms);
  out << fmt::format("    timeout client {}ms\n", o.client_timeout_ms);
  out << fmt::format("    timeout server {}ms\n", o.server_timeout_ms);
  out << fmt::format("    timeout check {}ms\n", o.check_inter_ms);
  // A request that fails on a node before any response byte came back is sent again, each time
  // to another node; a 503 (a node shutting down or with a full queue) is retried the same way.
  out << fmt::format("    retries {}\n", o.retries);
  out << "    option redispatch 1\n";
  out << "    retry-on conn-failure empty-response response-timeout 503\n";
  out << "\n";
  // While no agent-weighted server is usable (every node drained by its agent, or down, and no
  // backup up), requests go to the same nodes without agent checks: agents that all shed for
  // being slow (a machine slow everywhere) must not leave the fleet with nowhere to send.
  const bool agents = HasAgents(o);
  auto frontend = [&](const char* name, const std::string& bind, const char* proto) {
    out << "frontend " << name << "\n";
    out << fmt::format("    bind {}{}\n", bind, proto);
    if (agents) {
      out << fmt::format("    use_backend {}_fallback if {{ nbsrv({}) eq 0 }}\n", name, name);
    }
    out << "    default_backend " << name << "\n\n";
  };
  frontend("inferd_http", o.http_bind, "");
  if (!o.grpc_bind.empty()) frontend("inferd_grpc", o.grpc_bind, " proto h2");
  if (!o.stats_bind.empty()) {
    out << "frontend inferd_stats\n";
    out << fmt::format("    bind {}\n", o.stats_bind);
    out << "    stats enable\n    stats uri /stats\n    stats refresh 5s\n\n";
  }
  for (const bool grpc : {false, true}) {
    if (grpc && o.grpc_bind.empty()) continue;
    const std::string name = grpc ? "inferd_grpc" : "inferd_http";
    WriteBackend(o, name, grpc, true, out);
    if (agents) WriteBackend(o, name + "_fallback", grpc, false, out);
  }
  return out.str();
}

}  // namespace inferd::tools
