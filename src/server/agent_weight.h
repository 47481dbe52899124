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
// flight finish), a node that is not ready "down#not ready".
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

enum class NodeState { kReady, kNotReady, kDraining };

struct AgentInputs {
  NodeState state = NodeState::kReady;
  double capacity = 1.0;   // C: (0, 1]; values outside are clamped
  double cpu_share = 1.0;  // S: (0, 1]; values outside are clamped
  std::vector<ModelLoad> models;
};

// The node load L of the formula above (>= 0).
double NodeLoad(const std::vector<ModelLoad>& models);
// The weight percentage, 1..100.
int AgentWeightPercent(const AgentInputs& inputs);
// The agent-check reply line, '\n'-terminated.
std::string AgentReply(const AgentInputs& inputs);

// One model version's cumulative counters at a sampling instant.
struct ModelSample {
  std::string key;       // name and version
  uint64_t busy_ns = 0;  // cumulative time its instances spent executing batches
  int64_t pending = 0;
  int instances = 1;
  int threads = 1;  // inference threads per instance
};

// Turns successive samples into ModelLoads: utilization = Δbusy / (Δt · instances) between two
// samples of the same key, clamped to [0, 1]; a key seen for the first time has utilization 0.
// Also the CPU share S: Δcpu / Σ Δbusy·threads, clamped to [0.05, 1] and averaged with the
// previous value (weight 1/2); kept as it was when the instances were busy for less than 5% of
// the window (too little evidence); 1 at first.
// Not thread-safe; time is passed in (steady clock in production, any value in tests), and so
// is the process's cumulative CPU time.
class LoadSampler {
 public:
  std::vector<ModelLoad> Sample(std::chrono::nanoseconds now,
                                const std::vector<ModelSample>& models,
                                std::chrono::nanoseconds process_cpu = {});
  double cpu_share() const { return cpu_share_; }

 private:
  std::chrono::nanoseconds last_time_{0};
  std::chrono::nanoseconds last_cpu_{0};
  std::map<std::string, uint64_t> last_busy_;
  double cpu_share_ = 1.0;
  bool have_share_ = false;
};

}  // namespace inferd::server
