// Results of the server load generator and their renderings: JSON (a list of points), CSV (one row
// per point) and an SVG latency-throughput chart. The SVG is written by hand: there is no C++
// plotting library among the project's dependencies, and the chart is simple (two polylines).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "loadgen/latency_stats.h"

namespace inferd::loadgen {

// One measured load level (the merge of its last three windows).
struct PointResult {
  enum class Mode { kConcurrency, kRequestRate };
  Mode mode = Mode::kConcurrency;
  double level = 0;          // concurrency, or intended requests per second
  double throughput = 0;     // inferences (rows) per second: successful requests x batch
  double requests_per_s = 0; // successful requests per second
  LatencySummary latency;    // µs, successful requests
  std::map<std::string, int64_t> errors;  // kind -> count
  int64_t error_count = 0;
  double server_queue_us = -1;    // average per request from the statistics endpoint; -1 unknown
  double server_compute_us = -1;  // average compute_infer per request; -1 unknown
  double client_cpu_pct = 0;      // this process, percent of one core
  double server_cpu_pct = -1;     // from --metrics-url (process_cpu_seconds_total); -1 unknown
  double server_rss_mb = -1;      // from --metrics-url; -1 unknown
  bool stable = false;
  int windows = 0;
};

std::string PointsToJson(const std::vector<PointResult>& points);
std::string PointsToCsv(const std::vector<PointResult>& points);
// P50 and P99 (ms) against throughput (infer/s), one marker per point, axes with ticks, legend.
// The generation bench plots TTFT against output tokens/s with the same chart (other labels).
std::string LatencyThroughputSvg(const std::vector<PointResult>& points, const std::string& title,
                                 const std::string& x_label = "throughput (infer/s)",
                                 const std::string& y_label = "latency (ms)");

// Writes `text` to `path` (a report: JSON, CSV, SVG); INVALID_ARGUMENT naming the path on failure.
Status WriteReportFile(const std::string& path, const std::string& text);

// "1, 2, 5 x 10^k" tick step giving about `target` ticks over [0, max].
double NiceStep(double max, int target);

}  // namespace inferd::loadgen
