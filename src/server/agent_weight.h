// What `inferd serve --agent-port` answers to HAProxy's agent check (docs/fleet.md, "Routing on
// HAProxy"): one line with the node's state and weight, computed from its load.
//
// The weight (a percentage of the weight HAProxy's config gives the node) is
//
//   load_m  = max(u_m, min(p_m, i_m) / i_m) + max(0, p_m - i_m) / i_m     for each model m
//   L       = max over models of load_m                                   (0 with no model)
//   weight  = clamp(round(100 * C * S / (1 + L)), 1, 100) %
//
// where u_m is the model's utilization over the last sampling window (busy time of its
// instances / (window * instances)), p_m its requests queued or executing now, i_m its instance
// count; C the node's declared capacity relative to the fleet's fastest node (0 < C <= 1;
// `--agent-capacity`, by default its inference threads / the machine's cores); S its measured
// CPU share: the process's CPU time over the CPU time its busy instances would have used running
// flat out (busy time x threads per instance), in [0.05, 1], smoothed — a node under a CPU quota,
// or starved by other processes, gets S < 1 (an idle node keeps its last S). An idle node reports
// 100*C*S, a node whose instances are all busy half that, one with a request waiting per instance
// a third: least connections divides a node's connections by this weight, so a slower or busier
// node gets fewer new requests, and a node never reports 0 (that is "drain"). The worst model
// counts because HAProxy routes every model of the node together.
//
// State words: a ready node answers "up ready W%" ("up" and "ready" undo an earlier "down" or
// "drain", which only the agent can), a shutting-down node "drain" (no new requests; those in
// flight finish), a node that is not ready "down#not ready", and a ready node that runs at less
// than `shed_below` of its own unloaded speed "drain#slow ..." (SlowNodeGuard below): HAProxy's
// least connections gives an idle server the next request whatever its weight (the key of a
// server with nothing in flight is 0), so a weight, however small, still keeps one request at a
// time on a slow node, and under load those requests are the P99; only weight 0 stops them.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace inferd::server {

struct ModelLoad {
  double utilization = 0;  // 0..1, busy share of the model's instances over the last window
  int64_t pending = 0;     // requests queued or executing now
  int instances = 1;       // >= 1
};

enum class NodeState { kReady, kNotReady, kDraining, kSlow };

struct AgentInputs {
  NodeState state = NodeState::kReady;
  double capacity = 1.0;   // C: (0, 1]; values outside are clamped
  double cpu_share = 1.0;  // S: (0, 1]; values outside are clamped
  double speed = 1.0;      // the measured speed (LoadSampler::speed), shown in kSlow's reply
  std::vector<ModelLoad> models;
};

// The node load L of the formula above (>= 0).
double NodeLoad(const std::vector<ModelLoad>& models);
// The weight percentage, 1..100.
int AgentWeightPercent(const AgentInputs& inputs);
// The agent-check reply line, '\n'-terminated.
std::string AgentReply(const AgentInputs& inputs);

// Batches of one size executed so far (cumulative) and the time they took.
struct BatchSample {
  int64_t batch_size = 0;
  uint64_t count = 0;
  uint64_t ns = 0;  // batch merge + run + split, summed
};

// One model version's cumulative counters at a sampling instant.
struct ModelSample {
  std::string key;       // name and version
  uint64_t busy_ns = 0;  // cumulative time its instances spent executing batches
  int64_t pending = 0;
  int instances = 1;
  int threads = 1;                   // inference threads per instance
  std::vector<BatchSample> batches;  // per batch size (serving's batch statistics)
};

// Turns successive samples into ModelLoads: utilization = Δbusy / (Δt · instances) between two
// samples of the same key, clamped to [0, 1]; a key seen for the first time has utilization 0.
// Also the CPU share S: Δcpu / Σ Δbusy·threads, clamped to [0.05, 1] and averaged with the
// previous value (weight 1/2); kept as it was when the instances were busy for less than 5% of
// the window (too little evidence); 1 at first.
// And the node's speed: how fast it executes batches now against its own unloaded service time.
// For each (model, batch size) with at least kMinBatches batches in the window, the window's mean
// time per batch t is compared with the baseline t0, the lowest such mean seen (the node at its
// best); speed = sum(batches * t0) / sum(batches * t): the time the window's work would have taken
// at the baseline over the time it took, in (0, 1]. (The baseline creeps towards slower windows
// by kBaselineCreep of the difference per measurement, so that a lucky window or a lasting change
// in the inputs is forgotten after ~1000 measurements; a shedding node gets few.) It is averaged
// with the previous value (weight 1/2), kept when no batch size has enough batches in the window
// (too little evidence; see speed_measured()), 1 at first. Per batch size, so that smaller batches
// under light load do not read as a slowdown; per key, so that a reloaded version (its counters
// restart) gets its own. Not thread-safe; time is passed in (steady clock in production, any value
// in tests), and so is the process's cumulative CPU time.
class LoadSampler {
 public:
  static constexpr uint64_t kMinBatches = 3;
  static constexpr double kBaselineCreep = 0.001;

  std::vector<ModelLoad> Sample(std::chrono::nanoseconds now,
                                const std::vector<ModelSample>& models,
                                std::chrono::nanoseconds process_cpu = {});
  double cpu_share() const { return cpu_share_; }
  double speed() const { return speed_; }
  // The time a batch takes beyond the baseline, ns (window mean over the measured batch sizes,
  // averaged as the speed is): a small model's batches are noisy in relative terms, and a slowdown
  // of a few microseconds does not matter to anyone's latency.
  double excess_ns() const { return excess_ns_; }
  // Whether the last Sample had enough batches to measure the speed.
  bool speed_measured() const { return speed_measured_; }

 private:
  struct BatchHistory {
    uint64_t count = 0, ns = 0;  // at the previous sample
    double baseline_ns = 0;      // t0; 0 = none yet
  };
  // Updates the histories of `m` and adds the window's work to the two sums.
  void MeasureBatches(const ModelSample& m, std::map<std::string, BatchHistory>* next,
                      double* baseline_ns, double* actual_ns, double* batches);

  std::chrono::nanoseconds last_time_{0};
  std::chrono::nanoseconds last_cpu_{0};
  std::map<std::string, uint64_t> last_busy_;
  std::map<std::string, BatchHistory> batches_;  // by "key#batch size"
  double cpu_share_ = 1.0;
  bool have_share_ = false;
  double speed_ = 1.0;
  double excess_ns_ = 0;
  bool speed_measured_ = false;
};

// When a node sheds its traffic for being slow (the reply's "drain#slow"). A node whose measured
// speed (LoadSampler) falls below `shed_below` while its batches take at least `min_excess`
// longer than at its baseline sheds; it serves again once a measurement reaches `serve_above` (or
// the excess falls under half of `min_excess`) in two measurements in a row. A shedding node gets
// no requests from the HAProxies that read this agent, so its speed can only be measured again from
// traffic that still reaches it (other proxies, requests in flight) or by a probe: after
// `first_probe` without a measurement it answers its normal weight again; if the probe's
// measurement is not fast it sheds for twice as long (at most `max_probe`), if fast twice it stays
// up. A probe that gets no traffic for `idle_probe` ends the shedding (an idle node has nothing to
// shed). shed_below <= 0 turns shedding off.
//
// Shedding every node would leave HAProxy nothing to send to: the generated config sends
// requests to a backend without agent checks while no agent-weighted server is usable
// (tools/haproxy_config.h), so a fleet that is slow everywhere is served by least connections
// alone, as it would be without agents.
struct SlowNodePolicy {
  double shed_below = 0;  // off by default (docs/fleet.md: it misfires where nodes share cores)
  double serve_above = 0.65;
  std::chrono::microseconds min_excess{1000};
  std::chrono::milliseconds first_probe{1000};
  std::chrono::milliseconds max_probe{4000};
  std::chrono::milliseconds idle_probe{2000};
};

// The state machine above; pure (time passed in). Not thread-safe.
class SlowNodeGuard {
 public:
  explicit SlowNodeGuard(SlowNodePolicy policy = {}) : policy_(policy) {}
  // One decision per reply: `speed` and `excess_ns` as measured (LoadSampler), `measured`
  // whether this window measured them. True: answer "drain#slow".
  bool Shedding(std::chrono::nanoseconds now, double speed, double excess_ns, bool measured);

 private:
  enum class Phase { kServing, kShedding, kProbing };
  SlowNodePolicy policy_;
  Phase phase_ = Phase::kServing;
  int fast_in_row_ = 0;                  // consecutive fast measurements
  std::chrono::nanoseconds until_{0};    // kShedding: when to probe; kProbing: its start
  std::chrono::nanoseconds backoff_{0};  // the current shedding period
};

}  // namespace inferd::server
