#include "tools/bench_command.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <numeric>
#include <random>

#include "optimizer/optimization_level.h"
#include "runtime/session.h"
#include "tools/tensor_util.h"

namespace inferd::tools {
namespace {

double PeakRssMb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

// CPU time of all threads of this process, in ms (with a passive OpenMP wait policy this is the
// work done, which a loaded machine disturbs far less than wall time).
double ProcessCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string JsonEscape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      r += fmt::format("\\u{:04x}", static_cast<int>(c));
      continue;
    }
    r += c;
  }
  return r;
}

// The concrete shape fed to `vi` under `options` (see bench_command.h).
StatusOr<Shape> BenchShape(const ValueInfo& vi, const BenchOptions& options,
                           const std::map<std::string, Shape>& overrides) {
  if (auto it = overrides.find(vi.name); it != overrides.end()) return it->second;
  if (!vi.shape) {
    return InvalidArgument("input '{}' has no declared shape; give it with --input-shape {}=DxD",
                           vi.name, vi.name);
  }
  Shape shape;
  for (size_t d = 0; d < vi.shape->size(); ++d) {
    const Dim& dim = (*vi.shape)[d];
    if (dim.known()) {
      shape.push_back(dim.value);
    } else if (d == 0) {
      shape.push_back(options.batch);
    } else if (d == 1 && vi.shape->size() == 2 && IsInteger(vi.dtype) && options.seq_len > 0) {
      shape.push_back(options.seq_len);
    } else {
      shape.push_back(1);
    }
  }
  return shape;
}

}  // namespace

StatusOr<std::vector<int64_t>> ParseDims(const std::string& text) {
  std::vector<int64_t> dims;
  size_t start = 0;
  while (true) {
    size_t end = text.find('x', start);
    std::string part =
        text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    char* rest = nullptr;
    long long v = part.empty() ? -1 : std::strtoll(part.c_str(), &rest, 10);
    if (part.empty() || *rest != '\0' || v < 0) {
      return InvalidArgument("bad shape '{}': expected dims like 1x3x224x224", text);
    }
    dims.push_back(v);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return dims;
}

CLI::App* AddBenchSubcommand(CLI::App& app, BenchOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure a model's latency and throughput on random inputs (in-process)");
  cmd->add_option("--model,-m,model", o->model, "Model file (.onnx)")->required();
  cmd->add_option("--batch,-b", o->batch, "Batch size for symbolic first dims")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--seq-len", o->seq_len, "Second dim of 2-D integer inputs (token ids, masks)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--input-shape", o->input_shapes, "NAME=DxDx... for one input (repeatable)");
  cmd->add_option("--threads,-t", o->threads, "Intra-op threads (0 = all cores)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--iterations,-n", o->iterations, "Timed runs")->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup,-w", o->warmup, "Untimed runs first")->check(CLI::Range(0, 1000000));
  cmd->add_option("--level,-l", o->level, "Optimization level: none, basic, extended, all");
  cmd->add_flag("--json", o->json, "Print one JSON object instead of the summary");
  cmd->add_flag("--profile", o->profile, "Time every node and list the top op types");
  cmd->add_option("--seed", o->seed, "Seed for the random inputs");
  return cmd;
}

Status BenchCommand(const BenchOptions& options, std::ostream& out) {
  ASSIGN_OR_RETURN(OptimizationLevel level, ParseOptimizationLevel(options.level));
  std::map<std::string, Shape> overrides;
  for (const std::string& arg : options.input_shapes) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
      return InvalidArgument("--input-shape '{}' must be NAME=DxDx...", arg);
    }
    ASSIGN_OR_RETURN(overrides[arg.substr(0, eq)], ParseDims(arg.substr(eq + 1)));
  }
  SessionOptions so;
  so.num_threads = options.threads;
  so.optimization_level = level;
  const auto t0 = std::chrono::steady_clock::now();
  auto created = Session::Create(options.model, so);
  if (!created.ok()) return created.status();
  std::unique_ptr<Session> session = std::move(created).value();
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const std::vector<ValueInfo>& decl = session->inputs();
  for (const auto& [name, shape] : overrides) {
    // An init-capture: clang 14 (scripts/check_thread_safety.sh) cannot capture a binding.
    if (std::none_of(decl.begin(), decl.end(),
                     [&name = name](const ValueInfo& v) { return v.name == name; })) {
      return InvalidArgument("--input-shape: the model has no input '{}'", name);
    }
  }
  std::mt19937_64 rng(options.seed);
  std::vector<Tensor> feeds;
  std::string shapes_text;
  for (const ValueInfo& vi : decl) {
    ASSIGN_OR_RETURN(Shape shape, BenchShape(vi, options, overrides));
    ValueInfo concrete = vi;
    std::vector<Dim> dims(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) dims[d].value = shape[d];
    concrete.shape = dims;
    const int64_t limit = IntegerInputLimit(session->model().graph, vi.name);
    ASSIGN_OR_RETURN(Tensor t, RandomInput(concrete, rng, limit));
    shapes_text +=
        fmt::format("{}{}={}", shapes_text.empty() ? "" : " ", vi.name, ShapeToString(shape));
    feeds.push_back(std::move(t));
  }

  std::vector<Tensor> outputs;
  for (int i = 0; i < options.warmup; ++i) {
    Status st = session->Run(feeds, &outputs);
    if (!st.ok()) return st.WithContext("warmup run");
  }
  const GraphExecutor& ex = session->executor();
  if (options.profile) {
    ex.ResetProfile();
    ex.set_profiling(true);
  }
  std::vector<double> samples;
  const double cpu_start = ProcessCpuMs();
  for (int i = 0; i < options.iterations; ++i) {
    const auto s = std::chrono::steady_clock::now();
    Status st = session->Run(feeds, &outputs);
    samples.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    if (!st.ok()) return st;
  }
  const double cpu_ms = (ProcessCpuMs() - cpu_start) / options.iterations;
  ex.set_profiling(false);

  const double median = Percentile(samples, 0.5), p90 = Percentile(samples, 0.9);
  const double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
  const double items_per_s = median > 0 ? options.batch * 1000.0 / median : 0;
  const MemoryPlanStats mem = ex.memory_stats();
  const double mib = 1024.0 * 1024.0;
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin_count = std::getenv("GOMP_SPINCOUNT");

  // Per op type, sorted by total time.
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> by_op;
  std::vector<NodeProfile> nodes;
  double profiled_ms = 0;
  if (options.profile) {
    nodes = ex.Profile();
    std::map<std::string, std::pair<double, int64_t>> agg;
    for (const NodeProfile& n : nodes) {
      agg[n.op_type].first += n.total_ms / options.iterations;
      agg[n.op_type].second += 1;
      profiled_ms += n.total_ms / options.iterations;
    }
    by_op.assign(agg.begin(), agg.end());
    std::sort(by_op.begin(), by_op.end(),
              [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    std::sort(nodes.begin(), nodes.end(),
              [](const NodeProfile& a, const NodeProfile& b) { return a.total_ms > b.total_ms; });
  }

  if (options.json) {
    std::string samples_text;
    for (double v : samples)
      samples_text += fmt::format("{}{:.3f}", samples_text.empty() ? "" : ", ", v);
    std::string profile_text;
    for (const auto& [op, v] : by_op) {
      profile_text +=
          fmt::format("{}{{\"op_type\": \"{}\", \"nodes\": {}, \"ms_per_run\": {:.3f}}}",
                      profile_text.empty() ? "" : ", ", JsonEscape(op), v.second, v.first);
    }
    out << fmt::format(
               "{{\"model\": \"{}\", \"inputs\": \"{}\", \"batch\": {}, \"seq_len\": {}, "
               "\"threads\": {}, \"level\": \"{}\", \"iterations\": {}, \"warmup\": {}, "
               "\"median_ms\": {:.3f}, \"p90_ms\": {:.3f}, \"mean_ms\": {:.3f}, "
               "\"min_ms\": {:.3f}, \"cpu_ms\": {:.3f}, \"items_per_s\": {:.3f}, \"load_ms\": "
               "{:.1f}, "
               "\"peak_rss_mb\": {:.1f}, \"arena_mb\": {:.2f}, \"sum_tensors_mb\": {:.2f}, "
               "\"omp_wait_policy\": \"{}\", \"samples_ms\": [{}]",
               JsonEscape(options.model), JsonEscape(shapes_text), options.batch, options.seq_len,
               session->num_threads(), OptimizationLevelName(level), options.iterations,
               options.warmup, median, p90, mean, *std::min_element(samples.begin(), samples.end()),
               cpu_ms, items_per_s, load_ms, PeakRssMb(), mem.arena_bytes / mib,
               mem.sum_tensor_bytes / mib, wait_policy ? JsonEscape(wait_policy) : "", samples_text)
        << (options.profile ? fmt::format(", \"profile\": [{}]", profile_text) : "") << "}\n";
    return Status::Ok();
  }
  out << fmt::format("model      {}\ninputs     {}\n", options.model, shapes_text);
  out << fmt::format("threads    {} (level {}, OMP_WAIT_POLICY={}, GOMP_SPINCOUNT={})\n",
                     session->num_threads(), OptimizationLevelName(level),
                     wait_policy ? wait_policy : "unset", spin_count ? spin_count : "unset");
  out << fmt::format(
      "latency    median {:.2f} ms, p90 {:.2f} ms, mean {:.2f} ms over {} runs "
      "({} warmup); CPU time {:.2f} ms per run\n",
      median, p90, mean, options.iterations, options.warmup, cpu_ms);
  out << fmt::format("throughput {:.2f} items/s (batch {})\n", items_per_s, options.batch);
  out << fmt::format(
      "memory     peak RSS {:.1f} MiB; arena {:.1f} MiB for {} tensors "
      "(sum of their sizes {:.1f} MiB); load {:.0f} ms\n",
      PeakRssMb(), mem.arena_bytes / mib, mem.planned_tensors, mem.sum_tensor_bytes / mib, load_ms);
  if (options.profile) {
    out << fmt::format("\nprofile: {:.2f} ms per run inside kernels\n", profiled_ms);
    out << fmt::format("  {:<24} {:>6} {:>10} {:>6}\n", "op type", "nodes", "ms/run", "share");
    for (const auto& [op, v] : by_op) {
      out << fmt::format("  {:<24} {:>6} {:>10.3f} {:>5.1f}%\n", op, v.second, v.first,
                         profiled_ms > 0 ? 100.0 * v.first / profiled_ms : 0.0);
    }
    out << "\n  slowest nodes:\n";
    for (size_t i = 0; i < nodes.size() && i < 10; ++i) {
      out << fmt::format("  {:<40} {:<16} {:>10.3f} ms/run\n", nodes[i].name, nodes[i].op_type,
                         nodes[i].total_ms / options.iterations);
    }
  }
  return Status::Ok();
}

}  // namespace inferd::tools
