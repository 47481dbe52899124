#include "server/agent_weight.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace inferd::server {

double NodeLoad(const std::vector<ModelLoad>& models) {
  double load = 0;
  for (const ModelLoad& m : models) {
    const double i = std::max(1, m.instances);
    const double p = static_cast<double>(std::max<int64_t>(0, m.pending));
    const double u = std::clamp(m.utilization, 0.0, 1.0);
    // Busy share: measured over the window, or at least what is executing right now (a batch
    // that runs for longer than the window shows no busy time until it ends).
    const double busy = std::max(u, std::min(p, i) / i);
    const double queued = std::max(0.0, p - i) / i;
    load = std::max(load, busy + queued);
  }
  return load;
}

int AgentWeightPercent(const AgentInputs& in) {
  double c = in.capacity;
  if (!(c > 0)) c = 0;  // NaN or negative: the minimum weight
  c = std::min(c, 1.0);
  double share = in.cpu_share > 0 ? std::min(in.cpu_share, 1.0) : 0;
  const double w = std::round(100.0 * c * share / (1.0 + NodeLoad(in.models)));
  return static_cast<int>(std::clamp(w, 1.0, 100.0));
}

std::string AgentReply(const AgentInputs& in) {
  switch (in.state) {
    case NodeState::kDraining:
      return "drain\n";
    case NodeState::kNotReady:
      return "down#not ready\n";
    case NodeState::kReady:
      break;
  }
  return fmt::format("up ready {}%\n", AgentWeightPercent(in));
}

std::vector<ModelLoad> LoadSampler::Sample(std::chrono::nanoseconds now,
                                           const std::vector<ModelSample>& models,
                                           std::chrono::nanoseconds process_cpu) {
  const double window = static_cast<double>((now - last_time_).count());
  std::map<std::string, uint64_t> busy;
  std::vector<ModelLoad> loads;
  double busy_thread_ns = 0;  // CPU time the busy instances would have used at full speed
  for (const ModelSample& m : models) {
    ModelLoad load;
    load.pending = m.pending;
    load.instances = std::max(1, m.instances);
    auto it = last_busy_.find(m.key);
    if (it != last_busy_.end() && window > 0 && m.busy_ns >= it->second) {
      const double delta = static_cast<double>(m.busy_ns - it->second);
      load.utilization = std::clamp(delta / (window * load.instances), 0.0, 1.0);
      busy_thread_ns += std::min(delta, window * load.instances) * std::max(1, m.threads);
    }
    busy[m.key] = m.busy_ns;
    loads.push_back(load);
  }
  const double cpu = static_cast<double>((process_cpu - last_cpu_).count());
  if (window > 0 && busy_thread_ns >= 0.05 * window && cpu >= 0) {
    const double raw = std::clamp(cpu / busy_thread_ns, 0.05, 1.0);
    cpu_share_ = have_share_ ? (cpu_share_ + raw) / 2 : raw;
    have_share_ = true;
  }
  last_busy_ = std::move(busy);
  last_time_ = now;
  last_cpu_ = process_cpu;
  return loads;
}

}  // namespace inferd::server
