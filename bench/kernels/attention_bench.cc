// Micro benchmark of the paged attention kernel (src/kernels/cpu/attention/) against its plain
// reference (materialized scores, single-threaded attention). Not a test: run by hand,
//   build/inferd_attention_bench [--benchmark_filter=Decode]
// The last argument of each case is the OpenMP thread count. Decode reports the K/V bytes it
// reads (bytes_per_second: compare with the machine's memory bandwidth), prefill its FLOP rate.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention/paged_attention.h"

namespace inferd::cpu {
namespace {

// One step: `seqs` sequences of `context` tokens each, of which the last `fresh` are new.
struct Step {
  std::vector<float> q, k, v, key_cache, value_cache, out;
  std::vector<int64_t> slots, starts, lens, tables;
  PagedAttentionArgs args;

  Step(int64_t seqs, int64_t context, int64_t fresh, int64_t h, int64_t hkv, int64_t d,
       int64_t bs) {
    const int64_t per_seq = (context + bs - 1) / bs, blocks = seqs * per_seq, t = seqs * fresh;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    auto fill = [&](std::vector<float>& x, int64_t n) {
      x.resize(n);
      for (float& e : x) e = dist(rng);
    };
    fill(q, h * t * d);
    fill(k, hkv * t * d);
    fill(v, hkv * t * d);
    fill(key_cache, blocks * hkv * bs * d);
    fill(value_cache, blocks * hkv * bs * d);
    out.resize(h * t * d);
    std::vector<int64_t> pool(blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);  // scattered blocks, as after many steps
    tables.assign(pool.begin(), pool.end());
    starts.push_back(0);
    for (int64_t s = 0; s < seqs; ++s) {
      for (int64_t p = context - fresh; p < context; ++p) {
        slots.push_back(tables[s * per_seq + p / bs] * bs + p % bs);
      }
      starts.push_back(starts.back() + fresh);
      lens.push_back(context);
    }
    args = {q.data(), k.data(), v.data(), key_cache.data(), value_cache.data(), slots.data(),
            starts.data(), lens.data(), tables.data(), h, hkv, d, t, seqs, blocks, bs, per_seq,
            0.125f};
  }
};

// Args: seqs, context, fresh tokens per sequence, heads, kv heads, head_dim, threads.
void Run(benchmark::State& state, bool reference) {
  Step step(state.range(0), state.range(1), state.range(2), state.range(3), state.range(4),
            state.range(5), 16);
  omp_set_num_threads(static_cast<int>(state.range(6)));
  if (!CheckPagedAttentionArgs(step.args).ok()) {
    state.SkipWithError("bad args");
    return;
  }
  for (auto _ : state) {
    if (reference) {
      PagedAttentionReference(step.args, step.out.data());
    } else {
      PagedAttention(step.args, step.out.data());
    }
    benchmark::DoNotOptimize(step.out.data());
  }
  const PagedAttentionArgs& a = step.args;
  const int64_t seqs = a.num_seqs, ctx = state.range(1), fresh = state.range(2);
  state.SetBytesProcessed(state.iterations() * seqs * ctx * a.num_kv_heads * a.head_dim * 8);
  // Causal pairs: each new token sees the cached prefix plus the new tokens up to itself.
  const double pairs = seqs * fresh * (ctx - fresh + (fresh + 1) / 2.0);
  state.counters["GFLOPS"] = benchmark::Counter(
      4.0 * pairs * a.num_heads * a.head_dim * state.iterations() / 1e9,
      benchmark::Counter::kIsRate);
}

void Fast(benchmark::State& state) { Run(state, false); }
void Reference(benchmark::State& state) { Run(state, true); }

// Decode: 16 sequences x 1024 context (GPT-2-small heads; Llama-style GQA 12/4).
// Prefill: one 512-token prompt.
#define CASES(fn)                                                             \
  BENCHMARK(fn)                                                               \
      ->ArgNames({"seqs", "ctx", "new", "H", "Hkv", "D", "threads"})          \
      ->Args({16, 1024, 1, 12, 12, 64, 1})                                    \
      ->Args({16, 1024, 1, 12, 12, 64, 2})                                    \
      ->Args({16, 1024, 1, 12, 4, 64, 2})                                     \
      ->Args({1, 1024, 1, 12, 12, 64, 1})                                     \
      ->Args({1, 512, 512, 12, 12, 64, 1})                                    \
      ->Args({1, 512, 512, 12, 12, 64, 2})                                    \
      ->Args({1, 512, 512, 12, 4, 64, 2})                                     \
      ->Unit(benchmark::kMillisecond)                                         \
      ->UseRealTime()

CASES(Fast);
CASES(Reference);

}  // namespace
}  // namespace inferd::cpu

BENCHMARK_MAIN();
