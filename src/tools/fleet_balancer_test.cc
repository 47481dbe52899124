#include "tools/fleet_balancer.h"

#include <gtest/gtest.h>

#include <map>

#include "testing/fake_clock.h"
#include "tools/fleet_balance_command.h"
#include "tools/haproxy_stats.h"

namespace inferd::tools {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kPoll{20};

// A closed-loop fleet as HAProxy's counters show it, polled every 20 ms on a FakeClock: a server
// holds `level` requests (1 while probed at weight 1) and completes one every `period` polls (none
// while `stalled`); each completion is replaced by a new request unless the balancer drained the
// server.
class SimFleet {
 public:
  struct Server {
    int period = 1, level = 2;
    bool stalled = false, usable = true, probed = false;
    int64_t total = 0, in_flight = 0;
  };
  struct Logged {
    int64_t at_ms;
    BalancerAction action;
  };

  explicit SimFleet(std::map<std::string, Server> servers, FleetBalancerOptions o = {})
      : servers_(std::move(servers)), balancer_(o, &clock_), start_(clock_.Now()) {}

  void Run(milliseconds d) {
    for (milliseconds t{0}; t < d; t += kPoll) Step();
  }
  Server& operator[](const std::string& name) { return servers_[name]; }
  FleetBalancer& balancer() { return balancer_; }
  const std::vector<Logged>& log() const { return log_; }
  int64_t NowMs() const {
    return std::chrono::duration_cast<milliseconds>(clock_.Now() - start_).count();
  }
  std::vector<Logged> Actions(const std::string& server, BalancerAction::Kind kind) const {
    std::vector<Logged> v;
    for (const Logged& l : log_) {
      if (l.action.server == server && l.action.kind == kind) v.push_back(l);
    }
    return v;
  }

 private:
  void Step() {
    clock_.Advance(kPoll);
    ++tick_;
    std::vector<ServerSample> samples;
    for (auto& [name, s] : servers_) {
      if (!s.stalled && s.in_flight > 0 && tick_ % s.period == 0) --s.in_flight;
      const int level = s.probed ? 1 : s.level;
      if (s.usable && s.in_flight < level) {
        s.total += level - s.in_flight;
        s.in_flight = level;
      }
      samples.push_back({name, s.usable, s.total, s.in_flight});
    }
    for (BalancerAction& a : balancer_.Update(samples)) {
      servers_[a.server].usable = a.kind != BalancerAction::kShed;
      servers_[a.server].probed = a.kind == BalancerAction::kProbe;
      log_.push_back({NowMs(), std::move(a)});
    }
  }

  FakeClock clock_;
  std::map<std::string, Server> servers_;
  FleetBalancer balancer_;
  Clock::TimePoint start_;
  int tick_ = 0;
  std::vector<Logged> log_;
};

std::map<std::string, SimFleet::Server> Three(int slow_period, int slow_level = 1) {
  return {{"node1", {.period = 1, .level = 3}},
          {"node2", {.period = 1, .level = 3}},
          {"node3", {.period = slow_period, .level = slow_level}}};
}

TEST(FleetBalancerTest, EqualNodesAreNeverShed) {
  SimFleet fleet(Three(1, 3));
  fleet.Run(milliseconds(20000));
  EXPECT_TRUE(fleet.log().empty()) << fleet.log()[0].action.reason;
  EXPECT_NEAR(fleet.balancer().ServiceMs("node1"), 20, 1);
  EXPECT_NEAR(fleet.balancer().ServiceMs("node3"), 20, 1);
}

TEST(FleetBalancerTest, ANodeThatStallsIsDrainedThenProbedWithDoublingHolds) {
  // node3 completes one request per 100 ms (stalls of 80 ms) against its peers' 20 ms.
  SimFleet fleet(Three(5));
  fleet.Run(milliseconds(30000));
  auto sheds = fleet.Actions("node3", BalancerAction::kShed);
  auto returns = fleet.Actions("node3", BalancerAction::kProbe);
  ASSERT_GE(sheds.size(), 4u);
  ASSERT_GE(returns.size(), 3u);
  // The first window (500 ms) gives the peers' service time; two stalls later it is drained.
  EXPECT_GE(sheds[0].at_ms, 500);
  EXPECT_LE(sheds[0].at_ms, 800);
  EXPECT_NE(sheds[0].action.reason.find("stalled"), std::string::npos) << sheds[0].action.reason;
  // Holds of 1, 2, 4, 8 s; each probe (weight 1) ends with the first stall over 1.5 x 20 ms.
  const int64_t holds[] = {1000, 2000, 4000, 8000};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(returns[i].at_ms - sheds[i].at_ms, holds[i], kPoll.count()) << i;
    EXPECT_LE(sheds[i + 1].at_ms - returns[i].at_ms, 120) << i;  // its first request
  }
  for (const char* peer : {"node1", "node2"}) {
    EXPECT_TRUE(fleet.Actions(peer, BalancerAction::kShed).empty()) << peer;
  }
}

TEST(FleetBalancerTest, ANodeWithALongServiceTimeIsDrainedByWindows) {
  // 60 ms per request: its stalls (40 ms) stay under 2.5 x 20 ms, its service time does not.
  SimFleet fleet(Three(3));
  fleet.Run(milliseconds(1600));
  auto sheds = fleet.Actions("node3", BalancerAction::kShed);
  ASSERT_EQ(sheds.size(), 1u);
  EXPECT_NE(sheds[0].action.reason.find("service time"), std::string::npos)
      << sheds[0].action.reason;
  EXPECT_GE(sheds[0].at_ms, 1000);  // two windows
  EXPECT_TRUE(fleet.balancer().IsShed("node3"));
}

TEST(FleetBalancerTest, APauseOfTheWholeMachineShedsNobody) {
  SimFleet fleet(Three(1, 3));
  fleet.Run(milliseconds(1000));
  for (int i = 0; i < 5; ++i) {  // every node stalls 200 ms, five times in a row
    for (const char* n : {"node1", "node2", "node3"}) fleet[n].stalled = true;
    fleet.Run(milliseconds(200));
    for (const char* n : {"node1", "node2", "node3"}) fleet[n].stalled = false;
    fleet.Run(milliseconds(200));
  }
  EXPECT_TRUE(fleet.log().empty()) << fleet.log()[0].action.reason;
}

TEST(FleetBalancerTest, NeverShedsMoreThanHalfNorTheLastServer) {
  // Four nodes, two slow: both go (two of four); a third that turns slow stays.
  FleetBalancerOptions o;
  o.hold = o.max_hold = milliseconds(60000);
  SimFleet fleet({{"n1", {.period = 1, .level = 3}},
                  {"n2", {.period = 5, .level = 1}},
                  {"n3", {.period = 5, .level = 1}},
                  {"n4", {.period = 1, .level = 3}}},
                 o);
  fleet.Run(milliseconds(2000));
  EXPECT_TRUE(fleet.balancer().IsShed("n2"));
  EXPECT_TRUE(fleet.balancer().IsShed("n3"));
  fleet["n4"].period = 5;
  fleet["n4"].level = 1;
  fleet.Run(milliseconds(3000));
  EXPECT_FALSE(fleet.balancer().IsShed("n4"));
  EXPECT_FALSE(fleet.balancer().IsShed("n1"));
  // Two of three slow: the median node is slow, so nobody is slower than "the fleet".
  std::map<std::string, SimFleet::Server> s = Three(5);
  s["node2"] = {.period = 5, .level = 1};
  SimFleet mostly_slow(s);
  mostly_slow.Run(milliseconds(3000));
  EXPECT_TRUE(mostly_slow.log().empty()) << mostly_slow.log()[0].action.reason;
  // Two nodes: the slow one may go; one node: never.
  SimFleet two({{"a", {.period = 1, .level = 3}}, {"b", {.period = 5, .level = 1}}});
  two.Run(milliseconds(2000));
  EXPECT_TRUE(two.balancer().IsShed("b"));
  SimFleet one({{"a", {.period = 5, .level = 1}}});
  one.Run(milliseconds(3000));
  EXPECT_TRUE(one.log().empty());
}

TEST(FleetBalancerTest, ANodeThatRecoversStaysAndItsHoldIsReset) {
  FleetBalancerOptions o;
  o.probation = milliseconds(3000);
  SimFleet fleet(Three(5), o);
  fleet.Run(milliseconds(1000));
  ASSERT_TRUE(fleet.balancer().IsShed("node3"));
  fleet["node3"].period = 1;  // recovered while drained
  fleet.Run(milliseconds(6000));
  EXPECT_FALSE(fleet.balancer().IsShed("node3"));
  ASSERT_EQ(fleet.Actions("node3", BalancerAction::kProbe).size(), 1u);
  auto restored = fleet.Actions("node3", BalancerAction::kRestore);
  ASSERT_EQ(restored.size(), 1u);  // after 3 s of probation at weight 1
  EXPECT_NEAR(restored[0].at_ms - fleet.Actions("node3", BalancerAction::kProbe)[0].at_ms, 3000,
              kPoll.count());
  EXPECT_EQ(fleet.Actions("node3", BalancerAction::kShed).size(), 1u);
  // Slow again after probation: two events are needed again, and the hold is 1 s, not 2 s.
  fleet["node3"].period = 5;
  fleet.Run(milliseconds(3000));
  auto sheds = fleet.Actions("node3", BalancerAction::kShed);
  auto returns = fleet.Actions("node3", BalancerAction::kProbe);
  ASSERT_GE(sheds.size(), 2u);
  ASSERT_GE(returns.size(), 2u);
  EXPECT_NEAR(returns[1].at_ms - sheds[1].at_ms, 1000, kPoll.count());
}

TEST(FleetBalancerTest, TheBarIsLowerOnProbation) {
  // Twice its peers' service time: under the bar of 2.5x, over the probation's 1.5x.
  SimFleet twice(Three(2));
  twice.Run(milliseconds(5000));
  EXPECT_TRUE(twice.log().empty()) << twice.log()[0].action.reason;
  SimFleet fleet(Three(5));
  fleet.Run(milliseconds(1000));
  ASSERT_TRUE(fleet.balancer().IsShed("node3"));
  fleet["node3"].period = 2;  // better, not well
  fleet.Run(milliseconds(3000));
  auto sheds = fleet.Actions("node3", BalancerAction::kShed);
  ASSERT_EQ(sheds.size(), 2u);
  EXPECT_NE(sheds[1].action.reason.find("service time"), std::string::npos)
      << sheds[1].action.reason;
}

TEST(FleetBalancerTest, ReturnsEveryShedServerOnExitAndWhenItLeaves) {
  SimFleet fleet(Three(5));
  fleet.Run(milliseconds(1000));
  ASSERT_TRUE(fleet.balancer().IsShed("node3"));
  auto all = fleet.balancer().ReturnAll();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].server, "node3");
  EXPECT_EQ(all[0].kind, BalancerAction::kRestore);
  EXPECT_FALSE(fleet.balancer().IsShed("node3"));

  SimFleet again(Three(5));
  again.Run(milliseconds(1000));
  ASSERT_TRUE(again.balancer().IsShed("node3"));
  auto left = again.balancer().Update({{"node1", true, 1, 0}, {"node2", true, 1, 0}});
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].kind, BalancerAction::kRestore);
  EXPECT_EQ(left[0].server, "node3");
}

TEST(FleetBalancerTest, APollAfterALongGapCountsNoStall) {
  FakeClock clock;
  FleetBalancer b({}, &clock);
  std::vector<ServerSample> s = {{"a", true, 0, 1}, {"b", true, 0, 1}, {"c", true, 0, 1}};
  int64_t t = 0;
  for (int i = 0; i < 50; ++i) {  // 1 s: everyone completes one per poll
    clock.Advance(kPoll);
    ++t;
    s = {{"a", true, t, 1}, {"b", true, t, 1}, {"c", true, t, 1}};
    EXPECT_TRUE(b.Update(s).empty());
  }
  clock.Advance(std::chrono::seconds(5));  // the controller was stopped; c "stalled" meanwhile
  s = {{"a", true, t + 250, 1}, {"b", true, t + 250, 1}, {"c", true, t, 1}};
  EXPECT_TRUE(b.Update(s).empty());
  EXPECT_FALSE(b.IsShed("c"));
}

TEST(HaproxyStatsTest, ParsesServerRowsOfSeveralShowStatAnswers) {
  const char* csv =
      "# pxname,svname,qcur,scur,stot,status,weight,last_chk,\n"
      "inferd_http,node1,0,2,1500,UP,100,\"L7OK, 200\",\n"
      "inferd_http,node2,0,0,10,DRAIN,0,,\n"
      "inferd_http,BACKEND,0,2,1510,UP,100,,\n"
      "\n"
      "# pxname,svname,qcur,scur,stot,status,weight,last_chk,bck,\n"
      "inferd_grpc,node1,0,1,7,UP 1/2,100,,0,\n"
      "inferd_grpc,node2,0,0,0,no check,100,,0,\n"
      "inferd_grpc,node3,0,0,0,DOWN,100,,0,\n"
      "inferd_grpc,backup1,0,0,0,UP,100,,1,\n";
  auto parsed = ParseShowStat(csv);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 2u);
  const auto& http = parsed->at("inferd_http");
  ASSERT_EQ(http.size(), 2u);
  EXPECT_EQ(http[0].name, "node1");
  EXPECT_TRUE(http[0].usable);
  EXPECT_EQ(http[0].total, 1500);
  EXPECT_EQ(http[0].in_flight, 2);
  EXPECT_FALSE(http[1].usable);
  const auto& grpc = parsed->at("inferd_grpc");
  ASSERT_EQ(grpc.size(), 3u);
  EXPECT_TRUE(grpc[0].usable);  // going down, still serving
  EXPECT_TRUE(grpc[1].usable);  // no health check
  EXPECT_FALSE(grpc[2].usable);
}

TEST(HaproxyStatsTest, RefusesWhatIsNotShowStat) {
  auto no_header = ParseShowStat("inferd_http,node1,0,2,1500,UP,\n");
  ASSERT_FALSE(no_header.ok());
  EXPECT_NE(no_header.status().message().find("before the header"), std::string::npos);
  auto no_stot = ParseShowStat("# pxname,svname,scur,status,\n");
  ASSERT_FALSE(no_stot.ok());
  EXPECT_NE(no_stot.status().message().find("'stot'"), std::string::npos);
  auto bad = ParseShowStat("# pxname,svname,scur,stot,status,\nb,s,1,x1,UP,\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("stot 'x1' is not a number"), std::string::npos);
  auto short_row = ParseShowStat("# pxname,svname,scur,stot,status,\nb,s,1\n");
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.status().message().find("fields"), std::string::npos);
  EXPECT_TRUE(ParseShowStat("").ok());
}

TEST(HaproxyStatsTest, CommandsDisableTheAgentWhileDrained) {
  EXPECT_EQ(ShowStatCommand(), "show stat -1 4 -1");
  EXPECT_EQ(ActionCommands("inferd_http", {BalancerAction::kShed, "node3", ""}),
            "disable agent inferd_http/node3; set server inferd_http/node3 state drain");
  EXPECT_EQ(ActionCommands("inferd_grpc", {BalancerAction::kProbe, "node3", ""}),
            "set weight inferd_grpc/node3 1; set server inferd_grpc/node3 state ready");
  EXPECT_EQ(ActionCommands("inferd_grpc", {BalancerAction::kRestore, "node3", ""}),
            "set weight inferd_grpc/node3 100%; set server inferd_grpc/node3 state ready; "
            "enable agent inferd_grpc/node3");
}

TEST(HaproxyStatsTest, AnUnreachableSocketIsAClearError) {
  auto r = HaproxyCommand("/nonexistent/haproxy.sock", "show stat", milliseconds(100));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("cannot connect to HAProxy's stats socket"),
            std::string::npos);
  EXPECT_FALSE(HaproxyCommand(std::string(200, 'x'), "show stat", milliseconds(100)).ok());
}

TEST(FleetBalanceCommandTest, RefusesInconsistentOptions) {
  FleetBalanceOptions o;
  o.stats_socket = "/nonexistent/haproxy.sock";
  o.hold_ms = 9000;
  auto b = BalancerOptionsFrom(o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("--max-hold-ms"), std::string::npos);
  o.hold_ms = 1000;
  o.window_ms = 30;
  EXPECT_FALSE(BalancerOptionsFrom(o).ok());
  o.window_ms = 500;
  o.start_timeout_ms = 0;
  Status s = FleetBalanceCommand(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot connect"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace inferd::tools
