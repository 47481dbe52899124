// Speculative decoding benchmark (issue 16.1), in process: GenerationEngine on tiny-llama with
// and without its trained draft (tiny-llama-draft), prompt lookup, or both (hybrid: lookup
// first, the draft where it finds nothing), on the held-out Austen
// prompts of tiny-llama's reference.json (train.py: bos + text from the last 5% of each novel),
// temperature 0.
//   build/inferd_speculative_bench --models build/models/gen [--tokens 128] [--rounds 2]
//       [--threads 2] [--draft-threads 1] [--k 4] [--max-batch 4] [--streams 16] [--prompts 16]
//       [--modes baseline,draft,ngram,hybrid] [--json FILE]   (or --modes step-costs)
// Single stream: the prompts one at a time, each prompt run by every engine in turn
// (baseline, draft, n-gram, alternating, so load changes hit all alike); tokens/s = generated
// tokens / wall time of those requests. Concurrent: `streams` prompts submitted at once, the
// engines alternating per round; aggregate tokens/s. Outputs of every speculative run are
// compared token for token with the baseline's. Prints a table and (with --json) the figures:
// ratios of the totals (all runs' tokens / all runs' time, wall and process CPU time) and the
// medians of the per-run ratios (each single-stream prompt run and each concurrent round against
// the baseline's run of the same prompts), which one paused or disturbed run does not move.
// Not a test: run by hand (bench/generation/speculative.py wraps it).
#include <rapidjson/document.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "generation/engine.h"
#include "session/session.h"

namespace {

namespace fs = std::filesystem;
using namespace inferd;
using namespace inferd::gen;
using WallClock = std::chrono::steady_clock;

// CPU time of the whole process (user + system): on a shared, loaded host the wall time of a
// step mostly says who else ran, the CPU time much less.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Args {
  fs::path models;
  int tokens = 128, rounds = 2, threads = 2, draft_threads = 1, k = 4, max_batch = 4, streams = 16, prompts = 16;
  std::string json;
  std::string modes = "baseline,draft,ngram,hybrid";  // baseline always runs (first): the reference
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--models") a->models = v;
    else if (k == "--tokens") a->tokens = std::atoi(v.c_str());
    else if (k == "--rounds") a->rounds = std::atoi(v.c_str());
    else if (k == "--threads") a->threads = std::atoi(v.c_str());
    else if (k == "--draft-threads") a->draft_threads = std::atoi(v.c_str());
    else if (k == "--k") a->k = std::atoi(v.c_str());
    else if (k == "--max-batch") a->max_batch = std::atoi(v.c_str());
    else if (k == "--streams") a->streams = std::atoi(v.c_str());
    else if (k == "--prompts") a->prompts = std::atoi(v.c_str());
    else if (k == "--json") a->json = v;
    else if (k == "--modes") a->modes = v;
    else return false;
  }
  return argc % 2 == 1 && !a->models.empty() && a->tokens > 0 && a->rounds > 0;
}

std::vector<std::vector<int32_t>> ReadPrompts(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  rapidjson::Document d;
  d.Parse(ss.str().c_str());
  std::vector<std::vector<int32_t>> prompts;
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("prompts")) return prompts;
  for (const auto& p : d["prompts"].GetArray()) {
    prompts.emplace_back();
    for (const auto& v : p.GetArray()) prompts.back().push_back(v.GetInt());
  }
  return prompts;
}

class Done {
 public:
  void Add(const GenerationEvent& e) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    tokens_.insert(tokens_.end(), e.tokens.begin(), e.tokens.end());
    if (e.finished) {
      finished_ = true;
      cv_.NotifyAll();
    }
  }
  std::vector<int32_t> Wait() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (!finished_) cv_.Wait(&mu_);
    return tokens_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<int32_t> tokens_ GUARDED_BY(mu_);
  bool finished_ GUARDED_BY(mu_) = false;
};

struct Mode {
  std::string name;
  std::unique_ptr<GenerationEngine> engine;
  double single_s = 0, concurrent_s = 0;
  double single_cpu_s = 0, concurrent_cpu_s = 0;  // process CPU time during this mode's runs
  int64_t single_tokens = 0, concurrent_tokens = 0;
  int mismatches = 0;
  int64_t concurrent_drafts = 0;  // draft tokens proposed during the concurrent runs
  // Each run's wall and CPU seconds, in run order (the same order for every mode): the median
  // of the per-run ratios to the baseline is robust to a pause that hits one run (a host that
  // SIGSTOPs low-priority processes for a quiet benchmark, a burst of load).
  std::vector<double> single_runs_s, single_runs_cpu_s, concurrent_runs_s, concurrent_runs_cpu_s;
};

// The median over runs of baseline time / mode time (the same tokens in both: a speed ratio).
double MedianRatio(const std::vector<double>& baseline, const std::vector<double>& mode) {
  std::vector<double> r;
  for (size_t i = 0; i < baseline.size() && i < mode.size(); ++i) {
    if (mode[i] > 0) r.push_back(baseline[i] / mode[i]);
  }
  if (r.empty()) return 0;
  std::sort(r.begin(), r.end());
  const size_t n = r.size();
  return n % 2 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
}

std::unique_ptr<GenerationEngine> MakeEngine(const Args& a, DraftMethod method,
                                             bool prompt_lookup = false) {
  RunnerOptions ro;
  ro.kv_cache_bytes = 64 << 20;
  ro.num_threads = a.threads;
  const fs::path target = a.models / "tiny-llama";
  auto runner = CreateDecoderRunner(target, ro);
  auto tok = Tokenizer::Load(target / "tokenizer.model");
  if (!runner.ok() || !tok.ok()) {
    std::fprintf(stderr, "load: %s %s\n", runner.status().ToString().c_str(),
                 tok.status().ToString().c_str());
    std::exit(1);
  }
  EngineOptions eo;
  eo.speculative.method = method;
  eo.speculative.num_speculative_tokens = a.k;
  eo.speculative.max_batch = a.max_batch;
  eo.speculative.prompt_lookup = prompt_lookup;
  std::unique_ptr<ModelRunner> draft;
  if (method == DraftMethod::kModel) {
    ro.block_size = (*runner)->block_size();
    ro.num_threads = a.draft_threads;
    // The same number of blocks as the target's pool (speculative.h's LoadSpeculativeDecoding
    // does this from config.json; the bench builds the engines itself to compare them).
    const DecoderConfig dc = LoadDecoderConfig(a.models / "tiny-llama-draft" / "config.json").value();
    ro.kv_cache_bytes = static_cast<size_t>((*runner)->num_blocks()) * 2 * dc.num_layers *
                        dc.num_kv_heads * ro.block_size * dc.head_dim * sizeof(float);
    auto d = CreateDecoderRunner(a.models / "tiny-llama-draft", ro);
    if (!d.ok()) {
      std::fprintf(stderr, "draft: %s\n", d.status().ToString().c_str());
      std::exit(1);
    }
    draft = std::move(*d);
  }
  auto engine = GenerationEngine::Create(std::move(*runner), std::move(*tok), eo,
                                         &RealClock::Get(), std::move(draft));
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*engine);
}

// Runs `prompts` on `engine` at once; returns the outputs, adds the wall time to *seconds.
std::vector<std::vector<int32_t>> Run(GenerationEngine& engine,
                                      const std::vector<std::vector<int32_t>>& prompts,
                                      int tokens, double* seconds, double* cpu_seconds) {
  static int next_id = 0;
  std::vector<Done> done(prompts.size());
  SamplingParams p;
  p.max_tokens = tokens;
  p.temperature = 0;
  p.ignore_eos = true;
  const auto t0 = WallClock::now();
  const double c0 = CpuSeconds();
  for (size_t i = 0; i < prompts.size(); ++i) {
    Done* d = &done[i];
    Status s = engine.Submit({"q" + std::to_string(next_id++), prompts[i], p},
                             [d](const GenerationEvent& e) { d->Add(e); });
    if (!s.ok()) {
      std::fprintf(stderr, "submit: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  std::vector<std::vector<int32_t>> out;
  for (Done& d : done) out.push_back(d.Wait());
  *seconds += std::chrono::duration<double>(WallClock::now() - t0).count();
  *cpu_seconds += CpuSeconds() - c0;
  return out;
}

// --step-costs: the median wall time of one runner step of `tokens_per_seq` tokens for each of
// `seqs` sequences (logits for every row: a verification), to see what a draft token costs.
void StepCosts(const Args& a, const fs::path& dir, int threads) {
  RunnerOptions ro;
  ro.kv_cache_bytes = 16 << 20;
  ro.num_threads = threads;
  auto runner = CreateDecoderRunner(dir, ro).value();
  const int per_seq = 64;
  for (int seqs : {1, 2, 4, 8, 16}) {
    for (int t : {1, 2, 3, 5, 9}) {
      std::vector<std::vector<int32_t>> tables(seqs), tokens(seqs);
      for (int s = 0; s < seqs; ++s) {
        for (int b = 0; b < 8; ++b) tables[s].push_back(s * 8 + b);
        for (int i = 0; i < per_seq + t; ++i) tokens[s].push_back(3 + (s * 7 + i * 13) % 1000);
      }
      std::vector<double> ms, cpu;
      for (int rep = 0; rep < 2 * a.rounds + 3; ++rep) {
        std::vector<SequenceChunk> chunks;
        for (int s = 0; s < seqs; ++s) {
          const bool prefill = rep == 0;
          std::span<const int32_t> all(tokens[s]);
          SequenceChunk c{s, prefill ? all.first(per_seq) : all.subspan(per_seq, t),
                          prefill ? 0 : per_seq, tables[s], true};
          c.all_logits = !prefill;
          chunks.push_back(c);
        }
        Tensor logits;
        const bool profile = std::getenv("SPEC_PROFILE") != nullptr && seqs == 1 &&
                             rep == 2 * a.rounds + 2;
        if (std::getenv("SPEC_PROFILE") != nullptr && seqs == 1 && rep == 2) {
          runner->session()->executor().ResetProfile();
          runner->session()->executor().set_profiling(true);
        }
        const auto t0 = WallClock::now();
        const double c0 = CpuSeconds();
        if (!runner->Step(chunks, &logits).ok()) std::exit(1);
        if (profile) {
          runner->session()->executor().set_profiling(false);
          std::map<std::string, double> by_op;
          const bool nodes = std::string(std::getenv("SPEC_PROFILE")) == "nodes";
          for (const NodeProfile& p : runner->session()->executor().Profile()) {
            by_op[nodes ? p.op_type + " " + p.name : p.op_type] += p.total_ms;
          }
          for (const auto& [op, v] : by_op) {
            std::printf("   t=%d %-24s %.3f ms\n", t, op.c_str(), v / (2 * a.rounds + 1));
          }
        }
        if (rep >= 2) {
          ms.push_back(std::chrono::duration<double, std::milli>(WallClock::now() - t0).count());
          cpu.push_back(1e3 * (CpuSeconds() - c0));
        }
      }
      std::sort(ms.begin(), ms.end());
      std::sort(cpu.begin(), cpu.end());
      std::printf("%s threads=%d seqs=%2d tokens/seq=%d: wall %.3f ms, cpu %.3f ms (medians)\n",
                  dir.filename().c_str(), threads, seqs, t, ms[ms.size() / 2], cpu[cpu.size() / 2]);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fprintf(stderr, "usage: %s --models DIR [--tokens N] [--rounds R] [--threads T] [--k K]"
                 " [--max-batch B] [--streams S] [--prompts P] [--json FILE]\n", argv[0]);
    return 2;
  }
  if (a.modes == "step-costs") {
    StepCosts(a, a.models / "tiny-llama", a.threads);
    StepCosts(a, a.models / "tiny-llama-draft", a.draft_threads);
    return 0;
  }
  std::vector<std::vector<int32_t>> prompts = ReadPrompts(a.models / "tiny-llama" / "reference.json");
  if (prompts.empty()) {
    std::fprintf(stderr, "no prompts in %s\n", (a.models / "tiny-llama" / "reference.json").c_str());
    return 1;
  }
  if (static_cast<int>(prompts.size()) > a.prompts) prompts.resize(a.prompts);
  std::vector<Mode> modes;
  modes.push_back({"baseline", MakeEngine(a, DraftMethod::kNone)});
  if (a.modes.find("draft") != std::string::npos) {
    modes.push_back({"draft", MakeEngine(a, DraftMethod::kModel)});
  }
  if (a.modes.find("ngram") != std::string::npos) {
    modes.push_back({"ngram", MakeEngine(a, DraftMethod::kNgram)});
  }
  if (a.modes.find("hybrid") != std::string::npos) {  // prompt lookup first, else the draft
    modes.push_back({"hybrid", MakeEngine(a, DraftMethod::kModel, true)});
  }
  // Warm-up: one request each (memory plans, page faults).
  for (Mode& m : modes) {
    double ignored = 0, ignored_cpu = 0;
    Run(*m.engine, {prompts[0]}, 16, &ignored, &ignored_cpu);
  }
  for (Mode& m : modes) m.engine->Stats();
  std::vector<int64_t> draft0(modes.size()), acc0(modes.size());
  for (size_t i = 0; i < modes.size(); ++i) {
    draft0[i] = modes[i].engine->Stats().draft_tokens;
    acc0[i] = modes[i].engine->Stats().accepted_tokens;
  }
  std::vector<std::vector<int32_t>> streams_prompts;
  for (int i = 0; i < a.streams; ++i) streams_prompts.push_back(prompts[i % prompts.size()]);
  // The order of the modes rotates from one run to the next, so a load change does not always
  // hit the same one; outputs are compared with the baseline's after each group.
  size_t turn = 0;
  auto group = [&](const std::vector<std::vector<int32_t>>& group_prompts, bool concurrent) {
    std::vector<std::vector<std::vector<int32_t>>> outs(modes.size());
    for (size_t j = 0; j < modes.size(); ++j) {
      Mode& m = modes[(j + turn) % modes.size()];
      const int64_t before = m.engine->Stats().draft_tokens;
      double run_s = 0, run_cpu_s = 0;
      outs[&m - &modes[0]] = Run(*m.engine, group_prompts, a.tokens, &run_s, &run_cpu_s);
      (concurrent ? m.concurrent_s : m.single_s) += run_s;
      (concurrent ? m.concurrent_cpu_s : m.single_cpu_s) += run_cpu_s;
      (concurrent ? m.concurrent_runs_s : m.single_runs_s).push_back(run_s);
      (concurrent ? m.concurrent_runs_cpu_s : m.single_runs_cpu_s).push_back(run_cpu_s);
      const int64_t tokens = static_cast<int64_t>(a.tokens) * group_prompts.size();
      if (concurrent) {
        m.concurrent_drafts += m.engine->Stats().draft_tokens - before;
        m.concurrent_tokens += tokens;
      } else {
        m.single_tokens += tokens;
      }
    }
    ++turn;
    for (size_t i = 1; i < modes.size(); ++i) {
      for (size_t r = 0; r < outs[i].size(); ++r) modes[i].mismatches += outs[i][r] != outs[0][r];
    }
  };
  for (int round = 0; round < a.rounds; ++round) {
    for (const auto& prompt : prompts) group({prompt}, false);
    group(streams_prompts, true);
  }
  const double base1 = modes[0].single_tokens / modes[0].single_s;
  const double baseN = modes[0].concurrent_tokens / modes[0].concurrent_s;
  const double base1_cpu = modes[0].single_tokens / modes[0].single_cpu_s;
  const double baseN_cpu = modes[0].concurrent_tokens / modes[0].concurrent_cpu_s;
  std::string json = "{\"tokens\": " + std::to_string(a.tokens) + ", \"rounds\": " +
                     std::to_string(a.rounds) + ", \"k\": " + std::to_string(a.k) +
                     ", \"max_batch\": " + std::to_string(a.max_batch) + ", \"streams\": " +
                     std::to_string(a.streams) + ", \"prompts\": " +
                     std::to_string(prompts.size()) + ", \"modes\": {";
  std::printf("%-9s %12s %8s %14s %8s %11s %10s   (wall; then CPU-time ratios 1 / N streams;"
              " then medians of per-run ratios, wall / CPU, 1 / N streams)\n", "mode", "1-stream t/s", "ratio",
              (std::to_string(a.streams) + "-stream t/s").c_str(), "ratio", "acceptance",
              "mismatch");
  for (size_t i = 0; i < modes.size(); ++i) {
    const Mode& m = modes[i];
    const EngineStats s = m.engine->Stats();
    const double drafted = static_cast<double>(s.draft_tokens - draft0[i]);
    const double accepted = static_cast<double>(s.accepted_tokens - acc0[i]);
    const double rate = drafted > 0 ? accepted / drafted : 0;
    const double t1 = m.single_tokens / m.single_s, tn = m.concurrent_tokens / m.concurrent_s;
    const double c1 = m.single_tokens / m.single_cpu_s, cn = m.concurrent_tokens / m.concurrent_cpu_s;
    const Mode& b = modes[0];
    const double med1 = MedianRatio(b.single_runs_s, m.single_runs_s);
    const double med1_cpu = MedianRatio(b.single_runs_cpu_s, m.single_runs_cpu_s);
    const double medn = MedianRatio(b.concurrent_runs_s, m.concurrent_runs_s);
    const double medn_cpu = MedianRatio(b.concurrent_runs_cpu_s, m.concurrent_runs_cpu_s);
    std::printf("%-9s %12.1f %8.2f %14.1f %8.2f %11.3f %10d   cpu ratios %.2f / %.2f;"
                " medians %.2f / %.2f, %.2f / %.2f\n",
                m.name.c_str(), t1, t1 / base1, tn, tn / baseN, rate, m.mismatches, c1 / base1_cpu,
                cn / baseN_cpu, med1, med1_cpu, medn, medn_cpu);
    char buf[1024];
    std::snprintf(buf, sizeof(buf),
                  "%s\"%s\": {\"single_tokens_per_s\": %.2f, \"single_ratio\": %.3f, "
                  "\"concurrent_tokens_per_s\": %.2f, \"concurrent_ratio\": %.3f, "
                  "\"draft_tokens\": %.0f, \"accepted_tokens\": %.0f, \"acceptance_rate\": %.4f, "
                  "\"output_mismatches\": %d, \"single_tokens_per_cpu_s\": %.2f, "
                  "\"single_cpu_ratio\": %.3f, \"concurrent_tokens_per_cpu_s\": %.2f, "
                  "\"concurrent_cpu_ratio\": %.3f, \"concurrent_draft_tokens\": %lld, "
                  "\"single_median_ratio\": %.3f, \"single_median_cpu_ratio\": %.3f, "
                  "\"concurrent_median_ratio\": %.3f, \"concurrent_median_cpu_ratio\": %.3f, "
                  "\"runs\": {\"single\": %zu, \"concurrent\": %zu}}",
                  i ? ", " : "", m.name.c_str(), t1, t1 / base1, tn, tn / baseN, drafted,
                  accepted, rate, m.mismatches, c1, c1 / base1_cpu, cn, cn / baseN_cpu,
                  static_cast<long long>(m.concurrent_drafts), med1, med1_cpu, medn, medn_cpu,
                  m.single_runs_s.size(), m.concurrent_runs_s.size());
    json += buf;
  }
  json += "}}\n";
  if (!a.json.empty()) std::ofstream(a.json) << json;
  int mismatches = 0;
  for (const Mode& m : modes) mismatches += m.mismatches;
  return mismatches == 0 ? 0 : 3;
}
