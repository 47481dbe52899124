#include "tools/haproxy_config.h"

#include <gtest/gtest.h>

namespace inferd::tools {
namespace haproxy_config_test {
namespace {

FleetNode Node(const std::string& spec, bool backup = false, FleetPortRules rules = {}) {
  auto n = ParseFleetNode(spec, rules, backup);
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.ok() ? *n : FleetNode{};
}

std::string Error(const std::string& spec, FleetPortRules rules = {}) {
  auto n = ParseFleetNode(spec, rules, false);
  return n.ok() ? "" : n.status().message();
}

TEST(HaproxyConfigTest, ParsesNodeSpecsWithOffsetsAndKeys) {
  FleetNode n = Node("127.0.0.1:8000");
  EXPECT_EQ(n.host, "127.0.0.1");
  EXPECT_EQ(n.http_port, 8000);
  EXPECT_EQ(n.grpc_port, 8001);
  EXPECT_EQ(n.agent_port, 8003);
  EXPECT_EQ(n.weight, 100);
  n = Node("node-a.example:9000:40,grpc=7001,agent=7003");
  EXPECT_EQ(n.host, "node-a.example");
  EXPECT_EQ(n.weight, 40);
  EXPECT_EQ(n.grpc_port, 7001);
  EXPECT_EQ(n.agent_port, 7003);
  n = Node("[::1]:8000:0,agent=0");
  EXPECT_EQ(n.host, "::1");
  EXPECT_EQ(n.weight, 0);
  EXPECT_EQ(n.agent_port, 0);
  n = Node("10.0.0.1:8000", false, FleetPortRules{.grpc_port_offset = 0, .agent_port_offset = 0});
  EXPECT_EQ(n.grpc_port, 0);
  EXPECT_EQ(n.agent_port, 0);
}

TEST(HaproxyConfigTest, RefusesBadNodeSpecsNamingTheProblem) {
  EXPECT_NE(Error("").find("empty"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1").find("HOST:PORT"), std::string::npos);
  EXPECT_NE(Error("256.0.0.1:8000").find("'256.0.0.1' is not"), std::string::npos);
  EXPECT_NE(Error("1.2.3:8000").find("not an IPv4"), std::string::npos);
  EXPECT_NE(Error("bad_host:8000").find("not an IPv4"), std::string::npos);
  EXPECT_NE(Error("-a:8000").find("not an IPv4"), std::string::npos);
  EXPECT_NE(Error("[::1:8000").find("IPv6"), std::string::npos);
  EXPECT_NE(Error("[zz::1]:8000").find("not an IPv6"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:0").find("outside 1..65535"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:65536").find("outside 1..65535"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:80x").find("bad port '80x'"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:").find("bad port"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:8000:257").find("weight '257'"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:8000:-1").find("weight"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:65535").find("gRPC port (port + offset) 65536"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:8000,grpc=0").find("gRPC port 0"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:8000,agent").find("expected grpc=PORT"), std::string::npos);
  EXPECT_NE(Error("127.0.0.1:8000,http=1").find("unknown key 'http'"), std::string::npos);
}

HaproxyConfigOptions ThreeNodes() {
  HaproxyConfigOptions o;
  o.nodes = {Node("127.0.0.1:8000"), Node("127.0.0.1:8010:50"),
             Node("127.0.0.1:8020,agent=0", true)};
  o.stats_socket = "/tmp/haproxy.sock";
  return o;
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

TEST(HaproxyConfigTest, WritesHttpAndGrpcBackendsWithChecksRetriesAndAgents) {
  auto text = HaproxyConfigText(ThreeNodes());
  ASSERT_TRUE(text.ok()) << text.status().message();
  const std::string& t = *text;
  EXPECT_TRUE(Has(t, "    stats socket /tmp/haproxy.sock mode 600 level admin\n"));
  EXPECT_TRUE(Has(t,
                  "    retries 3\n    option redispatch 1\n"
                  "    retry-on conn-failure empty-response response-timeout 503\n"));
  EXPECT_TRUE(Has(t, "frontend inferd_http\n    bind 127.0.0.1:8080\n"));
  EXPECT_TRUE(Has(t, "frontend inferd_grpc\n    bind 127.0.0.1:8081 proto h2\n"));
  EXPECT_TRUE(Has(t,
                  "backend inferd_http\n    balance leastconn\n"
                  "    option http-buffer-request\n    option httpchk\n"
                  "    http-check send meth GET uri /v2/health/ready\n"
                  "    http-check expect status 200\n"
                  "    default-server inter 1000ms fall 2 rise 2 agent-inter 1000ms\n"));
  EXPECT_TRUE(Has(t,
                  "    server node1 127.0.0.1:8000 weight 100 check port 8000 agent-check "
                  "agent-port 8003\n"));
  EXPECT_TRUE(Has(t,
                  "    server node2 127.0.0.1:8010 weight 50 check port 8010 agent-check "
                  "agent-port 8013\n"));
  EXPECT_TRUE(Has(t, "    server backup1 127.0.0.1:8020 weight 100 check port 8020 backup\n"));
  EXPECT_TRUE(Has(t,
                  "    server node1 127.0.0.1:8001 weight 100 check port 8000 proto h2 "
                  "check-proto h1 agent-check agent-port 8003\n"));
  EXPECT_TRUE(Has(t,
                  "    server backup1 127.0.0.1:8021 weight 100 check port 8020 proto h2 "
                  "check-proto h1 backup\n"));
  EXPECT_TRUE(Has(t, "backend inferd_grpc\n    balance leastconn\n    option httpchk\n"));
  // While every agent-weighted server is drained or down: the same nodes without agents.
  EXPECT_TRUE(Has(t,
                  "frontend inferd_http\n    bind 127.0.0.1:8080\n"
                  "    use_backend inferd_http_fallback if { nbsrv(inferd_http) eq 0 }\n"
                  "    default_backend inferd_http\n"));
  EXPECT_TRUE(Has(t,
                  "    use_backend inferd_grpc_fallback if { nbsrv(inferd_grpc) eq 0 }\n"
                  "    default_backend inferd_grpc\n"));
  EXPECT_TRUE(Has(t,
                  "backend inferd_http_fallback\n    balance leastconn\n"
                  "    option http-buffer-request\n    option httpchk\n"
                  "    http-check send meth GET uri /v2/health/ready\n"
                  "    http-check expect status 200\n"
                  "    default-server inter 1000ms fall 2 rise 2\n"
                  "    server node1 127.0.0.1:8000 weight 100 check port 8000\n"
                  "    server node2 127.0.0.1:8010 weight 50 check port 8010\n"
                  "    server backup1 127.0.0.1:8020 weight 100 check port 8020 backup\n"));
  EXPECT_TRUE(Has(t, "backend inferd_grpc_fallback\n    balance leastconn\n    option httpchk\n"));
  EXPECT_TRUE(Has(t,
                  "    server node1 127.0.0.1:8001 weight 100 check port 8000 proto h2 "
                  "check-proto h1\n"));
  EXPECT_FALSE(Has(t, "frontend inferd_stats"));
  EXPECT_FALSE(Has(t, "log"));
}

TEST(HaproxyConfigTest, BalanceOptionsAndNoGrpc) {
  HaproxyConfigOptions o = ThreeNodes();
  o.balance = *ParseFleetBalance("random2");
  o.grpc_bind = "";
  o.stats_bind = "127.0.0.1:9999";
  o.log = true;
  for (FleetNode& n : o.nodes) n.grpc_port = 0;
  o.nodes[0].host = "::1";
  auto text = HaproxyConfigText(o);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_TRUE(Has(*text, "    balance random(2)\n"));
  EXPECT_TRUE(Has(*text, "    log stdout format raw local0\n"));
  EXPECT_TRUE(Has(*text, "    log global\n    option httplog\n"));
  EXPECT_FALSE(Has(*text, "inferd_grpc"));
  EXPECT_TRUE(Has(*text, "    server node1 [::1]:8000 weight"));
  EXPECT_TRUE(Has(*text, "frontend inferd_stats\n    bind 127.0.0.1:9999\n"));
  // Without agent checks there is nothing to fall back from.
  for (FleetNode& n : o.nodes) n.agent_port = 0;
  text = HaproxyConfigText(o);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_FALSE(Has(*text, "fallback"));
  EXPECT_FALSE(Has(*text, "agent"));
  EXPECT_EQ(*ParseFleetBalance("roundrobin"), FleetBalance::kRoundRobin);
  EXPECT_FALSE(ParseFleetBalance("source").ok());
}

std::string ConfigError(HaproxyConfigOptions o) {
  auto text = HaproxyConfigText(o);
  return text.ok() ? "" : text.status().message();
}

TEST(HaproxyConfigTest, RefusesBadNodeListsAndOptions) {
  HaproxyConfigOptions o;
  EXPECT_NE(ConfigError(o).find("no nodes"), std::string::npos);
  o = ThreeNodes();
  o.nodes.push_back(o.nodes[1]);
  EXPECT_NE(ConfigError(o).find("127.0.0.1:8010 is listed twice"), std::string::npos);
  o = ThreeNodes();
  o.nodes.erase(o.nodes.begin(), o.nodes.begin() + 2);
  EXPECT_NE(ConfigError(o).find("every node is a backup"), std::string::npos);
  o = ThreeNodes();
  o.nodes[0].grpc_port = 0;
  EXPECT_NE(ConfigError(o).find("has no gRPC port"), std::string::npos);
  o = ThreeNodes();
  o.http_bind = "127.0.0.1";
  EXPECT_NE(ConfigError(o).find("HTTP bind"), std::string::npos);
  o = ThreeNodes();
  o.grpc_bind = "127.0.0.1:99999";
  EXPECT_NE(ConfigError(o).find("outside 1..65535"), std::string::npos);
  o = ThreeNodes();
  o.stats_socket = "/tmp/a b";
  EXPECT_NE(ConfigError(o).find("stats socket"), std::string::npos);
  o.stats_socket = "build/haproxy.sock";
  EXPECT_NE(ConfigError(o).find("must be absolute"), std::string::npos);
  o = ThreeNodes();
  o.fall = 0;
  EXPECT_NE(ConfigError(o).find("fall 0"), std::string::npos);
  o = ThreeNodes();
  o.buffer_bytes = 100;
  EXPECT_NE(ConfigError(o).find("buffer size"), std::string::npos);
}

}  // namespace
}  // namespace haproxy_config_test
}  // namespace inferd::tools
