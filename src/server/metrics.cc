#include "server/metrics.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

namespace inferd::server {
namespace {

using serving::ModelStatisticsSnapshot;

std::string Labels(const ModelStatisticsSnapshot& m) {
  return fmt::format("model=\"{}\",version=\"{}\"", EscapeLabelValue(m.name), m.version);
}

void Header(std::string& out, std::string_view name, std::string_view type,
            std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// Prometheus floats: shortest round-trip text; +Inf/-Inf/NaN spelled as the format wants.
std::string Num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void Histogram(std::string& out, std::string_view name, const std::string& labels,
               const HistogramSnapshot& h, double divisor) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    if (i < h.counts.size()) cumulative += h.counts[i];
    fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"{}\"}} {}\n", name, labels,
                   Num(h.bounds[i] / divisor), cumulative);
  }
  // The +Inf bucket equals the count by definition; use the sum of buckets so the series stays
  // monotonic even when the snapshot raced with recording.
  for (size_t i = h.bounds.size(); i < h.counts.size(); ++i) cumulative += h.counts[i];
  fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels,
                 cumulative);
  fmt::format_to(std::back_inserter(out), "{}_sum{{{}}} {}\n", name, labels, Num(h.sum / divisor));
  fmt::format_to(std::back_inserter(out), "{}_count{{{}}} {}\n", name, labels, cumulative);
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

StatusOr<ProcessStats> ReadProcessStats() {
  std::ifstream stat_file("/proc/self/stat");
  std::string line;
  if (!stat_file || !std::getline(stat_file, line)) return Unavailable("cannot read /proc/self/stat");
  // The command name (field 2) is parenthesised and may contain spaces: parse after the last ')'.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return Internal("unexpected /proc/self/stat format");
  std::istringstream fields(line.substr(close + 2));
  // Fields from 3 (state) on; utime=14, stime=15, starttime=22, rss=24 (1-based, per proc(5)).
  std::vector<std::string> f;
  for (std::string s; fields >> s;) f.push_back(s);
  if (f.size() < 22) return Internal("unexpected /proc/self/stat format");
  auto field = [&](int n) { return std::strtod(f[static_cast<size_t>(n - 3)].c_str(), nullptr); };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  ProcessStats p;
  p.cpu_seconds = (field(14) + field(15)) / ticks;
  p.resident_bytes = static_cast<int64_t>(field(24) * page);
  std::ifstream proc_stat("/proc/stat");
  for (std::string l; std::getline(proc_stat, l);) {
    if (l.rfind("btime ", 0) == 0) {
      p.start_time_seconds = std::strtod(l.c_str() + 6, nullptr) + field(22) / ticks;
      break;
    }
  }
  return p;
}

std::string RenderPrometheusMetrics(const std::vector<ModelStatisticsSnapshot>& models,
                                    const ProcessStats* process) {
  std::string out;
  auto it = std::back_inserter(out);
  std::vector<std::string> labels;
  for (const auto& m : models) labels.push_back(Labels(m));

  Header(out, "inferd_request_success_total", "counter", "Successful inference requests.");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_request_success_total{{{}}} {}\n", labels[i],
                   models[i].success_requests);
  }
  Header(out, "inferd_request_failure_total", "counter",
         "Failed inference requests, by reason.");
  for (size_t i = 0; i < models.size(); ++i) {
    for (const auto& [reason, n] : models[i].failures) {
      fmt::format_to(it, "inferd_request_failure_total{{{},reason=\"{}\"}} {}\n", labels[i],
                     EscapeLabelValue(serving::FailureReasonName(reason)), n);
    }
  }
  Header(out, "inferd_inference_count_total", "counter",
         "Inferences performed (a batched request counts its batch size).");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_inference_count_total{{{}}} {}\n", labels[i],
                   models[i].inference_count);
  }
  Header(out, "inferd_execution_count_total", "counter",
         "Model executions (one per dynamically formed batch).");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_execution_count_total{{{}}} {}\n", labels[i],
                   models[i].execution_count);
  }
  Header(out, "inferd_batch_split_total", "counter",
         "Merged batches that failed with INVALID_ARGUMENT and were re-run request by request.");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_batch_split_total{{{}}} {}\n", labels[i], models[i].batches_split);
  }
  Header(out, "inferd_memory_plans_recorded_total", "counter",
         "Activation memory plans recorded (the first run of each input shape; growth in steady "
         "state means shapes are re-planned).");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_memory_plans_recorded_total{{{}}} {}\n", labels[i],
                   models[i].memory_plans_recorded);
  }
  struct HistFamily {
    const char* name;
    const char* help;
    HistogramSnapshot ModelStatisticsSnapshot::*field;
    double divisor;  // recorded unit → exported unit (division keeps 100µs → 0.0001 exact)
  };
  const HistFamily hists[] = {
      {"inferd_request_duration_seconds", "End-to-end request duration (enqueue to response).",
       &ModelStatisticsSnapshot::request_us, 1e6},
      {"inferd_queue_duration_seconds", "Time requests wait in the queue before their batch runs.",
       &ModelStatisticsSnapshot::queue_us, 1e6},
      {"inferd_compute_duration_seconds",
       "Batch compute duration (assembly, model execution, output split).",
       &ModelStatisticsSnapshot::compute_us, 1e6},
      {"inferd_batch_size", "Rows per executed batch.", &ModelStatisticsSnapshot::batch_size, 1.0},
  };
  for (const auto& h : hists) {
    Header(out, h.name, "histogram", h.help);
    for (size_t i = 0; i < models.size(); ++i) {
      Histogram(out, h.name, labels[i], models[i].*(h.field), h.divisor);
    }
  }
  Header(out, "inferd_pending_requests", "gauge", "Requests queued or executing.");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_pending_requests{{{}}} {}\n", labels[i], models[i].pending);
  }
  Header(out, "inferd_model_instances", "gauge",
         "Instances of the model version serving now (autoscaling moves it between min and max).");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_model_instances{{{}}} {}\n", labels[i], models[i].instances);
  }
  Header(out, "inferd_model_scale_events_total", "counter",
         "Autoscaling events: the instance count raised (up) or lowered (down).");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_model_scale_events_total{{{},direction=\"up\"}} {}\n", labels[i],
                   models[i].scale_ups);
    fmt::format_to(it, "inferd_model_scale_events_total{{{},direction=\"down\"}} {}\n",
                   labels[i], models[i].scale_downs);
  }
  Header(out, "inferd_model_busy_seconds_total", "counter",
         "Instance time spent executing batches, summed over instances (rate / instances = "
         "utilization).");
  for (size_t i = 0; i < models.size(); ++i) {
    fmt::format_to(it, "inferd_model_busy_seconds_total{{{}}} {}\n", labels[i],
                   Num(static_cast<double>(models[i].busy_ns) / 1e9));
  }
  if (process != nullptr) {
    Header(out, "process_cpu_seconds_total", "counter", "User and system CPU time.");
    fmt::format_to(it, "process_cpu_seconds_total {}\n", Num(process->cpu_seconds));
    Header(out, "process_resident_memory_bytes", "gauge", "Resident set size.");
    fmt::format_to(it, "process_resident_memory_bytes {}\n", process->resident_bytes);
    Header(out, "process_start_time_seconds", "gauge", "Start time since the Unix epoch.");
    fmt::format_to(it, "process_start_time_seconds {}\n", Num(process->start_time_seconds));
  }
  return out;
}

}  // namespace inferd::server

namespace inferd::server {

namespace {

// inferd_moe_expert_tokens_total{model, layer, expert}: only when some model has MoE layers, so
// dense models' pages do not change.
void RenderExpertLoad(std::string& out, const std::vector<GenerationMetrics>& models,
                      const std::vector<std::string>& labels) {
  bool any = false;
  for (const auto& m : models) any = any || !m.moe_expert_tokens.empty();
  if (!any) return;
  const char* name = "inferd_moe_expert_tokens_total";
  Header(out, name, "counter",
         "Mixture of experts: tokens the router sent to each expert (a token counts once per "
         "expert of its top k).");
  auto it = std::back_inserter(out);
  for (size_t i = 0; i < models.size(); ++i) {
    const auto& load = models[i].moe_expert_tokens;
    for (size_t l = 0; l < load.size(); ++l) {
      for (size_t e = 0; e < load[l].size(); ++e) {
        fmt::format_to(it, "{}{{{},layer=\"{}\",expert=\"{}\"}} {}\n", name, labels[i], l, e,
                       load[l][e]);
      }
    }
  }
}

}  // namespace

std::string RenderGenerationMetrics(const std::vector<GenerationMetrics>& models) {
  std::string out;
  if (models.empty()) return out;
  auto it = std::back_inserter(out);
  std::vector<std::string> labels;
  for (const auto& m : models) labels.push_back(fmt::format("model=\"{}\"", EscapeLabelValue(m.model)));
  struct HistFamily {
    const char* name;
    const char* help;
    HistogramSnapshot GenerationMetrics::*field;
  };
  const HistFamily hists[] = {
      {"inferd_time_to_first_token_seconds", "Time from arrival to the first generated token.",
       &GenerationMetrics::ttft},
      {"inferd_time_per_output_token_seconds",
       "Mean time per generated token after the first, per request.", &GenerationMetrics::tpot},
      {"inferd_inter_token_latency_seconds", "Time between consecutive generated tokens.",
       &GenerationMetrics::itl},
      {"inferd_e2e_request_latency_seconds", "Time from arrival to the last token.",
       &GenerationMetrics::e2e},
  };
  for (const auto& h : hists) {
    Header(out, h.name, "histogram", h.help);
    for (size_t i = 0; i < models.size(); ++i) {
      Histogram(out, h.name, labels[i], models[i].*(h.field), 1.0);
    }
  }
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const GenerationMetrics&);
  };
  using M = GenerationMetrics;
  const Family families[] = {
      {"inferd_prompt_tokens_total", "counter", "Prompt tokens processed (prefill).",
       [](const M& m) { return static_cast<double>(m.prompt_tokens); }},
      {"inferd_generation_tokens_total", "counter", "Tokens generated.",
       [](const M& m) { return static_cast<double>(m.generated_tokens); }},
      {"inferd_num_requests_running", "gauge", "Sequences in the running batch.",
       [](const M& m) { return static_cast<double>(m.running); }},
      {"inferd_num_requests_waiting", "gauge", "Sequences waiting for admission.",
       [](const M& m) { return static_cast<double>(m.waiting); }},
      {"inferd_kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (0 to 1).",
       [](const M& m) {
         return m.kv_blocks_total > 0 ? static_cast<double>(m.kv_blocks_used) /
                                            static_cast<double>(m.kv_blocks_total)
                                      : 0.0;
       }},
      {"inferd_kv_cache_blocks_used", "gauge", "KV cache blocks in use.",
       [](const M& m) { return static_cast<double>(m.kv_blocks_used); }},
      {"inferd_kv_cache_blocks", "gauge", "KV cache blocks in the pool (used and free).",
       [](const M& m) { return static_cast<double>(m.kv_blocks_total); }},
      {"inferd_kv_cache_bytes", "gauge",
       "Bytes of the KV cache pool as stored (float32 or int8 codes with their scales).",
       [](const M& m) { return static_cast<double>(m.kv_blocks_total * m.kv_block_bytes); }},
      {"inferd_kv_cache_bytes_used", "gauge", "Bytes of the KV cache blocks in use.",
       [](const M& m) { return static_cast<double>(m.kv_blocks_used * m.kv_block_bytes); }},
      {"inferd_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
       [](const M& m) { return static_cast<double>(m.prefix_queries); }},
      {"inferd_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
       [](const M& m) { return static_cast<double>(m.prefix_hits); }},
      {"inferd_num_preemptions_total", "counter",
       "Sequences preempted (blocks freed, recomputed later) when the KV cache ran out.",
       [](const M& m) { return static_cast<double>(m.preemptions); }},
      {"inferd_generation_requests_total", "counter", "Generation requests finished.",
       [](const M& m) { return static_cast<double>(m.requests_finished); }},
      {"inferd_spec_decode_num_draft_tokens_total", "counter",
       "Speculative decoding: draft tokens proposed to the target.",
       [](const M& m) { return static_cast<double>(m.spec_draft_tokens); }},
      {"inferd_spec_decode_num_accepted_tokens_total", "counter",
       "Speculative decoding: draft tokens the target kept.",
       [](const M& m) { return static_cast<double>(m.spec_accepted_tokens); }},
      {"inferd_spec_decode_draft_acceptance_rate", "gauge",
       "Speculative decoding: accepted / draft tokens since start (0 before any draft).",
       [](const M& m) {
         return m.spec_draft_tokens > 0 ? static_cast<double>(m.spec_accepted_tokens) /
                                              static_cast<double>(m.spec_draft_tokens)
                                        : 0.0;
       }},
  };
  for (const auto& f : families) {
    Header(out, f.name, f.type, f.help);
    for (size_t i = 0; i < models.size(); ++i) {
      fmt::format_to(it, "{}{{{}}} {}\n", f.name, labels[i], Num(f.value(models[i])));
    }
  }
  RenderExpertLoad(out, models, labels);
  return out;
}

}  // namespace inferd::server
