#include "loadgen/server_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <ostream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "loadgen/client.h"
#include "loadgen/load_driver.h"

namespace inferd::loadgen {

namespace {

using SteadyClock = std::chrono::steady_clock;

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

struct ServerProcess {
  double cpu_seconds = -1;
  double rss_bytes = -1;
};

// process_cpu_seconds_total and process_resident_memory_bytes from a Prometheus text page.
std::optional<ServerProcess> FetchServerProcess(const std::string& metrics_url,
                                                std::chrono::milliseconds timeout) {
  if (metrics_url.empty()) return std::nullopt;
  auto page = HttpGet(metrics_url, timeout);
  if (!page.ok()) return std::nullopt;
  ServerProcess p;
  size_t pos = 0;
  const std::string& text = *page;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    auto value = [&](std::string_view name) -> double {
      if (!line.starts_with(name) || line.size() <= name.size() || line[name.size()] != ' ') {
        return -1;
      }
      return std::strtod(std::string(line.substr(name.size() + 1)).c_str(), nullptr);
    };
    if (double v = value("process_cpu_seconds_total"); v >= 0) p.cpu_seconds = v;
    if (double v = value("process_resident_memory_bytes"); v >= 0) p.rss_bytes = v;
    pos = end + 1;
  }
  return p;
}

// The state at a window boundary.
struct Boundary {
  SteadyClock::time_point time;
  double client_cpu = 0;
  std::optional<ServerStats> stats;
  std::optional<ServerProcess> process;
};

struct Window {
  double seconds = 0;
  Recorder::Window data;
  LatencySummary latency;  // of data.latencies_us (kept unsorted copy in data)
  double throughput = 0;
  double client_cpu_s = 0;
  std::optional<ServerStats> stats_delta;
  double server_cpu_s = -1;
  double server_rss_mb = -1;
};

class LevelRunner {
 public:
  LevelRunner(InferenceClient& client, const ServerBenchOptions& o) : client_(client), o_(o) {}

  Boundary Mark() {
    Boundary b;
    b.stats = [&]() -> std::optional<ServerStats> {
      auto s = client_.GetStats();
      return s.ok() ? std::optional(*s) : std::nullopt;
    }();
    b.process = FetchServerProcess(o_.metrics_url, std::chrono::milliseconds(o_.timeout_ms));
    b.client_cpu = ProcessCpuSeconds();
    b.time = SteadyClock::now();
    return b;
  }

  Window Close(const Boundary& a, const Boundary& b, Recorder::Window data) {
    Window w;
    w.seconds = std::chrono::duration<double>(b.time - a.time).count();
    w.data = std::move(data);
    std::vector<int64_t> lat = w.data.latencies_us;
    w.latency = Summarize(lat);
    w.throughput = static_cast<double>(w.latency.count) * o_.batch / std::max(w.seconds, 1e-9);
    w.client_cpu_s = b.client_cpu - a.client_cpu;
    if (a.stats && b.stats) {
      ServerStats d;
      d.success_count = b.stats->success_count - a.stats->success_count;
      d.queue_count = b.stats->queue_count - a.stats->queue_count;
      d.queue_ns = b.stats->queue_ns - a.stats->queue_ns;
      d.compute_count = b.stats->compute_count - a.stats->compute_count;
      d.compute_ns = b.stats->compute_ns - a.stats->compute_ns;
      d.inference_count = b.stats->inference_count - a.stats->inference_count;
      d.execution_count = b.stats->execution_count - a.stats->execution_count;
      w.stats_delta = d;
    }
    if (a.process && b.process && a.process->cpu_seconds >= 0 && b.process->cpu_seconds >= 0) {
      w.server_cpu_s = b.process->cpu_seconds - a.process->cpu_seconds;
    }
    if (b.process && b.process->rss_bytes >= 0) w.server_rss_mb = b.process->rss_bytes / 1048576;
    return w;
  }

 private:
  InferenceClient& client_;
  const ServerBenchOptions& o_;
};

// Merges windows into one point.
PointResult Merge(const std::vector<Window>& windows, PointResult::Mode mode, double level,
                  int batch) {
  PointResult p;
  p.mode = mode;
  p.level = level;
  std::vector<int64_t> lat;
  double seconds = 0, client_cpu = 0, server_cpu = 0;
  bool server_cpu_known = true;
  ServerStats d;
  bool stats_known = true;
  for (const Window& w : windows) {
    lat.insert(lat.end(), w.data.latencies_us.begin(), w.data.latencies_us.end());
    for (const auto& [k, n] : w.data.errors) {
      p.errors[k] += n;
      p.error_count += n;
    }
    seconds += w.seconds;
    client_cpu += w.client_cpu_s;
    if (w.server_cpu_s < 0) server_cpu_known = false;
    server_cpu += w.server_cpu_s;
    p.server_rss_mb = w.server_rss_mb;
    if (!w.stats_delta) {
      stats_known = false;
    } else {
      d.queue_count += w.stats_delta->queue_count;
      d.queue_ns += w.stats_delta->queue_ns;
      d.compute_count += w.stats_delta->compute_count;
      d.compute_ns += w.stats_delta->compute_ns;
    }
  }
  p.windows = static_cast<int>(windows.size());
  p.latency = Summarize(lat);
  seconds = std::max(seconds, 1e-9);
  p.requests_per_s = static_cast<double>(p.latency.count) / seconds;
  p.throughput = p.requests_per_s * batch;
  p.client_cpu_pct = 100.0 * client_cpu / seconds;
  if (server_cpu_known && !windows.empty()) p.server_cpu_pct = 100.0 * server_cpu / seconds;
  if (stats_known && d.queue_count > 0) p.server_queue_us = d.queue_ns / 1e3 / d.queue_count;
  if (stats_known && d.compute_count > 0) {
    p.server_compute_us = d.compute_ns / 1e3 / d.compute_count;
  }
  return p;
}

std::string LevelName(PointResult::Mode mode, double level) {
  return mode == PointResult::Mode::kConcurrency ? fmt::format("concurrency {:g}", level)
                                                 : fmt::format("rate {:g}/s", level);
}

std::string WindowLine(const Window& w) {
  int64_t errors = 0;
  for (const auto& [k, n] : w.data.errors) errors += n;
  return fmt::format("{:.1f} infer/s, p50 {:.2f} ms, p99 {:.2f} ms, errors {}", w.throughput,
                     w.latency.p50_us / 1e3, w.latency.p99_us / 1e3, errors);
}

std::unique_ptr<LoadDriver> StartDriver(InferenceClient& client, std::shared_ptr<Recorder> rec,
                                        PointResult::Mode mode, double level,
                                        ArrivalSchedule::Distribution dist, uint64_t seed) {
  if (mode == PointResult::Mode::kConcurrency) {
    return StartClosedLoop(client, std::move(rec), static_cast<int>(level));
  }
  return StartOpenLoop(client, std::move(rec), level, dist, seed);
}

void SleepFor(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Lets the load run --warmup-ms uncounted (connections open, the server's first requests), then
// marks the start of the first window.
Boundary WarmUp(LevelRunner& runner, Recorder& rec, const ServerBenchOptions& o) {
  if (o.warmup_ms > 0) {
    SleepFor(o.warmup_ms);
    rec.Take();
  }
  return runner.Mark();
}

StatusOr<PointResult> MeasureLevel(InferenceClient& client, const ServerBenchOptions& o,
                                   PointResult::Mode mode, double level,
                                   ArrivalSchedule::Distribution dist, std::ostream& err) {
  LevelRunner runner(client, o);
  auto rec = std::make_shared<Recorder>();
  auto driver = StartDriver(client, rec, mode, level, dist, o.seed);
  Boundary a = WarmUp(runner, *rec, o);
  std::vector<Window> windows;
  std::vector<double> throughputs, latencies;
  bool stable = false;
  for (int trial = 1; trial <= o.max_trials && !stable; ++trial) {
    SleepFor(o.measurement_interval_ms);
    Recorder::Window data = rec->Take();
    Boundary b = runner.Mark();
    windows.push_back(runner.Close(a, b, std::move(data)));
    a = b;
    throughputs.push_back(windows.back().throughput);
    latencies.push_back(windows.back().latency.avg_us);
    stable = LastAgree(throughputs, o.stability_percentage) &&
             LastAgree(latencies, o.stability_percentage);
    if (!o.quiet) {
      err << fmt::format("[bench] {} window {}/{}: {}{}\n", LevelName(mode, level), trial,
                         o.max_trials, WindowLine(windows.back()), stable ? " (stable)" : "")
          << std::flush;
    }
  }
  driver->Stop(std::chrono::milliseconds(o.timeout_ms));
  driver.reset();
  rec->Take();
  const size_t keep = std::min<size_t>(3, windows.size());
  std::vector<Window> last(windows.end() - static_cast<std::ptrdiff_t>(keep), windows.end());
  PointResult p = Merge(last, mode, level, o.batch);
  p.stable = stable;
  if (p.latency.count == 0) {
    std::string kinds;
    for (const auto& [k, n] : p.errors) kinds += fmt::format(" {}={}", k, n);
    return Unavailable("{}: no request succeeded (errors:{})", LevelName(mode, level),
                       kinds.empty() ? " none; no answer at all" : kinds);
  }
  return p;
}

std::string Opt(double v, const char* fmtstr) {
  return v < 0 ? std::string("-") : fmt::format(fmt::runtime(fmtstr), v);
}

void PrintTable(const std::vector<PointResult>& points, std::ostream& out) {
  out << fmt::format("{:>14} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>10} {:>8} {:>8} "
                     "{:>6}\n",
                     "level", "infer/s", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "max ms",
                     "errors", "queue us", "compute us", "cli cpu%", "srv cpu%", "stable");
  for (const auto& p : points) {
    out << fmt::format(
        "{:>14} {:>11.1f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>7} {:>9} {:>10} "
        "{:>8.0f} {:>8} {:>6}\n",
        p.mode == PointResult::Mode::kConcurrency ? fmt::format("c={:g}", p.level)
                                                  : fmt::format("rate={:g}", p.level),
        p.throughput, p.latency.p50_us / 1e3, p.latency.p90_us / 1e3, p.latency.p95_us / 1e3,
        p.latency.p99_us / 1e3, p.latency.max_us / 1e3, p.error_count,
        Opt(p.server_queue_us, "{:.0f}"), Opt(p.server_compute_us, "{:.0f}"), p.client_cpu_pct,
        Opt(p.server_cpu_pct, "{:.0f}"), p.stable ? "yes" : "no");
  }
}

Status Validate(const ServerBenchOptions& o) {
  if (o.model.empty()) return InvalidArgument("--model is required with --url");
  if (!o.concurrency_range.empty() && !o.request_rate_range.empty()) {
    return InvalidArgument("give --concurrency-range or --request-rate-range, not both");
  }
  if (o.batch < 1) return InvalidArgument("--batch must be at least 1");
  if (o.measurement_interval_ms < 10) {
    return InvalidArgument("--measurement-interval-ms must be at least 10");
  }
  if (o.stability_percentage <= 0) return InvalidArgument("--stability-percentage must be > 0");
  if (o.max_trials < 3) return InvalidArgument("--max-trials must be at least 3");
  if (o.max_connections < 1) return InvalidArgument("--max-connections must be at least 1");
  if (o.warmup_ms < 0) return InvalidArgument("--warmup-ms must not be negative");
  if (o.grpc_channels < 1) return InvalidArgument("--grpc-channels must be at least 1");
  if (o.timeout_ms < 1) return InvalidArgument("--timeout-ms must be positive");
  return Status::Ok();
}

// Soak: one level for `duration`, a line per window, warnings when throughput, P99 or the
// server's RSS drift from the first three windows by more than the stability percentage.
Status Soak(InferenceClient& client, const ServerBenchOptions& o, PointResult::Mode mode,
            double level, ArrivalSchedule::Distribution dist, std::chrono::milliseconds duration,
            std::vector<PointResult>* points, std::ostream& out) {
  LevelRunner runner(client, o);
  auto rec = std::make_shared<Recorder>();
  auto driver = StartDriver(client, rec, mode, level, dist, o.seed);
  Boundary a = WarmUp(runner, *rec, o);
  const auto start = a.time;
  std::vector<Window> windows;
  PointResult base;
  int warnings = 0;
  out << fmt::format("soak: {} for {:.0f} s, a line every {} ms\n", LevelName(mode, level),
                     duration.count() / 1e3, o.measurement_interval_ms);
  while (SteadyClock::now() - start < duration) {
    SleepFor(o.measurement_interval_ms);
    Recorder::Window data = rec->Take();
    Boundary b = runner.Mark();
    windows.push_back(runner.Close(a, b, std::move(data)));
    a = b;
    PointResult p = Merge({windows.back()}, mode, level, o.batch);
    p.stable = true;
    const double elapsed = std::chrono::duration<double>(b.time - start).count();
    out << fmt::format("[soak] t={:7.1f}s {:10.1f} infer/s  p99 {:8.2f} ms  server RSS {}  "
                       "errors {}\n",
                       elapsed, p.throughput, p.latency.p99_us / 1e3,
                       Opt(p.server_rss_mb, "{:.1f} MB"), p.error_count);
    if (windows.size() == 3) base = Merge(windows, mode, level, o.batch);
    if (windows.size() > 3) {
      const double pct = o.stability_percentage / 100;
      std::vector<std::string> drift;
      if (p.throughput < base.throughput * (1 - pct)) {
        drift.push_back(fmt::format("throughput {:.1f} < {:.1f} at start", p.throughput,
                                    base.throughput));
      }
      if (p.latency.p99_us > base.latency.p99_us * (1 + pct)) {
        drift.push_back(fmt::format("p99 {:.2f} ms > {:.2f} ms at start", p.latency.p99_us / 1e3,
                                    base.latency.p99_us / 1e3));
      }
      if (base.server_rss_mb > 0 && p.server_rss_mb > base.server_rss_mb * (1 + pct)) {
        drift.push_back(fmt::format("server RSS {:.1f} MB > {:.1f} MB at start", p.server_rss_mb,
                                    base.server_rss_mb));
      }
      for (const auto& d : drift) out << "warning: drift: " << d << "\n";
      warnings += static_cast<int>(drift.size());
    }
    out << std::flush;
    points->push_back(p);
  }
  driver->Stop(std::chrono::milliseconds(o.timeout_ms));
  out << fmt::format("soak: {} windows, {} drift warnings\n", windows.size(), warnings);
  return Status::Ok();
}

}  // namespace

Status RunServerBench(const ServerBenchOptions& o, std::ostream& out, std::ostream& err) {
  RETURN_IF_ERROR(Validate(o));
  ClientOptions co;
  ASSIGN_OR_RETURN(co.url, ParseServerUrl(o.url));
  if (o.streaming && co.url.protocol != ServerUrl::Protocol::kGrpc) {
    return InvalidArgument("--streaming needs a grpc:// --url (it uses ModelStreamInfer)");
  }
  co.model = o.model;
  co.version = o.version;
  co.max_connections = o.max_connections;
  co.grpc_channels = o.grpc_channels;
  co.grpc_streaming = o.streaming;
  co.timeout = std::chrono::milliseconds(o.timeout_ms);
  ASSIGN_OR_RETURN(auto dist, ParseDistribution(o.distribution));
  const bool open_loop = !o.request_rate_range.empty();
  const PointResult::Mode mode =
      open_loop ? PointResult::Mode::kRequestRate : PointResult::Mode::kConcurrency;
  ASSIGN_OR_RETURN(std::vector<double> levels,
                   ParseRange(open_loop ? o.request_rate_range
                                        : (o.concurrency_range.empty() ? "1"
                                                                       : o.concurrency_range)));
  if (!open_loop) {
    for (double l : levels) {
      if (l != static_cast<double>(static_cast<int>(l)) || l > 100000) {
        return InvalidArgument("--concurrency-range: levels must be whole numbers up to 100000");
      }
    }
  }
  std::optional<std::chrono::milliseconds> soak;
  if (!o.duration.empty()) {
    ASSIGN_OR_RETURN(soak, ParseDuration(o.duration));
  }

  ASSIGN_OR_RETURN(std::unique_ptr<InferenceClient> client, CreateClient(co));
  auto md = client->GetMetadata();
  if (!md.ok()) return md.status().WithContext("model '" + o.model + "' at " + o.url);
  ASSIGN_OR_RETURN(auto inputs, BuildInputs(*md, o.batch, o.inputs, o.shapes, o.seed));
  RETURN_IF_ERROR(client->Prepare(inputs));
  if (!o.quiet) {
    std::string desc;
    for (const auto& in : inputs) {
      std::string dims;
      for (int64_t d : in.spec.shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
      desc += fmt::format(" {}:{}[{}]", in.spec.name, in.spec.datatype, dims);
    }
    err << "[bench] " << o.url << " model " << o.model << ", inputs" << desc << "\n";
  }

  std::vector<PointResult> points;
  if (soak) {
    RETURN_IF_ERROR(Soak(*client, o, mode, levels.front(), dist, *soak, &points, out));
  } else {
    for (double level : levels) {
      ASSIGN_OR_RETURN(PointResult p, MeasureLevel(*client, o, mode, level, dist, err));
      points.push_back(std::move(p));
    }
    PrintTable(points, out);
  }
  client->Shutdown(co.timeout);
  if (!o.json_path.empty()) RETURN_IF_ERROR(WriteReportFile(o.json_path, PointsToJson(points)));
  if (!o.csv_path.empty()) RETURN_IF_ERROR(WriteReportFile(o.csv_path, PointsToCsv(points)));
  if (!o.plot_path.empty()) {
    RETURN_IF_ERROR(WriteReportFile(
        o.plot_path,
        LatencyThroughputSvg(points, fmt::format("{} at {} (batch {})", o.model, o.url, o.batch))));
  }
  return Status::Ok();
}

}  // namespace inferd::loadgen
