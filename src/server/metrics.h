// Prometheus text exposition (format 0.0.4) of the serving statistics and process metrics.
//
// Pure rendering: the caller passes ModelManager::GetStatistics() and ReadProcessStats(); the
// metrics HTTP endpoint (`GET /metrics` on the metrics port) serves the result. Output passes
// `promtool check metrics` (tests/server checks it).
//
// Families (labels `model`, `version`; failures also `reason`):
//   inferd_request_success_total, inferd_request_failure_total        counters (requests)
//   inferd_inference_count_total, inferd_execution_count_total        counters (rows, batches)
//   inferd_request_duration_seconds, inferd_queue_duration_seconds,
//   inferd_compute_duration_seconds                                   histograms
//   inferd_batch_size                                                 histogram (rows per batch)
//   inferd_pending_requests                                           gauge
//   inferd_model_instances                                            gauge (instances now)
//   inferd_model_scale_events_total (label direction: up, down)       counter (autoscaling)
//   inferd_model_busy_seconds_total                                   counter (instance busy time)
//   process_cpu_seconds_total, process_resident_memory_bytes,
//   process_start_time_seconds                                        process (from /proc/self)
// Durations are recorded in microseconds by the serving core and exported in seconds, the unit
// Prometheus requires (promtool rejects `_us`/`_microseconds` names); bucket bounds are the
// recorded µs bounds divided by 10^6.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/text_generator.h"
#include "serving/model_manager.h"

namespace inferd::server {

struct ProcessStats {
  double cpu_seconds = 0;           // user + system
  int64_t resident_bytes = 0;       // RSS
  double start_time_seconds = 0;    // since the Unix epoch
};

// Reads /proc/self/stat (and the boot time from /proc/stat). Fails off Linux.
StatusOr<ProcessStats> ReadProcessStats();

// Renders every family; models without traffic still get zero-valued series.
std::string RenderPrometheusMetrics(const std::vector<serving::ModelStatisticsSnapshot>& models,
                                    const ProcessStats* process);

// The generation families (label `model`), in vLLM's names under the inferd_ prefix:
//   inferd_time_to_first_token_seconds, inferd_time_per_output_token_seconds,
//   inferd_inter_token_latency_seconds, inferd_e2e_request_latency_seconds   histograms
//   inferd_prompt_tokens_total, inferd_generation_tokens_total               counters (tokens)
//   inferd_num_requests_running, inferd_num_requests_waiting                 gauges (sequences)
//   inferd_kv_cache_usage_perc (used blocks / all blocks, 0..1),
//   inferd_kv_cache_blocks_used, inferd_kv_cache_blocks (the pool)           gauges
//   inferd_prefix_cache_queries_total, inferd_prefix_cache_hits_total        counters (tokens)
//   inferd_num_preemptions_total, inferd_generation_requests_total           counters
//   inferd_spec_decode_num_draft_tokens_total,
//   inferd_spec_decode_num_accepted_tokens_total                             counters (tokens)
//   inferd_spec_decode_draft_acceptance_rate (accepted / draft since start, 0 before any)  gauge
//   inferd_moe_expert_tokens_total (labels model, layer, expert; only when a model has MoE
//     layers): tokens the router sent to each expert                          counter (tokens)
// Empty input renders nothing (no generative model, no families).
std::string RenderGenerationMetrics(const std::vector<GenerationMetrics>& models);

// Escapes a label value (backslash, double quote, newline) for the exposition format.
std::string EscapeLabelValue(std::string_view value);

}  // namespace inferd::server
