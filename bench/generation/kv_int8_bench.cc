// INT8 KV cache benchmark (issue 16.3), in process: at one fixed KV budget, how many sequences
// run concurrently before the engine starts preempting, float32 K/V against INT8 K/V.
//   build/inferd_kv_int8_bench --model DIR [--kv-cache-bytes 2097152] [--prompt 32] [--gen 96]
//       [--max-seqs 256] [--threads 2] [--json FILE]
// For each dtype (float32 first, then int8, in the same process) one GenerationEngine over the
// same budget; a trial submits N requests at once (distinct random prompts of `prompt` tokens,
// BOS first, so no prefix-cache sharing; `gen` tokens each, greedy, ignore_eos) and reads the
// engine's preemption counter (EngineStats::preemptions, the inferd_num_preemptions_total
// metric) before and after. The search starts at the block-count estimate
// num_blocks / ceil((prompt + gen) / block_size), climbs while a trial has no preemption and
// descends while it has, so it ends with N (no preemption) and N + 1 (preemption) both run.
// Also reports aggregate tokens/s of the largest preemption-free trial, and of the int8 engine at
// the float engine's N (the cost of dequantizing at equal batch). Prints a table and JSON.
// Not a test: run by hand (bench/generation/kv_int8.py wraps it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "generation/engine.h"

namespace {

namespace fs = std::filesystem;
using namespace inferd;
using namespace inferd::gen;
using WallClock = std::chrono::steady_clock;

struct Args {
  fs::path model;
  size_t kv_cache_bytes = size_t{2} << 20;
  int prompt = 32, gen = 96, max_seqs = 256, threads = 2;
  std::string json;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") {
      a->model = v;
    } else if (k == "--kv-cache-bytes") {
      a->kv_cache_bytes = std::strtoull(v.c_str(), nullptr, 10);
    } else if (k == "--prompt") {
      a->prompt = std::atoi(v.c_str());
    } else if (k == "--gen") {
      a->gen = std::atoi(v.c_str());
    } else if (k == "--max-seqs") {
      a->max_seqs = std::atoi(v.c_str());
    } else if (k == "--threads") {
      a->threads = std::atoi(v.c_str());
    } else if (k == "--json") {
      a->json = v;
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && !a->model.empty() && a->kv_cache_bytes > 0 && a->prompt >= 2 &&
         a->gen >= 1 && a->max_seqs >= 1 && a->threads >= 0;
}

// Counts finished requests of one trial.
class Finished {
 public:
  void Add() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    ++n_;
    cv_.NotifyAll();
  }
  void WaitFor(int n) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (n_ < n) cv_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int n_ GUARDED_BY(mu_) = 0;
};

struct Trial {
  int n = 0;
  int64_t preemptions = 0, tokens = 0;
  double seconds = 0;
};

struct Engine {
  KvCacheDtype dtype;
  std::unique_ptr<GenerationEngine> engine;
  int num_blocks = 0, block_size = 0;
  size_t block_bytes = 0;
  int next_id = 0;
};

Engine MakeEngine(const Args& a, KvCacheDtype dtype) {
  RunnerOptions ro;
  ro.kv_cache_bytes = a.kv_cache_bytes;
  ro.num_threads = a.threads;
  ro.kv_cache_dtype = dtype;
  auto runner = CreateDecoderRunner(a.model, ro);
  auto tok = Tokenizer::Load(a.model / "tokenizer.model");
  if (!runner.ok() || !tok.ok()) {
    std::fprintf(stderr, "load: %s %s\n", runner.status().ToString().c_str(),
                 tok.status().ToString().c_str());
    std::exit(1);
  }
  Engine e{dtype, nullptr, (*runner)->num_blocks(), (*runner)->block_size(),
           (*runner)->kv_block_bytes()};
  EngineOptions eo;
  eo.max_num_seqs = a.max_seqs;
  eo.max_num_batched_tokens = 4096;
  auto engine =
      GenerationEngine::Create(std::move(*runner), std::move(*tok), eo, &RealClock::Get());
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    std::exit(1);
  }
  e.engine = std::move(*engine);
  return e;
}

Trial RunTrial(const Args& a, Engine& e, int n) {
  const int vocab = e.engine->config().vocab_size;
  const int bos = std::max(e.engine->config().bos_token_id, 0);
  std::mt19937 rng(1234 + e.next_id);
  SamplingParams p;
  p.max_tokens = a.gen;
  p.temperature = 0;
  p.ignore_eos = true;
  Finished finished;
  const EngineStats before = e.engine->Stats();
  const auto t0 = WallClock::now();
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> prompt = {bos};
    while (static_cast<int>(prompt.size()) < a.prompt) {
      prompt.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
    }
    Status s = e.engine->Submit({"r" + std::to_string(e.next_id++), prompt, p},
                                [&finished](const GenerationEvent& ev) {
                                  if (ev.finished) finished.Add();
                                });
    if (!s.ok()) {
      std::fprintf(stderr, "submit: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  finished.WaitFor(n);
  Trial t;
  t.n = n;
  t.seconds = std::chrono::duration<double>(WallClock::now() - t0).count();
  const EngineStats after = e.engine->Stats();
  t.preemptions = after.preemptions - before.preemptions;
  t.tokens = after.generated_tokens - before.generated_tokens;
  return t;
}

struct Result {
  int max_concurrent = 0;  // largest N without preemption
  Trial ok, over;          // the trials at N and N + 1
  std::vector<Trial> trials;
};

Result Search(const Args& a, Engine& e) {
  const int per_seq = (a.prompt + a.gen + e.block_size - 1) / e.block_size;
  int n = std::clamp(e.num_blocks / per_seq, 1, a.max_seqs);
  Result r;
  auto run = [&](int k) {
    Trial t = RunTrial(a, e, k);
    std::fprintf(stderr, "  %s N=%d: %lld preemptions, %.1f s\n", KvCacheDtypeName(e.dtype), k,
                 static_cast<long long>(t.preemptions), t.seconds);
    r.trials.push_back(t);
    return t;
  };
  Trial t = run(n);
  if (t.preemptions == 0) {
    r.ok = t;
    while (n < a.max_seqs) {
      Trial up = run(n + 1);
      if (up.preemptions > 0) {
        r.over = up;
        break;
      }
      r.ok = up;
      ++n;
    }
  } else {
    r.over = t;
    while (n > 1) {
      Trial down = run(n - 1);
      --n;
      if (down.preemptions == 0) {
        r.ok = down;
        break;
      }
      r.over = down;
    }
  }
  r.max_concurrent = r.ok.n;
  return r;
}

double TokensPerSecond(const Trial& t) { return t.seconds > 0 ? t.tokens / t.seconds : 0; }

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: %s --model DIR [--kv-cache-bytes N] [--prompt N] [--gen N] "
                 "[--max-seqs N] [--threads N] [--json FILE]\n",
                 argv[0]);
    return 2;
  }
  Engine engines[] = {MakeEngine(a, KvCacheDtype::kFloat32), MakeEngine(a, KvCacheDtype::kInt8)};
  Result results[2];
  for (int i = 0; i < 2; ++i) results[i] = Search(a, engines[i]);
  // INT8 at the float engine's concurrency: the same batch, what dequantizing costs.
  const Trial same_n = RunTrial(a, engines[1], results[0].max_concurrent);
  const double ratio = static_cast<double>(results[1].max_concurrent) /
                       std::max(results[0].max_concurrent, 1);
  std::printf("%s, KV budget %zu bytes, prompt %d + %d generated tokens per sequence\n",
              a.model.filename().c_str(), a.kv_cache_bytes, a.prompt, a.gen);
  std::printf("| KV cache | bytes/block | blocks | concurrent, no preemption | preemptions at +1 |"
              " tokens/s at that N |\n|---|---|---|---|---|---|\n");
  for (int i = 0; i < 2; ++i) {
    std::printf("| %s | %zu | %d | %d | %lld (N=%d) | %.0f |\n", KvCacheDtypeName(engines[i].dtype),
                engines[i].block_bytes, engines[i].num_blocks, results[i].max_concurrent,
                static_cast<long long>(results[i].over.preemptions), results[i].over.n,
                TokensPerSecond(results[i].ok));
  }
  std::printf("ratio int8/float32: %.2fx (target >= 1.9x); int8 at N=%d: %.0f tokens/s "
              "(float32 %.0f)\n",
              ratio, results[0].max_concurrent, TokensPerSecond(same_n),
              TokensPerSecond(results[0].ok));
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    f << "{\"model\": \"" << a.model.filename().string() << "\", \"kv_cache_bytes\": "
      << a.kv_cache_bytes << ", \"prompt\": " << a.prompt << ", \"gen\": " << a.gen
      << ", \"ratio\": " << ratio << ", \"int8_tokens_per_s_at_float_n\": "
      << TokensPerSecond(same_n) << ", \"results\": {";
    for (int i = 0; i < 2; ++i) {
      const Result& r = results[i];
      f << (i ? ", " : "") << "\"" << KvCacheDtypeName(engines[i].dtype)
        << "\": {\"block_bytes\": " << engines[i].block_bytes
        << ", \"num_blocks\": " << engines[i].num_blocks
        << ", \"max_concurrent\": " << r.max_concurrent << ", \"preemptions_at_plus_one\": "
        << r.over.preemptions << ", \"plus_one_n\": " << r.over.n
        << ", \"tokens_per_s\": " << TokensPerSecond(r.ok) << ", \"trials\": " << r.trials.size()
        << "}";
    }
    f << "}}\n";
  }
  return 0;
}
