// Micro benchmark of the attention kernels (src/kernels/cpu/attention/): the paged (decoder) one
// against its plain reference (materialized scores, single-threaded attention), the encoder's
// against its earlier methods, and the machine's FP32 peak. Not a test: run by hand,
//   build/inferd_attention_bench [--benchmark_filter=Decode]
// or bench/kernels/attention_peak.py for the encoder table of docs/performance.md.
// The last argument of each case is the OpenMP thread count. Decode reports the K/V bytes it
// reads (bytes_per_second: compare with the machine's memory bandwidth), prefill its FLOP rate.
#include <benchmark/benchmark.h>
#include <dnnl.h>
#include <immintrin.h>
#include <omp.h>
#include <time.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention/dense_attention.h"
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
    args = {.query = q.data(),
            .key = k.data(),
            .value = v.data(),
            .key_cache = key_cache.data(),
            .value_cache = value_cache.data(),
            .slot_mapping = slots.data(),
            .query_start = starts.data(),
            .context_lens = lens.data(),
            .block_tables = tables.data(),
            .num_heads = h,
            .num_kv_heads = hkv,
            .head_dim = d,
            .num_tokens = t,
            .num_seqs = seqs,
            .num_blocks = blocks,
            .block_size = bs,
            .max_blocks_per_seq = per_seq,
            .scale = 0.125f};
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

// Encoder (BERT-base) attention: Q/K/V [batch, seq, 12·64], a [batch, 1, 1, seq] additive mask
// (the last 1/8 of each sequence is padding). EncoderDense is what ai.inferd.Attention runs
// (dense_attention.h's MultiHeadAttention); EncoderFlash its previous method (FlashAttention per
// 48-row block of each head, 32 keys at a time), EncoderSgemm the one before (materialized
// scores: sgemm, masked softmax, sgemm per head). Args: seq, batch, threads. Counters: GFLOPS
// (4·B·H·S²·D per wall second) and GFLOPS_cpu (per second of the process's CPU time: the rate of
// one busy core, which a shared machine's load does not dilute).
struct Encoder {
  static constexpr int64_t kHeads = 12, kDim = 64, kHidden = kHeads * kDim;
  int64_t seq, batch;
  std::vector<float> q, k, v, mask, y;
  Encoder(int64_t s, int64_t b)
      : seq(s),
        batch(b),
        q(b * s * kHidden),
        k(b * s * kHidden),
        v(b * s * kHidden),
        mask(b * s),
        y(b * s * kHidden) {
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (auto* x : {&q, &k, &v}) {
      for (float& e : *x) e = dist(rng);
    }
    for (int64_t j = 0; j < b * s; ++j) mask[j] = j % s < s * 7 / 8 ? 0.f : -10000.f;
  }
  double Flops() const { return 4.0 * batch * kHeads * seq * seq * kDim; }
};

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Runs body() per iteration and sets the FLOP-rate counters.
template <typename Body>
void RunFlops(benchmark::State& state, double flops, Body body) {
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) body();
  const double cpu = ProcessCpuSeconds() - cpu0;
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOPS_cpu"] = flops * state.iterations() / 1e9 / cpu;
}

// What ai.inferd.Attention runs (MultiHeadAttention) on the given register tiles.
void RunEncoderDense(benchmark::State& state, DenseAttentionTiles tiles) {
  Encoder e(state.range(0), state.range(1));
  omp_set_num_threads(static_cast<int>(state.range(2)));
  MultiHeadAttentionArgs a;
  a.q = e.q.data();
  a.k = e.k.data();
  a.v = e.v.data();
  a.y = e.y.data();
  a.batch = e.batch;
  a.q_seq = a.kv_seq = e.seq;
  a.heads = Encoder::kHeads;
  a.head_dim = a.value_dim = Encoder::kDim;
  a.scale = 0.125f;
  a.mask = e.mask.data();
  a.mask_strides[0] = e.seq;
  a.mask_strides[3] = 1;
  a.tiles = tiles;
  RunFlops(state, e.Flops(), [&] {
    MultiHeadAttention(a);
    benchmark::DoNotOptimize(e.y.data());
  });
}

void EncoderDense(benchmark::State& state) { RunEncoderDense(state, DenseAttentionTiles::kBest); }

// EncoderDense on the AVX2 tiles (6 x 16) even where the CPU has AVX-512: the narrower path as a
// peer in the same run (on an AVX2-only CPU the same as EncoderDense).
void EncoderDenseAvx2(benchmark::State& state) {
  RunEncoderDense(state, DenseAttentionTiles::kAvx2);
}

// EncoderDense without the next-head prefetch hint (DenseAttention per head, heads split over the
// threads as MultiHeadAttention does when there are enough of them): what the hint buys.
void EncoderDenseNoPrefetch(benchmark::State& state) {
  Encoder e(state.range(0), state.range(1));
  omp_set_num_threads(static_cast<int>(state.range(2)));
  const int64_t tokens = e.seq * Encoder::kHidden;
  RunFlops(state, e.Flops(), [&] {
#pragma omp parallel for schedule(static)
    for (int64_t w = 0; w < e.batch * Encoder::kHeads; ++w) {
      const int64_t b = w / Encoder::kHeads, h = w % Encoder::kHeads;
      DenseAttentionHead head;
      head.q = e.q.data() + b * tokens + h * Encoder::kDim;
      head.q_row_stride = Encoder::kHidden;
      head.key = e.k.data() + b * tokens + h * Encoder::kDim;
      head.key_row_stride = Encoder::kHidden;
      head.value = e.v.data() + b * tokens + h * Encoder::kDim;
      head.value_row_stride = Encoder::kHidden;
      head.out = e.y.data() + b * tokens + h * Encoder::kDim;
      head.out_row_stride = Encoder::kHidden;
      head.num_rows = head.num_keys = e.seq;
      head.head_dim = head.value_dim = Encoder::kDim;
      head.scale = 0.125f;
      head.mask = e.mask.data() + b * e.seq;
      head.mask_key_stride = 1;
      DenseAttention(head);
    }
    benchmark::DoNotOptimize(e.y.data());
  });
}

void EncoderFlash(benchmark::State& state) {
  Encoder e(state.range(0), state.range(1));
  omp_set_num_threads(static_cast<int>(state.range(2)));
  const int64_t blocks = (e.seq + kFlashTileRows - 1) / kFlashTileRows;
  const int64_t tokens = e.seq * Encoder::kHidden;
  RunFlops(state, e.Flops(), [&] {
#pragma omp parallel for schedule(static)
    for (int64_t w = 0; w < e.batch * Encoder::kHeads * blocks; ++w) {
      const int64_t b = w / (Encoder::kHeads * blocks), h = w / blocks % Encoder::kHeads;
      const int64_t j0 = w % blocks * kFlashTileRows;
      AttentionTile t;
      t.q = e.q.data() + b * tokens + j0 * Encoder::kHidden + h * Encoder::kDim;
      t.q_row_stride = Encoder::kHidden;
      t.out = e.y.data() + b * tokens + j0 * Encoder::kHidden + h * Encoder::kDim;
      t.out_row_stride = Encoder::kHidden;
      t.num_rows = std::min(kFlashTileRows, e.seq - j0);
      t.head_dim = t.value_dim = Encoder::kDim;
      t.scale = 0.125f;
      t.key = {e.k.data() + b * tokens + h * Encoder::kDim, Encoder::kHidden};
      t.value = {e.v.data() + b * tokens + h * Encoder::kDim, Encoder::kHidden};
      t.num_keys = e.seq;
      t.mask = e.mask.data() + b * e.seq;
      t.mask_key_stride = 1;
      FlashAttention(t);
    }
    benchmark::DoNotOptimize(e.y.data());
  });
}

void EncoderSgemm(benchmark::State& state) {
  Encoder e(state.range(0), state.range(1));
  omp_set_num_threads(static_cast<int>(state.range(2)));
  const int64_t n = e.seq, hd = Encoder::kHidden, tokens = n * hd;
  RunFlops(state, e.Flops(), [&] {
#pragma omp parallel for schedule(static)
    for (int64_t w = 0; w < e.batch * Encoder::kHeads; ++w) {
      const int64_t b = w / Encoder::kHeads, h = w % Encoder::kHeads;
      thread_local std::vector<float> scores;
      scores.resize(n * n);
      const float* qp = e.q.data() + b * tokens + h * Encoder::kDim;
      const float* kp = e.k.data() + b * tokens + h * Encoder::kDim;
      const float* mask = e.mask.data() + b * n;
      dnnl_sgemm('N', 'T', n, n, Encoder::kDim, 0.125f, qp, hd, kp, hd, 0.f, scores.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        float* s = scores.data() + i * n;
        float mx = -INFINITY, sum = 0.f;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j] += mask[j]);
        for (int64_t j = 0; j < n; ++j) sum += s[j] = std::exp(s[j] - mx);
        for (int64_t j = 0; j < n; ++j) s[j] /= sum;
      }
      dnnl_sgemm('N', 'N', n, Encoder::kDim, n, 1.f, scores.data(), n,
                 e.v.data() + b * tokens + h * Encoder::kDim, hd, 0.f,
                 e.y.data() + b * tokens + h * Encoder::kDim, hd);
    }
    benchmark::DoNotOptimize(e.y.data());
  });
}

#define ENCODER_CASES(fn)                          \
  BENCHMARK(fn)                                    \
      ->ArgNames({"seq", "batch", "threads"})      \
      ->ArgsProduct({{128, 512}, {1, 16}, {1, 2}}) \
      ->Unit(benchmark::kMillisecond)              \
      ->UseRealTime()

ENCODER_CASES(EncoderDense);
ENCODER_CASES(EncoderDenseAvx2);
ENCODER_CASES(EncoderDenseNoPrefetch);
ENCODER_CASES(EncoderFlash);
ENCODER_CASES(EncoderSgemm);

// The machine's FP32 peak, two ways. PeakFma: each thread runs 12 independent chains of FMAs of
// the widest vectors the CPU has (16-wide AVX-512, else 8-wide AVX2), what a perfect
// register-blocked kernel would reach. Sgemm: oneDNN's sgemm on 1024³ (fits L2/L3 blocking),
// what a tuned GEMM reaches in practice. Arg: threads.
__attribute__((target("avx2,fma"))) float FmaChains(int64_t iters) {
  __m256 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  }
  __m256 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) float FmaChains512(int64_t iters) {
  __m512 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  }
  __m512 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_cvtss_f32(s);
}

void PeakFma(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    state.SkipWithError("no AVX2/FMA");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  constexpr int64_t kIters = 1 << 20;
  const bool wide = __builtin_cpu_supports("avx512f");
  state.SetLabel(wide ? "avx512" : "avx2");
  RunFlops(state, 2.0 * (wide ? 16 : 8) * 12 * kIters * threads, [&] {
    float sink = 0.f;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += wide ? FmaChains512(kIters) : FmaChains(kIters);
    benchmark::DoNotOptimize(sink);
  });
}
BENCHMARK(PeakFma)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void Sgemm(benchmark::State& state) {
  const int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  omp_set_num_threads(static_cast<int>(state.range(0)));
  RunFlops(state, 2.0 * n * n * n, [&] {
    dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  });
}
BENCHMARK(Sgemm)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Decode: 16 sequences x 1024 context (GPT-2-small heads; Llama-style GQA 12/4).
// Prefill: one 512-token prompt.
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
