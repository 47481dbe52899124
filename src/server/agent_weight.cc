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
    case NodeState::kSlow:
      return fmt::format("drain#slow: {:.0f}% of its unloaded speed\n",
                         100 * std::clamp(in.speed, 0.0, 1.0));
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
  double baseline_ns = 0, actual_ns = 0, batch_count = 0;
  std::map<std::string, BatchHistory> batches;
  for (const ModelSample& m : models) {
    MeasureBatches(m, &batches, &baseline_ns, &actual_ns, &batch_count);
  }
  batches_ = std::move(batches);
  speed_measured_ = actual_ns > 0;
  if (speed_measured_) {
    speed_ = (speed_ + std::clamp(baseline_ns / actual_ns, 0.0, 1.0)) / 2;
    excess_ns_ = (excess_ns_ + std::max(0.0, actual_ns - baseline_ns) / batch_count) / 2;
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

void LoadSampler::MeasureBatches(const ModelSample& m, std::map<std::string, BatchHistory>* next,
                                 double* baseline_ns, double* actual_ns, double* batches) {
  for (const BatchSample& b : m.batches) {
    const std::string key = fmt::format("{}#{}", m.key, b.batch_size);
    auto it = batches_.find(key);
    // First sight, or a counter that went backwards (a new version under the same key): the
    // counters only.
    if (it == batches_.end() || b.count < it->second.count || b.ns < it->second.ns) {
      (*next)[key] = BatchHistory{b.count, b.ns, 0};
      continue;
    }
    BatchHistory h = it->second;
    const uint64_t count = b.count - h.count;
    // Too few batches: the counters stay, so that the next window sees more of them.
    if (count >= kMinBatches) {
      const double mean = static_cast<double>(b.ns - h.ns) / static_cast<double>(count);
      // The baseline follows a faster window at once and a slower one by kBaselineCreep of the
      // gap, so that a lucky window or a change in the inputs' sizes is forgotten over ~1000
      // measurements, and a slowdown is not.
      if (h.baseline_ns == 0 || mean < h.baseline_ns) {
        h.baseline_ns = mean;
      } else {
        h.baseline_ns += kBaselineCreep * (mean - h.baseline_ns);
      }
      *baseline_ns += h.baseline_ns * static_cast<double>(count);
      *actual_ns += mean * static_cast<double>(count);
      *batches += static_cast<double>(count);
      h.count = b.count;
      h.ns = b.ns;
    }
    (*next)[key] = h;
  }
}

bool SlowNodeGuard::Shedding(std::chrono::nanoseconds now, double speed, double excess_ns,
                             bool measured) {
  if (policy_.shed_below <= 0) return false;
  const double min_excess = std::chrono::duration<double, std::nano>(policy_.min_excess).count();
  const bool slow = measured && speed < policy_.shed_below && excess_ns >= min_excess;
  const bool fast_now = measured && (speed >= policy_.serve_above || excess_ns < min_excess / 2);
  // A quota or a noisy neighbour comes and goes within a window: one fast window is luck, two in
  // a row end the shedding.
  if (measured) fast_in_row_ = fast_now ? fast_in_row_ + 1 : 0;
  const bool fast = fast_in_row_ >= 2;
  switch (phase_) {
    case Phase::kServing:
      if (slow) {
        backoff_ = policy_.first_probe;
        phase_ = Phase::kShedding;
        until_ = now + backoff_;
      }
      break;
    case Phase::kShedding:
      if (fast) {
        phase_ = Phase::kServing;
      } else if (slow) {
        until_ = std::max(until_, now + backoff_);  // still slow on the traffic it still gets
      } else if (now >= until_) {                   // no measurement, or one neither slow nor fast
        phase_ = Phase::kProbing;
        until_ = now;
      }
      break;
    case Phase::kProbing:
      if (fast) {
        phase_ = Phase::kServing;
      } else if (measured && !fast_now) {  // slow, or not yet fast: still not what it was
        backoff_ = std::min<std::chrono::nanoseconds>(2 * backoff_, policy_.max_probe);
        phase_ = Phase::kShedding;
        until_ = now + backoff_;
      } else if (!measured && now - until_ >= policy_.idle_probe) {
        phase_ = Phase::kServing;  // nobody sends it anything: nothing to shed
      }
      break;
  }
  return phase_ == Phase::kShedding;
}

}  // namespace inferd::server
