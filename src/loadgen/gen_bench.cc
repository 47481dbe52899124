#include "loadgen/gen_bench.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "common/mutex.h"
#include "loadgen/gen_client.h"
#include "loadgen/gen_stats.h"
#include "loadgen/latency_stats.h"
#include "loadgen/report.h"

namespace inferd::loadgen {

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Completions of one level, filled on the client's I/O thread.
class Collector {
 public:
  explicit Collector(size_t n) : records_(n) {}
  void Add(size_t i, GenRequestRecord r) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    records_[i] = std::move(r);
    ++done_;
    last_ = SteadyClock::now();
    cv_.NotifyAll();
  }
  // Blocks until `n` records arrived; returns them and the time of the last one.
  std::pair<std::vector<GenRequestRecord>, SteadyClock::time_point> Wait(size_t n) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (done_ < n) cv_.Wait(&mu_);
    return {std::move(records_), last_};
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<GenRequestRecord> records_ GUARDED_BY(mu_);
  size_t done_ GUARDED_BY(mu_) = 0;
  SteadyClock::time_point last_ GUARDED_BY(mu_);
};

struct Workload {
  std::vector<std::string> bodies;
  std::vector<GenPrompt> prompts;
};

void Send(CompletionClient& client, const Workload& w, size_t i,
          const std::shared_ptr<Collector>& c, std::function<void()> then = nullptr) {
  client.AsyncComplete(w.bodies[i], w.prompts[i].prompt_tokens, w.prompts[i].max_tokens,
                       [c, i, then = std::move(then)](GenRequestRecord r) {
                         c->Add(i, std::move(r));
                         if (then) then();
                       });
}

// Open loop: request i is sent at its arrival time whatever the server does.
std::vector<GenRequestRecord> RunRate(CompletionClient& client, const Workload& w, double rate,
                                      ArrivalSchedule::Distribution dist, double burstiness,
                                      uint64_t seed, double* seconds) {
  auto c = std::make_shared<Collector>(w.bodies.size());
  const auto start = SteadyClock::now();
  auto next = start;
  std::optional<ArrivalSchedule> schedule;
  if (std::isfinite(rate)) schedule.emplace(rate, dist, seed, burstiness);
  for (size_t i = 0; i < w.bodies.size(); ++i) {
    std::this_thread::sleep_until(next);
    Send(client, w, i, c);
    if (schedule) next += schedule->NextGap();
  }
  auto [records, last] = c->Wait(w.bodies.size());
  *seconds = std::chrono::duration<double>(last - start).count();
  return std::move(records);
}

// Closed loop: `concurrency` requests outstanding; each completion sends the next prompt.
std::vector<GenRequestRecord> RunConcurrency(CompletionClient& client, const Workload& w,
                                             int concurrency, double* seconds) {
  auto c = std::make_shared<Collector>(w.bodies.size());
  auto next = std::make_shared<std::atomic<size_t>>(0);
  // Holds itself through the completion callbacks it installs; cleared after the wait.
  auto launch = std::make_shared<std::function<void()>>();
  *launch = [&client, &w, c, next, weak = std::weak_ptr(launch)] {
    const size_t i = next->fetch_add(1);
    if (i >= w.bodies.size()) return;
    auto self = weak.lock();
    Send(client, w, i, c, [self] {
      if (self) (*self)();
    });
  };
  const auto start = SteadyClock::now();
  for (int k = 0; k < concurrency; ++k) (*launch)();
  auto [records, last] = c->Wait(w.bodies.size());
  *seconds = std::chrono::duration<double>(last - start).count();
  return std::move(records);
}

StatusOr<Workload> BuildWorkload(const GenBenchOptions& o) {
  Workload w;
  ASSIGN_OR_RETURN(LengthRange out_len, ParseLengthRange(o.output_len, "--output-len"));
  if (!o.dataset.empty()) {
    std::ifstream f(o.dataset, std::ios::binary);
    if (!f) return InvalidArgument("cannot read --dataset '{}'", o.dataset);
    std::stringstream ss;
    ss << f.rdbuf();
    auto prompts = ParseJsonlPrompts(ss.str(), o.num_prompts, out_len, o.seed);
    if (!prompts.ok()) return prompts.status().WithContext(o.dataset);
    w.prompts = std::move(*prompts);
  } else {
    ASSIGN_OR_RETURN(LengthRange in_len, ParseLengthRange(o.input_len, "--input-len"));
    w.prompts = RandomPrompts(o.num_prompts, in_len, out_len, o.vocab_size, o.seed);
  }
  for (const GenPrompt& p : w.prompts) w.bodies.push_back(CompletionBody(o.model, p, o.ignore_eos));
  return w;
}

Status Validate(const GenBenchOptions& o) {
  if (o.model.empty()) return InvalidArgument("--generate needs --model NAME");
  if (!o.concurrency_range.empty() && !o.request_rate_range.empty()) {
    return InvalidArgument("give --concurrency-range or --request-rate-range, not both");
  }
  if (o.num_prompts < 1 || o.num_prompts > 1'000'000) {
    return InvalidArgument("--num-prompts must be in [1, 1000000]");
  }
  if (o.vocab_size < 4) return InvalidArgument("--vocab-size must be at least 4");
  if (!(o.burstiness > 0) || !std::isfinite(o.burstiness)) {
    return InvalidArgument("--burstiness must be a positive number");
  }
  if (o.slo_ttft_ms < 0 || o.slo_tpot_ms < 0) return InvalidArgument("SLOs must be >= 0 ms");
  if (o.warmup_requests < 0) return InvalidArgument("--warmup-requests must be >= 0");
  if (o.timeout_ms < 1) return InvalidArgument("--timeout-ms must be positive");
  if (o.endpoint.empty() || o.endpoint.front() != '/') {
    return InvalidArgument("--endpoint must be a path starting with '/'");
  }
  return Status::Ok();
}

// Levels: request rates ("inf" = all at once) or whole concurrencies.
StatusOr<std::vector<double>> Levels(const GenBenchOptions& o, bool* concurrency) {
  *concurrency = !o.concurrency_range.empty();
  if (!*concurrency && (o.request_rate_range.empty() || o.request_rate_range == "inf")) {
    return std::vector<double>{kInf};
  }
  ASSIGN_OR_RETURN(std::vector<double> levels,
                   ParseRange(*concurrency ? o.concurrency_range : o.request_rate_range));
  for (double l : levels) {
    if (*concurrency && (l != std::floor(l) || l > 100000)) {
      return InvalidArgument("--concurrency-range: levels must be whole numbers up to 100000");
    }
  }
  return levels;
}

std::string LevelName(const GenRunResult& r) {
  if (r.concurrency_mode) return fmt::format("c={:g}", r.level);
  return std::isfinite(r.level) ? fmt::format("rate={:g}", r.level) : "rate=inf";
}

void PrintTable(const std::vector<GenRunResult>& runs, std::ostream& out) {
  out << fmt::format(
      "{:>10} {:>6} {:>5} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} "
      "{:>9} {:>9}\n",
      "level", "done", "fail", "req/s", "out tok/s", "goodput", "TTFT avg", "TTFT p50", "TTFT p99",
      "TPOT avg", "TPOT p99", "ITL p99", "E2E p50", "E2E p99");
  for (const GenRunResult& r : runs) {
    out << fmt::format(
        "{:>10} {:>6} {:>5} {:>8.2f} {:>9.1f} {:>8.2f} {:>9.1f} {:>9.1f} {:>9.1f} "
        "{:>9.2f} {:>9.2f} {:>9.2f} {:>9.1f} {:>9.1f}\n",
        LevelName(r), r.completed, r.failed, r.request_throughput, r.output_throughput, r.goodput,
        r.ttft.mean, r.ttft.median, r.ttft.p99, r.tpot.mean, r.tpot.p99, r.itl.p99, r.e2e.median,
        r.e2e.p99);
  }
  out << "(latencies in ms; goodput: requests/s within the SLOs)\n";
}

Status Warmup(CompletionClient& client, const GenBenchOptions& o, const Workload& w) {
  for (int i = 0; i < o.warmup_requests; ++i) {
    GenPrompt p = w.prompts[static_cast<size_t>(i) % w.prompts.size()];
    p.max_tokens = std::min(p.max_tokens, 8);
    auto c = std::make_shared<Collector>(1);
    client.AsyncComplete(CompletionBody(o.model, p, o.ignore_eos), p.prompt_tokens, p.max_tokens,
                         [c](GenRequestRecord r) { c->Add(0, std::move(r)); });
    auto [records, last] = c->Wait(1);
    if (!records[0].ok) {
      return Unavailable("warmup request to {}{} failed: {}", o.url, o.endpoint, records[0].error);
    }
  }
  return Status::Ok();
}

}  // namespace

Status RunGenBench(const GenBenchOptions& o, std::ostream& out, std::ostream& err) {
  RETURN_IF_ERROR(Validate(o));
  GenClientOptions co;
  ASSIGN_OR_RETURN(co.url, ParseServerUrl(o.url));
  co.path = o.endpoint;
  co.timeout = std::chrono::milliseconds(o.timeout_ms);
  ASSIGN_OR_RETURN(auto dist, ParseDistribution(o.distribution));
  bool concurrency = false;
  ASSIGN_OR_RETURN(std::vector<double> levels, Levels(o, &concurrency));
  ASSIGN_OR_RETURN(Workload w, BuildWorkload(o));
  ASSIGN_OR_RETURN(std::unique_ptr<CompletionClient> client, CreateCompletionClient(co));
  RETURN_IF_ERROR(Warmup(*client, o, w));
  const GenSloOptions slo{o.slo_ttft_ms, o.slo_tpot_ms};
  std::vector<GenRunResult> runs;
  for (double level : levels) {
    if (!o.quiet) {
      err << fmt::format(
          "[bench] {} {}: {} requests to {}{}\n", o.model,
          concurrency ? fmt::format("concurrency {:g}", level) : fmt::format("rate {:g}/s", level),
          w.bodies.size(), o.url, o.endpoint);
    }
    double seconds = 0;
    auto records = concurrency ? RunConcurrency(*client, w, static_cast<int>(level), &seconds)
                               : RunRate(*client, w, level, dist, o.burstiness, o.seed, &seconds);
    GenRunResult r = SummarizeRun(records, seconds, slo);
    r.level = level;
    r.concurrency_mode = concurrency;
    if (r.completed == 0) {
      client->Shutdown(std::chrono::milliseconds(0));
      return Unavailable("{}: every request failed ({})", LevelName(r),
                         r.errors.empty() ? "?" : r.errors.front().first);
    }
    runs.push_back(std::move(r));
  }
  client->Shutdown(co.timeout);
  PrintTable(runs, out);
  for (const GenRunResult& r : runs) {
    for (const auto& [kind, n] : r.errors)
      out << LevelName(r) << ": " << n << " x " << kind << "\n";
  }
  if (!o.json_path.empty()) RETURN_IF_ERROR(WriteReportFile(o.json_path, GenRunsToJson(runs, slo)));
  if (!o.plot_path.empty()) {
    RETURN_IF_ERROR(WriteReportFile(o.plot_path, GenRunsSvg(runs, o.model + ": TTFT vs output "
                                                                            "throughput")));
  }
  return Status::Ok();
}

}  // namespace inferd::loadgen
