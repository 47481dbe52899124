#include "tools/fleet_balancer.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace inferd::tools {

FleetBalancer::FleetBalancer(FleetBalancerOptions options, const Clock* clock)
    : options_(options), clock_(clock) {}

std::vector<BalancerAction> FleetBalancer::Update(const std::vector<ServerSample>& servers) {
  std::vector<BalancerAction> out;
  const TimePoint now = clock_->Now();
  std::set<std::string> names;
  for (const ServerSample& sample : servers) names.insert(sample.name);
  for (auto it = servers_.begin(); it != servers_.end();) {
    if (names.count(it->first)) {
      ++it;
      continue;
    }
    if (it->second.shed || it->second.on_probation) {
      out.push_back({BalancerAction::kRestore, it->first, "left the backend"});
    }
    it = servers_.erase(it);
  }
  const Duration dt = now - last_;
  // The first poll, or one after a pause of the controller, only records the counters: an
  // interval that long says nothing about stalls.
  const bool gap = !started_ || dt > options_.max_gap;
  started_ = true;
  last_ = now;
  for (const ServerSample& sample : servers) {
    auto [it, inserted] = servers_.try_emplace(sample.name);
    Server& s = it->second;
    if (inserted || gap || sample.total < s.total) {  // new, paused, or HAProxy restarted
      s.total = sample.total;
      s.in_flight = sample.in_flight;
      s.usable = sample.usable;
      s.stall = Duration(0);
      s.busy = Duration(0);
      s.window_done = 0;
      continue;
    }
    Observe(s, sample, dt);
  }
  if (gap) {
    window_start_ = now;
  } else {
    CheckStalls(out);
    if (now - window_start_ >= options_.window) {
      CloseWindow(out);
      window_start_ = now;
    }
  }
  ReturnExpired(out);
  return out;
}

void FleetBalancer::Observe(Server& s, const ServerSample& sample, Duration dt) {
  const int64_t sent = sample.total - s.total;
  const int64_t completions = std::max<int64_t>(0, sent - (sample.in_flight - s.in_flight));
  const bool was_busy = s.in_flight > 0;
  // Busy time: the whole interval if it began or ended with requests in flight; half of it if
  // requests came and went in between (the polls did not see when).
  if (was_busy || sample.in_flight > 0) {
    s.busy += dt;
  } else if (completions > 0) {
    s.busy += dt / 2;
  }
  s.done += completions;
  s.window_done += completions;
  if (was_busy && completions == 0) {
    if (s.stall == Duration(0)) s.peers_done_at_stall = -1;  // set by CheckStalls
    s.stall += dt;
  } else {
    s.stall = Duration(0);
    s.stall_counted = false;
  }
  s.total = sample.total;
  s.in_flight = sample.in_flight;
  s.usable = sample.usable;
}

void FleetBalancer::CheckStalls(std::vector<BalancerAction>& out) {
  for (auto& [name, s] : servers_) {
    if (s.shed || !s.usable || s.stall == Duration(0)) continue;
    // Peers' progress is counted from the end of the stall's first interval (conservative).
    if (s.peers_done_at_stall < 0) s.peers_done_at_stall = PeersDone(name);
    if (s.stall_counted) continue;
    const double ref = PeersMedianServiceMs(name);
    if (ref <= 0) continue;  // nothing to compare with yet
    const double threshold =
        std::max<double>(static_cast<double>(options_.min_stall.count()), Slower(s) * ref);
    int peers = 0;
    for (const auto& [other, o] : servers_) peers += other != name && o.usable && !o.shed;
    const int64_t peers_done = PeersDone(name) - s.peers_done_at_stall;
    if (s.stall.count() <= threshold || peers_done < std::max(1, peers)) continue;
    s.stall_counted = true;  // one event per stall
    Event(name, s,
          fmt::format("stalled {:.0f} ms with {} request(s) in flight while its peers completed "
                      "{} (their service time {:.1f} ms)",
                      s.stall.count(), s.in_flight, peers_done, ref),
          out);
  }
}

void FleetBalancer::CloseWindow(std::vector<BalancerAction>& out) {
  std::map<std::string, double> fresh;
  for (auto& [name, s] : servers_) {
    if (!s.shed && s.usable && (s.window_done >= 2 || s.busy >= Duration(options_.window) / 2)) {
      const double x = s.busy.count() / static_cast<double>(std::max<int64_t>(1, s.window_done));
      fresh[name] = x;
      s.service_ms = s.service_ms > 0 ? 0.5 * s.service_ms + 0.5 * x : x;
    }
    s.busy = Duration(0);
    s.window_done = 0;
  }
  for (const auto& [name, x] : fresh) {
    const double ref = PeersMedianServiceMs(name);
    if (ref > 0 && x > Slower(servers_[name]) * ref) {
      Event(name, servers_[name],
            fmt::format("service time {:.1f} ms over the last {} ms, {:.1f}x its peers' {:.1f} ms",
                        x, options_.window.count(), x / ref, ref),
            out);
    }
  }
}

void FleetBalancer::Event(const std::string& name, Server& s, std::string reason,
                          std::vector<BalancerAction>& out) {
  const TimePoint now = clock_->Now();
  s.events.push_back(now);
  while (!s.events.empty() && now - s.events.front() > options_.event_memory) {
    s.events.pop_front();
  }
  const size_t needed = s.on_probation ? 1 : static_cast<size_t>(options_.events_to_shed);
  if (s.events.size() < needed || !MayShedOneMore()) return;
  const Duration hold = s.on_probation
                            ? std::min<Duration>(2 * s.last_hold, Duration(options_.max_hold))
                            : Duration(options_.hold);
  s.shed = true;
  s.on_probation = false;
  s.until = now + std::chrono::duration_cast<Clock::TimePoint::duration>(hold);
  s.last_hold = hold;
  s.events.clear();
  s.stall = Duration(0);
  s.stall_counted = false;
  out.push_back(
      {BalancerAction::kShed, name, fmt::format("{}: shed for {:.0f} ms", reason, hold.count())});
}

void FleetBalancer::ReturnExpired(std::vector<BalancerAction>& out) {
  const TimePoint now = clock_->Now();
  for (auto& [name, s] : servers_) {
    if (s.shed && now >= s.until) {
      s.shed = false;
      s.on_probation = true;
      s.returned_at = now;
      s.stall = Duration(0);
      s.stall_counted = false;
      s.busy = Duration(0);
      s.window_done = 0;
      out.push_back({BalancerAction::kProbe, name,
                     fmt::format("held {:.0f} ms: probed at weight 1 for {} ms",
                                 s.last_hold.count(), options_.probation.count())});
    } else if (s.on_probation && now - s.returned_at >= options_.probation) {
      s.on_probation = false;
      s.last_hold = Duration(0);
      out.push_back(
          {BalancerAction::kRestore, name,
           fmt::format("no slow event in {} ms of probation", options_.probation.count())});
    }
  }
}

std::vector<BalancerAction> FleetBalancer::ReturnAll() {
  std::vector<BalancerAction> out;
  for (auto& [name, s] : servers_) {
    if (!s.shed && !s.on_probation) continue;
    s.shed = s.on_probation = false;
    out.push_back({BalancerAction::kRestore, name, "the balancer stops"});
  }
  return out;
}

double FleetBalancer::Slower(const Server& s) const {
  return s.on_probation ? options_.probation_slower : options_.slower;
}

double FleetBalancer::PeersMedianServiceMs(const std::string& name) const {
  std::vector<double> v;
  for (const auto& [other, o] : servers_) {
    if (other != name && o.usable && !o.shed && o.service_ms > 0) v.push_back(o.service_ms);
  }
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int64_t FleetBalancer::PeersDone(const std::string& name) const {
  int64_t done = 0;
  for (const auto& [other, o] : servers_) {
    if (other != name && o.usable && !o.shed) done += o.done;
  }
  return done;
}

bool FleetBalancer::MayShedOneMore() const {
  int considered = 0, shed = 0, serving = 0;
  for (const auto& [name, s] : servers_) {
    considered += s.usable || s.shed;
    shed += s.shed;
    serving += s.usable && !s.shed;
  }
  return 2 * (shed + 1) <= considered && serving >= 2;
}

bool FleetBalancer::IsShed(const std::string& server) const {
  auto it = servers_.find(server);
  return it != servers_.end() && it->second.shed;
}

double FleetBalancer::ServiceMs(const std::string& server) const {
  auto it = servers_.find(server);
  return it == servers_.end() ? 0 : it->second.service_ms;
}

}  // namespace inferd::tools
