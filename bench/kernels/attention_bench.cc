// Micro benchmark of the paged attention kernel (src/kernels/cpu/attention/) against its plain
// reference (materialized scores, single-threaded attention). Not a test: run by hand,
//   build/inferd_attention_bench [--benchmark_filter=Decode]
// The last argument of each case is the OpenMP thread count. Decode reports the K/V bytes it
// reads (bytes_per_second: compare with the machine's memory bandwidth), prefill its FLOP rate.
#include <benchmark/benchmark.h>
#include <dnnl.h>
#include <omp.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention/flash_attention.h"
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
    args = {q.data(),
            k.data(),
            v.data(),
            key_cache.data(),
            value_cache.data(),
            slots.data(),
            starts.data(),
            lens.data(),
            tables.data(),
            h,
            hkv,
            d,
            t,
            seqs,
            blocks,
            bs,
            per_seq,
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
  state.counters["GFLOPS"] =
      benchmark::Counter(4.0 * pairs * a.num_heads * a.head_dim * state.iterations() / 1e9,
                         benchmark::Counter::kIsRate);
}

void Fast(benchmark::State& state) { Run(state, false); }
void Reference(benchmark::State& state) { Run(state, true); }

// Decode: 16 sequences x 1024 context (GPT-2-small heads; Llama-style GQA 12/4).
// Prefill: one 512-token prompt.
// Encoder (BERT-base) attention of one sequence: Q/K/V [seq, 12·64], a [seq] additive mask.
// EncoderFlash is what ai.inferd.Attention runs (FlashAttention per 48-row block of each head);
// EncoderSgemm is its previous method (materialized scores: sgemm, masked softmax, sgemm per
// head), kept here as the baseline. Args: seq, threads.
struct Encoder {
  static constexpr int64_t kHeads = 12, kDim = 64, kHidden = kHeads * kDim;
  int64_t seq;
  std::vector<float> q, k, v, mask, y;
  explicit Encoder(int64_t s)
      : seq(s), q(s * kHidden), k(s * kHidden), v(s * kHidden), mask(s), y(s * kHidden) {
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (auto* x : {&q, &k, &v}) {
      for (float& e : *x) e = dist(rng);
    }
    for (int64_t j = 0; j < s; ++j) mask[j] = j < s * 7 / 8 ? 0.f : -10000.f;  // padding
  }
};

void EncoderFlash(benchmark::State& state) {
  Encoder e(state.range(0));
  omp_set_num_threads(static_cast<int>(state.range(1)));
  const int64_t blocks = (e.seq + kFlashTileRows - 1) / kFlashTileRows;
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t w = 0; w < Encoder::kHeads * blocks; ++w) {
      const int64_t h = w / blocks, j0 = w % blocks * kFlashTileRows;
      AttentionTile t;
      t.q = e.q.data() + j0 * Encoder::kHidden + h * Encoder::kDim;
      t.q_row_stride = Encoder::kHidden;
      t.out = e.y.data() + j0 * Encoder::kHidden + h * Encoder::kDim;
      t.out_row_stride = Encoder::kHidden;
      t.num_rows = std::min(kFlashTileRows, e.seq - j0);
      t.head_dim = t.value_dim = Encoder::kDim;
      t.scale = 0.125f;
      t.key = {e.k.data() + h * Encoder::kDim, Encoder::kHidden};
      t.value = {e.v.data() + h * Encoder::kDim, Encoder::kHidden};
      t.num_keys = e.seq;
      t.mask = e.mask.data();
      t.mask_key_stride = 1;
      FlashAttention(t);
    }
    benchmark::DoNotOptimize(e.y.data());
  }
}

void EncoderSgemm(benchmark::State& state) {
  Encoder e(state.range(0));
  omp_set_num_threads(static_cast<int>(state.range(1)));
  const int64_t n = e.seq, hd = Encoder::kHidden;
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t h = 0; h < Encoder::kHeads; ++h) {
      thread_local std::vector<float> scores;
      scores.resize(n * n);
      const float* qp = e.q.data() + h * Encoder::kDim;
      const float* kp = e.k.data() + h * Encoder::kDim;
      dnnl_sgemm('N', 'T', n, n, Encoder::kDim, 0.125f, qp, hd, kp, hd, 0.f, scores.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        float* s = scores.data() + i * n;
        float mx = -INFINITY, sum = 0.f;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j] += e.mask[j]);
        for (int64_t j = 0; j < n; ++j) sum += s[j] = std::exp(s[j] - mx);
        for (int64_t j = 0; j < n; ++j) s[j] /= sum;
      }
      dnnl_sgemm('N', 'N', n, Encoder::kDim, n, 1.f, scores.data(), n,
                 e.v.data() + h * Encoder::kDim, hd, 0.f, e.y.data() + h * Encoder::kDim, hd);
    }
    benchmark::DoNotOptimize(e.y.data());
  }
}

BENCHMARK(EncoderFlash)
    ->ArgNames({"seq", "threads"})
    ->Args({128, 1})
    ->Args({128, 2})
    ->Args({512, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(EncoderSgemm)
    ->ArgNames({"seq", "threads"})
    ->Args({128, 1})
    ->Args({128, 2})
    ->Args({512, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#define CASES(fn)                                                    \
  BENCHMARK(fn)                                                      \
      ->ArgNames({"seqs", "ctx", "new", "H", "Hkv", "D", "threads"}) \
      ->Args({16, 1024, 1, 12, 12, 64, 1})                           \
      ->Args({16, 1024, 1, 12, 12, 64, 2})                           \
      ->Args({16, 1024, 1, 12, 4, 64, 2})                            \
      ->Args({1, 1024, 1, 12, 12, 64, 1})                            \
      ->Args({1, 512, 512, 12, 12, 64, 1})                           \
      ->Args({1, 512, 512, 12, 12, 64, 2})                           \
      ->Args({1, 512, 512, 12, 4, 64, 2})                            \
      ->Unit(benchmark::kMillisecond)                                \
      ->UseRealTime()

CASES(Fast);
CASES(Reference);

// Sums a 256 MiB buffer: this machine's read bandwidth on `threads` threads, the bound for the
// decode cases (compare bytes_per_second). Arg: threads.
void MemoryRead(benchmark::State& state) {
  std::vector<float> buf(64 << 20, 1.f);
  omp_set_num_threads(static_cast<int>(state.range(0)));
  const int64_t n = static_cast<int64_t>(buf.size());
  for (auto _ : state) {
    float sum = 0.f;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
    for (int64_t i = 0; i < n; ++i) sum += buf[i];
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * n * 4);
}
BENCHMARK(MemoryRead)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace inferd::cpu

BENCHMARK_MAIN();
