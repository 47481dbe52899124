// inferd_bench_model: times Session::Run on one model and prints one line of JSON.
//
//   inferd_bench_model MODEL.onnx --input input=x.npy --threads 2 --warmup 3 --iters 20
//   inferd_bench_model MODEL.onnx --random input_ids=16x128:0:30522 --random attention_mask=16x128:1:2
//   → {"model": "...", "threads": 2, "iters": 20, "median_ms": 12.3, "p90_ms": 13.1, ...}
//
// Inputs come from .npy files (--input NAME=FILE) or are generated (--random NAME=SHAPE[:LO:HI],
// SHAPE like 16x128, values uniform in [LO, HI) — integers for integer inputs, default [0, 1)),
// with the element type the model declares. Every graph input must be given one way or the other.
// bench/compare.py drives this program next to ONNX Runtime and PyTorch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/npy.h"
#include "runtime/session.h"

namespace inferd {
namespace {

struct RandomSpec {
  Shape shape;
  double lo = 0, hi = 1;
};

StatusOr<RandomSpec> ParseRandomSpec(const std::string& text) {
  // SHAPE[:LO:HI], SHAPE = d0xd1x... (a scalar is "" )
  RandomSpec spec;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() != 1 && parts.size() != 3) {
    return InvalidArgument("--random value '{}' must be SHAPE or SHAPE:LO:HI", text);
  }
  try {
    size_t pos = 0;
    const std::string& dims = parts[0];
    while (pos < dims.size()) {
      size_t x = dims.find('x', pos);
      std::string d = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      size_t used = 0;
      int64_t v = std::stoll(d, &used);
      if (used != d.size() || v < 0) return InvalidArgument("bad dimension '{}' in '{}'", d, text);
      spec.shape.push_back(v);
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    if (parts.size() == 3) {
      spec.lo = std::stod(parts[1]);
      spec.hi = std::stod(parts[2]);
    }
  } catch (const std::exception&) {
    return InvalidArgument("cannot parse --random value '{}'", text);
  }
  if (!(spec.lo < spec.hi)) return InvalidArgument("--random range in '{}' is empty", text);
  return spec;
}

StatusOr<Tensor> MakeRandom(DataType dtype, const RandomSpec& spec, uint32_t seed) {
  if (dtype == DataType::kUndefined) dtype = DataType::kFloat32;
  Tensor t = Tensor::Allocate(dtype, spec.shape);
  std::mt19937_64 rng(seed);
  Status status;
  DispatchAll(
      dtype,
      [&](auto tag) {
        using T = decltype(tag);
        T* p = t.data<T>();
        if constexpr (std::is_integral_v<T>) {
          std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(spec.lo),
                                                      static_cast<int64_t>(spec.hi) - 1);
          for (int64_t i = 0; i < t.NumElements(); ++i) p[i] = static_cast<T>(dist(rng));
        } else {
          std::uniform_real_distribution<double> dist(spec.lo, spec.hi);
          for (int64_t i = 0; i < t.NumElements(); ++i) p[i] = static_cast<T>(static_cast<float>(dist(rng)));
        }
      },
      [&] { status = Unimplemented("cannot generate random {} values", DataTypeName(dtype)); });
  RETURN_IF_ERROR(status);
  return t;
}

StatusOr<std::pair<std::string, std::string>> SplitAssignment(const std::string& text,
                                                              const char* flag) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("{} value '{}' must be NAME=VALUE", flag, text);
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  // Nearest-rank on the sorted samples; the median of an even count averages the middle two.
  if (q == 0.5 && v.size() % 2 == 0) return 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

struct Args {
  std::string model;
  std::vector<std::string> inputs, randoms;
  int threads = 2, warmup = 3, iters = 20;
};

Status Bench(const Args& args) {
  if (args.iters < 1 || args.warmup < 0) return InvalidArgument("--iters must be >= 1, --warmup >= 0");
  SessionOptions opts;
  opts.num_threads = args.threads;
  auto load_start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto session, Session::Create(args.model, opts));
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             load_start).count();
  std::map<std::string, Tensor> given;
  for (const std::string& s : args.inputs) {
    ASSIGN_OR_RETURN(auto kv, SplitAssignment(s, "--input"));
    ASSIGN_OR_RETURN(Tensor t, LoadNpy(kv.second));
    given[kv.first] = t;
  }
  uint32_t seed = 1;
  for (const std::string& s : args.randoms) {
    ASSIGN_OR_RETURN(auto kv, SplitAssignment(s, "--random"));
    ASSIGN_OR_RETURN(RandomSpec spec, ParseRandomSpec(kv.second));
    DataType dtype = DataType::kFloat32;
    for (const ValueInfo& vi : session->inputs()) {
      if (vi.name == kv.first) dtype = vi.dtype;
    }
    ASSIGN_OR_RETURN(given[kv.first], MakeRandom(dtype, spec, seed++));
  }
  std::vector<Tensor> feeds;
  for (const ValueInfo& vi : session->inputs()) {
    auto it = given.find(vi.name);
    if (it == given.end()) return InvalidArgument("no value for model input '{}'", vi.name);
    feeds.push_back(it->second);
    given.erase(it);
  }
  if (!given.empty()) return InvalidArgument("model has no input named '{}'", given.begin()->first);

  std::vector<Tensor> outputs;
  for (int i = 0; i < args.warmup; ++i) RETURN_IF_ERROR(session->Run(feeds, &outputs));
  std::vector<double> ms;
  for (int i = 0; i < args.iters; ++i) {
    outputs.clear();
    auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(session->Run(feeds, &outputs));
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  double mean = 0;
  for (double v : ms) mean += v / static_cast<double>(ms.size());
  std::string samples;
  for (size_t i = 0; i < ms.size(); ++i) samples += fmt::format("{}{:.3f}", i ? ", " : "", ms[i]);
  std::string shapes;
  for (size_t i = 0; i < feeds.size(); ++i) {
    shapes += fmt::format("{}\"{}\": \"{}\"", i ? ", " : "", session->inputs()[i].name,
                          feeds[i].DebugString());
  }
  fmt::print(
      "{{\"runtime\": \"inferd\", \"model\": \"{}\", \"threads\": {}, \"warmup\": {}, "
      "\"iters\": {}, \"load_ms\": {:.1f}, \"median_ms\": {:.3f}, \"p90_ms\": {:.3f}, "
      "\"min_ms\": {:.3f}, \"mean_ms\": {:.3f}, \"samples_ms\": [{}], \"inputs\": {{{}}}}}\n",
      args.model, session->num_threads(), args.warmup, args.iters, load_ms, Percentile(ms, 0.5),
      Percentile(ms, 0.9), *std::min_element(ms.begin(), ms.end()), mean, samples, shapes);
  return Status::Ok();
}

}  // namespace
}  // namespace inferd

int main(int argc, char** argv) {
  inferd::Args args;
  CLI::App app{"Times Session::Run on one ONNX model; prints JSON (median_ms, p90_ms, ...)"};
  app.add_option("model", args.model, "model.onnx")->required();
  app.add_option("--input", args.inputs, "NAME=FILE.npy");
  app.add_option("--random", args.randoms, "NAME=SHAPE[:LO:HI], SHAPE like 16x128");
  app.add_option("--threads", args.threads, "intra-op threads (0 = all cores)");
  app.add_option("--warmup", args.warmup, "untimed runs first");
  app.add_option("--iters", args.iters, "timed runs");
  CLI11_PARSE(app, argc, argv);
  inferd::Status s = inferd::Bench(args);
  if (!s.ok()) {
    std::fprintf(stderr, "inferd_bench_model: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
