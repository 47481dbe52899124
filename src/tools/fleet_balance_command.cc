#include "tools/fleet_balance_command.h"

#include <fmt/ranges.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "tools/haproxy_stats.h"

namespace inferd::tools {
namespace {

// Set by the SIGINT/SIGTERM handler (lock-free, so async-signal-safe); the poll loop reads it.
std::atomic<int> g_balance_stop{0};

extern "C" void OnBalanceStop(int sig) {
  if (g_balance_stop.exchange(sig) != 0) {  // the second signal: stop now
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

constexpr std::chrono::milliseconds kSocketTimeout{1000};

// One poll: every backend's server rows.
StatusOr<std::map<std::string, std::vector<ServerSample>>> Poll(const FleetBalanceOptions& o) {
  ASSIGN_OR_RETURN(std::string answer,
                   HaproxyCommand(o.stats_socket, ShowStatCommand(), kSocketTimeout));
  return ParseShowStat(answer);
}

// The first poll, retried until the socket answers (HAProxy may still be starting).
Status FirstPoll(const FleetBalanceOptions& o) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(o.start_timeout_ms);
  for (;;) {
    auto polled = Poll(o);
    if (polled.ok()) {
      for (const std::string& b : o.backends) {
        if (!polled->count(b)) {
          return InvalidArgument(
              "backend '{}' has no servers in HAProxy's stats on '{}' (backends of inferd fleet "
              "haproxy-config: inferd_http, inferd_grpc)",
              b, o.stats_socket);
        }
      }
      return Status::Ok();
    }
    if (polled.status().code() == StatusCode::kInvalidArgument) return polled.status();
    if (std::chrono::steady_clock::now() >= deadline) return polled.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Apply(const FleetBalanceOptions& o, const std::string& backend,
           const std::vector<BalancerAction>& actions) {
  for (const BalancerAction& a : actions) {
    spdlog::info("fleet balance: {}/{}: {}: {}", backend, a.server,
                 a.kind == BalancerAction::kShed    ? "drain"
                 : a.kind == BalancerAction::kProbe ? "probe"
                                                    : "restore",
                 a.reason);
    if (o.dry_run) continue;
    auto answer = HaproxyCommand(o.stats_socket, ActionCommands(backend, a), kSocketTimeout);
    if (!answer.ok()) {
      spdlog::warn("fleet balance: {}/{}: {}", backend, a.server, answer.status().message());
    } else if (answer->find_first_not_of(" \r\n") != std::string::npos) {
      // The runtime API answers these commands with nothing when they succeed.
      spdlog::warn("fleet balance: {}/{}: HAProxy answered: {}", backend, a.server, *answer);
    }
  }
}

}  // namespace

CLI::App* AddFleetBalanceSubcommand(CLI::App& fleet, FleetBalanceOptions* o) {
  CLI::App* cmd = fleet.add_subcommand(
      "balance",
      "Watch HAProxy's per-server counters and drain a node that is slower than its peers "
      "(stalls, service time), probing it at weight 1 after a hold");
  cmd->add_option("--stats-socket", o->stats_socket, "HAProxy's CLI socket")->required();
  cmd->add_option("--backend", o->backends, "A backend to balance (repeatable)")
      ->capture_default_str();
  cmd->add_option("--poll-ms", o->poll_ms, "Interval of `show stat` polls")
      ->check(CLI::Range(5, 10000))
      ->capture_default_str();
  cmd->add_option("--slower", o->slower,
                  "A node is slow when it takes this many times its peers' median service time")
      ->check(CLI::Range(1.1, 100.0))
      ->capture_default_str();
  cmd->add_option("--probation-slower", o->probation_slower,
                  "The same factor for a node on probation (it is suspect already)")
      ->check(CLI::Range(1.1, 100.0))
      ->capture_default_str();
  cmd->add_option("--min-stall-ms", o->min_stall_ms, "Shorter stalls never count")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  cmd->add_option("--window-ms", o->window_ms, "Service-time measurement window")
      ->check(CLI::Range(10, 600000))
      ->capture_default_str();
  cmd->add_option("--events", o->events, "Stalls or slow windows that shed a node...")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--event-memory-ms", o->event_memory_ms, "...within this time")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  cmd->add_option("--hold-ms", o->hold_ms, "How long a node is drained the first time")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  cmd->add_option("--max-hold-ms", o->max_hold_ms, "Longest drain (doubled per failed probation)")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  cmd->add_option("--probation-ms", o->probation_ms,
                  "After a hold the node is probed at weight 1 this long: one slow event drains "
                  "it again")
      ->check(CLI::Range(0, 3600000))
      ->capture_default_str();
  cmd->add_option("--start-timeout-ms", o->start_timeout_ms,
                  "How long to wait for the stats socket at start")
      ->check(CLI::Range(0, 3600000))
      ->capture_default_str();
  cmd->add_flag("--dry-run", o->dry_run, "Log what would be drained; change nothing");
  cmd->add_option("--log-level", o->log_level, "trace, debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  return cmd;
}

StatusOr<FleetBalancerOptions> BalancerOptionsFrom(const FleetBalanceOptions& o) {
  if (o.hold_ms > o.max_hold_ms) {
    return InvalidArgument("--hold-ms {} is longer than --max-hold-ms {}", o.hold_ms,
                           o.max_hold_ms);
  }
  if (o.window_ms < 2 * o.poll_ms) {
    return InvalidArgument("--window-ms {} must span at least two polls (--poll-ms {})",
                           o.window_ms, o.poll_ms);
  }
  if (o.backends.empty()) return InvalidArgument("no --backend to balance");
  using std::chrono::milliseconds;
  FleetBalancerOptions b;
  b.slower = o.slower;
  b.min_stall = milliseconds(o.min_stall_ms);
  b.window = milliseconds(o.window_ms);
  b.events_to_shed = o.events;
  b.event_memory = milliseconds(o.event_memory_ms);
  b.hold = milliseconds(o.hold_ms);
  b.max_hold = milliseconds(o.max_hold_ms);
  b.probation = milliseconds(o.probation_ms);
  b.probation_slower = o.probation_slower;
  b.max_gap = milliseconds(std::max(1000, 10 * o.poll_ms));
  return b;
}

Status FleetBalanceCommand(const FleetBalanceOptions& o, const std::atomic<int>* stop) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  ASSIGN_OR_RETURN(FleetBalancerOptions bo, BalancerOptionsFrom(o));
  RETURN_IF_ERROR(FirstPoll(o));
  std::map<std::string, FleetBalancer> balancers;
  for (const std::string& b : o.backends) balancers.try_emplace(b, bo, &RealClock::Get());
  g_balance_stop = 0;
  struct sigaction sa = {};
  struct sigaction old_int = {};
  struct sigaction old_term = {};
  if (stop == nullptr) {
    sa.sa_handler = OnBalanceStop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    stop = &g_balance_stop;
  }
  spdlog::info("fleet balance: watching {} on {} every {} ms (slower than {}x its peers: drain)",
               fmt::join(o.backends, ", "), o.stats_socket, o.poll_ms, o.slower);
  auto next = std::chrono::steady_clock::now();
  auto last_warning = next - std::chrono::hours(1);
  while (stop->load() == 0) {
    next += std::chrono::milliseconds(o.poll_ms);
    auto polled = Poll(o);
    if (!polled.ok()) {
      if (std::chrono::steady_clock::now() - last_warning > std::chrono::seconds(5)) {
        spdlog::warn("fleet balance: {} (retrying)", polled.status().message());
        last_warning = std::chrono::steady_clock::now();
      }
    } else {
      for (auto& [backend, balancer] : balancers) {
        Apply(o, backend, balancer.Update((*polled)[backend]));
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // a slow poll: no burst to catch up
    std::this_thread::sleep_until(next);
  }
  for (auto& [backend, balancer] : balancers) Apply(o, backend, balancer.ReturnAll());
  if (stop == &g_balance_stop) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
  spdlog::info("fleet balance: stopped");
  return Status::Ok();
}

}  // namespace inferd::tools
