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

// Escapes a label value (backslash, double quote, newline) for the exposition format.
std::string EscapeLabelValue(std::string_view value);

}  // namespace inferd::server
