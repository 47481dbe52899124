// Decode-step benchmark of the paged model runner (src/generation/model_runner.h), in process:
// no scheduler, HTTP or tokenizer, so it shows what one step of the model itself costs.
//   build/inferd_runner_bench --model build/models/gen/llama-110m --streams 1 --threads 2
//       [--steps 32] [--prompt 16] [--int8] [--no-merge] [--profile]
// Prefills `streams` sequences of `prompt` tokens in one step, then runs `steps` decode steps of
// one token per sequence (greedy argmax of the returned logits, as the engine's sampler would)
// and prints the median and mean step time and the aggregate decode tokens/s. --profile adds
// the executor's per-node timing summed by op type. Not a test: run by hand, never by ctest.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "generation/model_runner.h"
#include "session/session.h"

namespace {

using Clock = std::chrono::steady_clock;

// CPU time (user + system) of the whole process, ms: on a shared host the wall time of a step
// depends on who else runs, its CPU time much less.
double CpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-3;
}

struct Args {
  std::string model;
  int streams = 1, threads = 2, steps = 32, prompt = 16;
  bool int8 = false, profile = false, merge = true;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (k == "--int8") {
      a->int8 = true;
    } else if (k == "--no-merge") {
      a->merge = false;
    } else if (k == "--profile") {
      a->profile = true;
    } else if ((v = next()) == nullptr) {
      return false;
    } else if (k == "--model") {
      a->model = v;
    } else if (k == "--streams") {
      a->streams = std::atoi(v);
    } else if (k == "--threads") {
      a->threads = std::atoi(v);
    } else if (k == "--steps") {
      a->steps = std::atoi(v);
    } else if (k == "--prompt") {
      a->prompt = std::atoi(v);
    } else {
      return false;
    }
  }
  return !a->model.empty() && a->streams > 0 && a->steps > 0 && a->prompt > 0;
}

void PrintProfile(const inferd::Session& session) {
  std::map<std::string, std::pair<double, int64_t>> by_op;
  double total = 0;
  for (const inferd::NodeProfile& p : session.executor().Profile()) {
    by_op[p.op_type].first += p.total_ms;
    by_op[p.op_type].second += p.calls;
    total += p.total_ms;
  }
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [op, v] : by_op) rows.emplace_back(v.first, op);
  std::sort(rows.rbegin(), rows.rend());
  std::printf("profile: %.2f ms in nodes over the timed steps\n", total);
  std::vector<inferd::NodeProfile> nodes = session.executor().Profile();
  std::sort(nodes.begin(), nodes.end(),
            [](const auto& x, const auto& y) { return x.total_ms > y.total_ms; });
  for (size_t i = 0; i < nodes.size() && i < 8; ++i) {
    std::printf("  node %-40s %-14s %8.3f ms/call\n", nodes[i].name.c_str(),
                nodes[i].op_type.c_str(), nodes[i].total_ms / std::max<int64_t>(1, nodes[i].calls));
  }
  for (const auto& [ms, op] : rows) {
    std::printf("  %-28s %9.2f ms %5.1f%%  %lld calls\n", op.c_str(), ms, 100 * ms / total,
                static_cast<long long>(by_op[op].second));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: %s --model DIR [--streams N] [--threads N] [--steps N] [--prompt N] "
                 "[--int8] [--no-merge] [--profile]\n",
                 argv[0]);
    return 2;
  }
  inferd::gen::RunnerOptions ro;
  ro.num_threads = a.threads;
  ro.int8_weights = a.int8;
  ro.merge_projections = a.merge;
  const int context = a.prompt + a.steps + 1;
  const int per_seq = (context + ro.block_size - 1) / ro.block_size;
  // A pool just large enough: the bench measures steps, not the budget.
  ro.kv_cache_bytes = 0;
  auto cfg = inferd::gen::LoadDecoderConfig(a.model + "/config.json");
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", cfg.status().ToString().c_str());
    return 1;
  }
  ro.kv_cache_bytes = size_t{2} * cfg->num_layers * cfg->num_kv_heads * ro.block_size *
                      cfg->head_dim * sizeof(float) * per_seq * a.streams;
  auto runner_or = inferd::gen::CreateDecoderRunner(a.model, ro);
  if (!runner_or.ok()) {
    std::fprintf(stderr, "%s\n", runner_or.status().ToString().c_str());
    return 1;
  }
  inferd::gen::ModelRunner& runner = **runner_or;
  const int vocab = runner.config().vocab_size;
  std::vector<std::vector<int32_t>> tables(a.streams), tokens(a.streams);
  for (int s = 0; s < a.streams; ++s) {
    for (int b = 0; b < per_seq; ++b) tables[s].push_back(s * per_seq + b);
    for (int i = 0; i < a.prompt; ++i) tokens[s].push_back(1 + (s * 7 + i * 13) % (vocab - 1));
  }
  std::vector<int64_t> pos(a.streams, 0);
  std::vector<double> step_ms;
  double cpu_ms = 0;
  const inferd::Session* session = runner.session();
  for (int step = -1; step < a.steps; ++step) {
    std::vector<inferd::gen::SequenceChunk> chunks;
    for (int s = 0; s < a.streams; ++s) {
      const size_t n = step < 0 ? tokens[s].size() : 1;
      chunks.push_back({s, std::span<const int32_t>(tokens[s]).last(n), pos[s], tables[s], true});
    }
    // The first two decode steps are warmup (the decode shape's first run records its plan).
    if (step == 2 && a.profile && session != nullptr) {
      session->executor().ResetProfile();
      session->executor().set_profiling(true);
    }
    const auto t0 = Clock::now();
    const double c0 = CpuMs();
    inferd::Tensor logits;
    inferd::Status st = runner.Step(chunks, &logits);
    if (!st.ok()) {
      std::fprintf(stderr, "step %d: %s\n", step, st.ToString().c_str());
      return 1;
    }
    for (int s = 0; s < a.streams; ++s) {
      pos[s] += static_cast<int64_t>(chunks[s].tokens.size());
      const float* row = logits.data<float>() + int64_t{s} * vocab;
      tokens[s].push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (step >= 2) {
      step_ms.push_back(ms);
      cpu_ms += CpuMs() - c0;
    }
  }
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double ms : step_ms) sum += ms;
  const double median = sorted[sorted.size() / 2], mean = sum / step_ms.size();
  std::printf(
      "%s streams=%d threads=%d int8=%d merge=%d steps=%zu: step median %.3f ms mean %.3f ms, "
      "%.1f tokens/s aggregate (median), %.1f tokens/s per stream\n",
      a.model.c_str(), a.streams, a.threads, a.int8 ? 1 : 0, a.merge ? 1 : 0, step_ms.size(),
      median, mean, 1000.0 * a.streams / median, 1000.0 / median);
  std::printf("  cpu %.3f ms per step (all threads)\n", cpu_ms / step_ms.size());
  // A mixture-of-experts model: how evenly the router spread the run's tokens (all layers).
  const std::vector<std::vector<int64_t>> load = runner.ExpertTokens();
  if (!load.empty()) {
    std::vector<int64_t> per_expert(load[0].size(), 0);
    for (const auto& layer : load) {
      for (size_t e = 0; e < layer.size() && e < per_expert.size(); ++e) per_expert[e] += layer[e];
    }
    std::printf("  expert load (tokens routed, %zu MoE layers):", load.size());
    for (int64_t n : per_expert) std::printf(" %lld", static_cast<long long>(n));
    std::printf("\n");
  }
  if (a.profile && session != nullptr) PrintProfile(*session);
  return 0;
}
