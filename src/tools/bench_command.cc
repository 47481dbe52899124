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

#include "common/stats.h"
#include "kernels/cpu/onednn/cpu_info.h"
#include "optimizer/optimization_level.h"
#include "session/session.h"
#include "tools/tensor_util.h"

namespace inferd::tools {
namespace {

constexpr size_t kSlowestNodes = 10;  // nodes listed after the op types

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

RooflinePoint Roofline(double flops, double bytes, double ms, CostBound bound, bool int8,
                       const cpu::MachinePeaks& peaks) {
  RooflinePoint p;
  if (ms <= 0) return p;
  if (bound == CostBound::kCompute) {
    p.rate = flops / (ms * 1e6);
    p.unit = int8 ? "GOP/s" : "GFLOP/s";
    p.peak = int8 ? "INT8" : "FP32";
    p.percent = cpu::PercentOfPeak(p.rate, int8 ? peaks.int8_gops : peaks.fp32_gflops);
  } else if (bound == CostBound::kMemory) {
    p.rate = bytes / (ms * 1e6);
    p.unit = "GB/s";
    p.peak = "memory";
    p.percent = cpu::PercentOfPeak(p.rate, peaks.mem_read_gbps);
  }
  return p;
}

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

namespace {

StatusOr<std::map<std::string, Shape>> ParseShapeOverrides(const BenchOptions& options) {
  std::map<std::string, Shape> overrides;
  for (const std::string& arg : options.input_shapes) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
      return InvalidArgument("--input-shape '{}' must be NAME=DxDx...", arg);
    }
    ASSIGN_OR_RETURN(overrides[arg.substr(0, eq)], ParseDims(arg.substr(eq + 1)));
  }
  return overrides;
}

struct Feeds {
  std::vector<Tensor> tensors;
  std::string shapes_text;  // "NAME=DxD NAME=DxD"
};

// Random inputs of the bench shapes (BenchShape), integers bounded by the tables they index.
StatusOr<Feeds> MakeFeeds(const Session& session, const BenchOptions& options,
                          const std::map<std::string, Shape>& overrides) {
  const std::vector<ValueInfo>& decl = session.inputs();
  for (const auto& [name, shape] : overrides) {
    // An init-capture: clang 14 (scripts/check_thread_safety.sh) cannot capture a binding.
    if (std::none_of(decl.begin(), decl.end(),
                     [&name = name](const ValueInfo& v) { return v.name == name; })) {
      return InvalidArgument("--input-shape: the model has no input '{}'", name);
    }
  }
  std::mt19937_64 rng(options.seed);
  Feeds feeds;
  for (const ValueInfo& vi : decl) {
    ASSIGN_OR_RETURN(Shape shape, BenchShape(vi, options, overrides));
    ValueInfo concrete = vi;
    std::vector<Dim> dims(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) dims[d].value = shape[d];
    concrete.shape = dims;
    const int64_t limit = IntegerInputLimit(session.model().graph, vi.name);
    ASSIGN_OR_RETURN(Tensor t, RandomInput(concrete, rng, limit));
    feeds.shapes_text += fmt::format("{}{}={}", feeds.shapes_text.empty() ? "" : " ", vi.name,
                                     ShapeToString(shape));
    feeds.tensors.push_back(std::move(t));
  }
  return feeds;
}

struct Timing {
  std::vector<double> samples;  // ms per timed run, in run order
  double cpu_ms = 0;            // process CPU time per timed run
  double median = 0, p90 = 0, mean = 0, min = 0;
};

// --warmup untimed runs, then --iterations timed ones (profiled with --profile).
StatusOr<Timing> TimeRuns(Session& session, const std::vector<Tensor>& feeds,
                          const BenchOptions& options) {
  std::vector<Tensor> outputs;
  for (int i = 0; i < options.warmup; ++i) {
    Status st = session.Run(feeds, &outputs);
    if (!st.ok()) return st.WithContext("warmup run");
  }
  const GraphExecutor& ex = session.executor();
  if (options.profile) {
    ex.ResetProfile();
    ex.set_profiling(true);
  }
  Timing t;
  const double cpu_start = ProcessCpuMs();
  for (int i = 0; i < options.iterations; ++i) {
    const auto s = std::chrono::steady_clock::now();
    Status st = session.Run(feeds, &outputs);
    t.samples.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    if (!st.ok()) return st;
  }
  t.cpu_ms = (ProcessCpuMs() - cpu_start) / options.iterations;
  ex.set_profiling(false);
  std::vector<double> sorted = t.samples;  // `samples` stays in run order for samples_ms
  std::sort(sorted.begin(), sorted.end());
  t.median = Percentile(sorted, 50);
  t.p90 = Percentile(sorted, 90);
  t.mean = std::accumulate(t.samples.begin(), t.samples.end(), 0.0) / t.samples.size();
  t.min = sorted.front();
  return t;
}

// One op type's nodes, per run.
struct OpSummary {
  std::string op_type;
  int64_t nodes = 0;
  double ms = 0;
  double flops = 0;
  double bytes = 0;
  CostBound bound = CostBound::kNone;  // kCompute when any node is
  bool int8 = false;                   // every compute node on 8-bit operands
};

struct OpProfile {
  std::vector<OpSummary> by_op;    // slowest first
  std::vector<NodeProfile> nodes;  // slowest first
  double profiled_ms = 0;          // per run, inside kernels
};

// Per op type, sorted by total time.
OpProfile SummarizeProfile(const GraphExecutor& ex, int iterations) {
  OpProfile p;
  p.nodes = ex.Profile();
  std::map<std::string, OpSummary> agg;
  for (const NodeProfile& n : p.nodes) {
    OpSummary& o = agg[n.op_type];
    if (o.nodes == 0) o.int8 = true;
    o.op_type = n.op_type;
    o.nodes += 1;
    o.ms += n.total_ms / iterations;
    o.flops += n.total_flops / iterations;
    o.bytes += n.total_bytes / iterations;
    if (n.bound == CostBound::kCompute) {
      o.bound = CostBound::kCompute;
      o.int8 = o.int8 && n.int8;
    } else if (n.bound == CostBound::kMemory && o.bound == CostBound::kNone) {
      o.bound = CostBound::kMemory;
    }
    p.profiled_ms += n.total_ms / iterations;
  }
  for (auto& entry : agg) {
    OpSummary& o = entry.second;
    if (o.bound != CostBound::kCompute) o.int8 = false;
    p.by_op.push_back(std::move(o));
  }
  std::sort(p.by_op.begin(), p.by_op.end(),
            [](const OpSummary& a, const OpSummary& b) { return a.ms > b.ms; });
  std::sort(p.nodes.begin(), p.nodes.end(),
            [](const NodeProfile& a, const NodeProfile& b) { return a.total_ms > b.total_ms; });
  return p;
}

// What both renderings report.
struct BenchReport {
  const BenchOptions& options;
  const Session& session;
  OptimizationLevel level;
  std::string shapes_text;
  Timing timing;
  OpProfile profile;
  double load_ms = 0;
  cpu::MachinePeaks peaks;  // measured with --profile
};

constexpr double kMiB = 1024.0 * 1024.0;

double ItemsPerSecond(const BenchReport& r) {
  return r.timing.median > 0 ? r.options.batch * 1000.0 / r.timing.median : 0;
}

std::string PeaksJson(const cpu::MachinePeaks& p) {
  return fmt::format(
      "{{\"fp32_gflops\": {:.2f}, \"int8_gops\": {:.2f}, \"mem_read_gbps\": {:.2f}, "
      "\"threads\": {}, \"gemm_size\": {}, \"mem_mib\": {}, \"measure_ms\": {:.1f}}}",
      p.fp32_gflops, p.int8_gops, p.mem_read_gbps, p.threads, p.gemm_size, p.mem_bytes >> 20,
      p.measure_ms);
}

// The roofline fields of one op type or node: its rate, the peak it is held against and the share.
std::string RooflineJson(double flops, double bytes, double ms, CostBound bound, bool int8,
                         const cpu::MachinePeaks& peaks) {
  const RooflinePoint pt = Roofline(flops, bytes, ms, bound, int8, peaks);
  return fmt::format(
      "\"bound\": \"{}\", \"flop_per_run\": {:.0f}, \"bytes_per_run\": {:.0f}, \"rate\": "
      "{:.3f}, \"rate_unit\": \"{}\", \"peak\": \"{}\", \"pct_of_peak\": {:.2f}",
      CostBoundName(bound), flops, bytes, pt.rate, pt.unit, pt.peak, pt.percent);
}

std::string ProfileJson(const BenchReport& r) {
  std::string ops, nodes;
  for (const OpSummary& o : r.profile.by_op) {
    ops += fmt::format("{}{{\"op_type\": \"{}\", \"nodes\": {}, \"ms_per_run\": {:.3f}, {}}}",
                       ops.empty() ? "" : ", ", JsonEscape(o.op_type), o.nodes, o.ms,
                       RooflineJson(o.flops, o.bytes, o.ms, o.bound, o.int8, r.peaks));
  }
  const int iters = r.options.iterations;
  for (size_t i = 0; i < r.profile.nodes.size() && i < kSlowestNodes; ++i) {
    const NodeProfile& n = r.profile.nodes[i];
    nodes += fmt::format(
        "{}{{\"name\": \"{}\", \"op_type\": \"{}\", \"ms_per_run\": {:.3f}, \"threads\": {}, {}}}",
        nodes.empty() ? "" : ", ", JsonEscape(n.name), JsonEscape(n.op_type), n.total_ms / iters,
        n.threads,
        RooflineJson(n.total_flops / iters, n.total_bytes / iters, n.total_ms / iters, n.bound,
                     n.int8, r.peaks));
  }
  return fmt::format(", \"peaks\": {}, \"profile\": [{}], \"slowest_nodes\": [{}]",
                     PeaksJson(r.peaks), ops, nodes);
}

std::string CpuJson() {
  const cpu::CpuInfo& c = cpu::DetectCpu();
  const cpu::CpuFeatures& f = c.features;
  return fmt::format(
      "{{\"model_name\": \"{}\", \"dnnl_isa\": \"{}\", \"avx2\": {}, \"fma\": {}, "
      "\"avx512f\": {}, \"avx512_vnni\": {}, \"avx_vnni\": {}, \"avx512_bf16\": {}, "
      "\"amx\": {}, \"native_bf16\": {}}}",
      JsonEscape(c.model_name), c.dnnl_isa, f.avx2, f.fma, f.avx512f, f.avx512_vnni, f.avx_vnni,
      f.avx512_bf16, f.amx_tile && f.amx_int8 && f.amx_bf16, c.native_bf16);
}

void WriteJson(const BenchReport& r, std::ostream& out) {
  const BenchOptions& options = r.options;
  const MemoryPlanStats mem = r.session.executor().memory_stats();
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::string samples_text;
  for (double v : r.timing.samples)
    samples_text += fmt::format("{}{:.3f}", samples_text.empty() ? "" : ", ", v);
  out << fmt::format(
             "{{\"model\": \"{}\", \"inputs\": \"{}\", \"batch\": {}, \"seq_len\": {}, "
             "\"threads\": {}, \"level\": \"{}\", \"iterations\": {}, \"warmup\": {}, "
             "\"median_ms\": {:.3f}, \"p90_ms\": {:.3f}, \"mean_ms\": {:.3f}, "
             "\"min_ms\": {:.3f}, \"cpu_ms\": {:.3f}, \"items_per_s\": {:.3f}, \"load_ms\": "
             "{:.1f}, "
             "\"peak_rss_mb\": {:.1f}, \"arena_mb\": {:.2f}, \"sum_tensors_mb\": {:.2f}, "
             "\"omp_wait_policy\": \"{}\", \"cpu\": {}, \"samples_ms\": [{}]",
             JsonEscape(options.model), JsonEscape(r.shapes_text), options.batch,
             options.seq_len, r.session.num_threads(), OptimizationLevelName(r.level),
             options.iterations, options.warmup, r.timing.median, r.timing.p90, r.timing.mean,
             r.timing.min, r.timing.cpu_ms, ItemsPerSecond(r), r.load_ms, PeakRssMb(),
             mem.arena_bytes / kMiB, mem.sum_tensor_bytes / kMiB,
             wait_policy ? JsonEscape(wait_policy) : "", CpuJson(), samples_text)
      << (options.profile ? ProfileJson(r) : "") << "}\n";
}

// "48.1 GFLOP/s  25% of FP32 peak", "12.0 GB/s  60% of memory BW" or "".
std::string RooflineText(double flops, double bytes, double ms, CostBound bound, bool int8,
                         const cpu::MachinePeaks& peaks) {
  const RooflinePoint pt = Roofline(flops, bytes, ms, bound, int8, peaks);
  if (pt.unit[0] == '\0') return "";
  const char* what = bound == CostBound::kCompute ? "peak" : "BW";
  return fmt::format("{:>8.1f} {:<7} {:>5.1f}% of {} {}", pt.rate, pt.unit, pt.percent, pt.peak,
                     what);
}

void WriteProfileText(const BenchReport& r, std::ostream& out) {
  const OpProfile& p = r.profile;
  const cpu::MachinePeaks& k = r.peaks;
  const int iterations = r.options.iterations;
  out << fmt::format(
      "\nmachine peaks: FP32 {:.1f} GFLOP/s, INT8 {:.1f} GOP/s (oneDNN sgemm / u8s8s32 gemm or "
      "matmul {}x{}x{}), memory read {:.1f} GB/s ({} MiB); {} threads, measured in {:.0f} ms\n",
      k.fp32_gflops, k.int8_gops, k.gemm_size, k.gemm_size, k.gemm_size, k.mem_read_gbps,
      k.mem_bytes >> 20, k.threads, k.measure_ms);
  out << fmt::format("profile: {:.2f} ms per run inside kernels\n", p.profiled_ms);
  out << fmt::format("  {:<24} {:>6} {:>10} {:>6}   {}\n", "op type", "nodes", "ms/run", "share",
                     "achieved (FLOPs at 2 per multiply-add; other ops: bytes in + out)");
  for (const OpSummary& o : p.by_op) {
    out << fmt::format("  {:<24} {:>6} {:>10.3f} {:>5.1f}%   {}\n", o.op_type, o.nodes, o.ms,
                       p.profiled_ms > 0 ? 100.0 * o.ms / p.profiled_ms : 0.0,
                       RooflineText(o.flops, o.bytes, o.ms, o.bound, o.int8, k));
  }
  out << "\n  slowest nodes:\n";
  for (size_t i = 0; i < p.nodes.size() && i < kSlowestNodes; ++i) {
    const NodeProfile& n = p.nodes[i];
    const double ms = n.total_ms / iterations;
    out << fmt::format("  {:<40} {:<16} {:>10.3f} ms/run   {}  [{} thread{}]\n", n.name,
                       n.op_type, ms,
                       RooflineText(n.total_flops / iterations, n.total_bytes / iterations, ms,
                                    n.bound, n.int8, k),
                       n.threads, n.threads == 1 ? "" : "s");
  }
}

void WriteText(const BenchReport& r, std::ostream& out) {
  const BenchOptions& options = r.options;
  const Timing& t = r.timing;
  const MemoryPlanStats mem = r.session.executor().memory_stats();
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin_count = std::getenv("GOMP_SPINCOUNT");
  out << fmt::format("model      {}\ninputs     {}\n", options.model, r.shapes_text);
  out << fmt::format("cpu        {}\n", cpu::DescribeCpu(cpu::DetectCpu()));
  out << fmt::format("threads    {} (level {}, OMP_WAIT_POLICY={}, GOMP_SPINCOUNT={})\n",
                     r.session.num_threads(), OptimizationLevelName(r.level),
                     wait_policy ? wait_policy : "unset", spin_count ? spin_count : "unset");
  out << fmt::format(
      "latency    median {:.2f} ms, p90 {:.2f} ms, mean {:.2f} ms over {} runs "
      "({} warmup); CPU time {:.2f} ms per run\n",
      t.median, t.p90, t.mean, options.iterations, options.warmup, t.cpu_ms);
  out << fmt::format("throughput {:.2f} items/s (batch {})\n", ItemsPerSecond(r), options.batch);
  out << fmt::format(
      "memory     peak RSS {:.1f} MiB; arena {:.1f} MiB for {} tensors "
      "(sum of their sizes {:.1f} MiB); load {:.0f} ms\n",
      PeakRssMb(), mem.arena_bytes / kMiB, mem.planned_tensors, mem.sum_tensor_bytes / kMiB,
      r.load_ms);
  if (options.profile) WriteProfileText(r, out);
}

}  // namespace

Status BenchCommand(const BenchOptions& options, std::ostream& out) {
  ASSIGN_OR_RETURN(OptimizationLevel level, ParseOptimizationLevel(options.level));
  ASSIGN_OR_RETURN(auto overrides, ParseShapeOverrides(options));
  SessionOptions so;
  so.num_threads = options.threads;
  so.optimization_level = level;
  const auto t0 = std::chrono::steady_clock::now();
  auto created = Session::Create(options.model, so);
  if (!created.ok()) return created.status();
  std::unique_ptr<Session> session = std::move(created).value();
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  ASSIGN_OR_RETURN(Feeds feeds, MakeFeeds(*session, options, overrides));
  cpu::MachinePeaks peaks;
  if (options.profile) {
    cpu::PeakOptions po;
    po.threads = session->num_threads();
    ASSIGN_OR_RETURN(peaks, cpu::MeasureMachinePeaks(po));
  }
  ASSIGN_OR_RETURN(Timing timing, TimeRuns(*session, feeds.tensors, options));
  BenchReport report{options, *session, level, feeds.shapes_text, std::move(timing), {}, load_ms,
                     std::move(peaks)};
  if (options.profile) report.profile = SummarizeProfile(session->executor(), options.iterations);
  if (options.json) {
    WriteJson(report, out);
  } else {
    WriteText(report, out);
  }
  return Status::Ok();
}

}  // namespace inferd::tools
