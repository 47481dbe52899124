// Which kernel a constant-weight float32 MatMul / FusedMatMul runs on CPUs below AVX-512 —
// util/panel_gemm.h's PanelGemm or oneDNN's matmul — and the one copy of the weights behind it.
//
// PanelGemm is the decode kernel: at the 1-32 rows of a decode step it streams 16-column panels
// that oneDNN 2.6's AVX2 sgemm ("gemm:jit") cannot match on row-major weights. At encoder sizes
// (BERT-base: M = batch x 128 = 128-2048 rows) oneDNN's sgemm, which blocks A and B into its own
// buffers per call, is the faster one (measured per shape and M by
// bench/kernels/gemm_crossover_bench.cc: docs/performance.md, "Matmul kernels by rows").
//
// Why one layout and not both: BERT-base's weights are 340 MB, a decoder's as large; two packed
// copies would double the RSS that the panel path already lost to ONNX Runtime. So GemmWeights
// holds either the plain row-major [K, N] (which oneDNN's sgemm reads as is: the initializer's own
// buffer, no copy) or PanelGemm's panels, never both for long:
//   - kPanel (decoders: SessionOptions::batch_invariant_matmul): panels from Init, PanelGemm for
//     every M, as before, so a row sums in one order alone or among any others (a sequence's
//     greedy tokens do not depend on what shares its step, and a prefill chunk's keys and values
//     do not depend on the decodes batched with it).
//   - kByRows (every other graph): starts plain and runs oneDNN; once the calls of at most
//     PanelGemmMaxRows() rows outnumber the larger ones it packs panels, drops the plain copy and
//     runs PanelGemm from then on, whatever M. An encoder never packs; a graph served mostly at
//     small M (DLRM at batch 1) switches at its first call. One way only: a node held as panels
//     keeps them (its rarer large calls run PanelGemm, slower but in the same memory).
//   - kPlain: oneDNN on the plain weights for every M (forced, for tests and A/B runs).
// On AVX-512 CPUs (or a build without AVX2 + FMA) kernels keep oneDNN's own packed layout
// (PackedWeights) unless a path is forced: oneDNN's brgemm kernels are the faster ones there —
// except for the small weights of a decoder (batch-invariant sessions, at most
// kSmallPanelWeightElements elements: 2 MiB of float32), which take kPanel on every CPU. There
// a product costs a few microseconds and oneDNN's fixed cost per call dominates it: on the
// Intel Xeon of docs/generation.md ("Speculative decoding", 1 thread) PanelGemm ran tiny-llama's
// 192x192..192x2048 products in 0.4-0.76x oneDNN's time at 1 and 5 rows and its draft's 64-wide
// ones in under 0.45x, so a tiny-llama step took 0.40 instead of 0.57 ms and a draft step 0.036
// instead of 0.072 ms. The 768-wide and larger weights of the 110M/350M decoders keep oneDNN.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "common/mutex.h"
#include "common/tensor.h"
#include "kernels/cpu/util/panel_gemm.h"

namespace inferd::cpu {

// The process-wide path setting for kernels created from then on. kAuto unless the environment
// variable INFERD_GEMM_PATH (read once: auto, rows, panel, onednn; anything else is kAuto with a
// warning) or SetGemmPathForTesting says otherwise. kByRows forces the by-rows policy on any CPU.
enum class GemmPath { kAuto, kByRows, kPanel, kOneDnn };
GemmPath GemmPathSetting();
void SetGemmPathForTesting(GemmPath path);

// Sets the path for a scope (tests).
class ScopedGemmPathForTesting {
 public:
  explicit ScopedGemmPathForTesting(GemmPath path) : saved_(GemmPathSetting()) {
    SetGemmPathForTesting(path);
  }
  ~ScopedGemmPathForTesting() { SetGemmPathForTesting(saved_); }
  ScopedGemmPathForTesting(const ScopedGemmPathForTesting&) = delete;
  ScopedGemmPathForTesting& operator=(const ScopedGemmPathForTesting&) = delete;

 private:
  GemmPath saved_;
};

// The row count up to which PanelGemm beats oneDNN's sgemm for B [k, n] on this CPU class
// (AVX2 + FMA, no AVX-512); measured, see the header comment.
int64_t PanelGemmMaxRows(int64_t k, int64_t n);

class GemmWeights {
 public:
  enum class Policy { kPanel, kByRows, kPlain };

  // Weights of at most this many elements take kPanel in batch-invariant sessions on any CPU
  // (the header comment).
  static constexpr int64_t kSmallPanelWeightElements = int64_t{512} * 1024;

  // The policy of a kernel created now for a constant B [k, n], or nullopt for oneDNN's own
  // packed layout (PackedWeights): the GemmPathSetting(), else by the CPU (PreferPanelGemm),
  // whether the session asks for batch-invariant products, and (those on AVX-512) B's size.
  static std::optional<Policy> ChooseFor(bool batch_invariant, int64_t k, int64_t n);

  GemmWeights() = default;
  GemmWeights(const GemmWeights&) = delete;
  GemmWeights& operator=(const GemmWeights&) = delete;
  ~GemmWeights();

  // Takes the constant B [k, n] float32, k, n >= 1 (an owned buffer is shared, not copied; a view
  // is cloned). kPanel packs here; the caller then releases the initializer.
  void Reset(const Tensor& b, Policy policy);
  bool defined() const { return k_ > 0; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }

  // What a call of `rows` rows runs on: `panel` set → PanelGemm, else oneDNN on `plain`.
  // The references keep the memory alive for the call even if another thread switches layouts.
  struct Layout {
    std::shared_ptr<const PanelWeights> panel;
    Tensor plain;  // [k, n] row-major float32
  };
  Layout ForRows(int64_t rows) const;

  // Bytes held by live GemmWeights in each layout, process wide (tests: one copy per weight).
  struct Totals {
    int64_t plain_bytes = 0;
    int64_t panel_bytes = 0;
  };
  static Totals LiveTotals();

 private:
  void PackLocked() const REQUIRES(mu_);
  void Account(int sign) const REQUIRES(mu_);

  int64_t k_ = 0, n_ = 0;
  Policy policy_ = Policy::kByRows;
  int64_t max_rows_ = 0;  // PanelGemmMaxRows(k, n)
  mutable Mutex mu_;
  mutable Tensor plain_ GUARDED_BY(mu_);
  mutable std::shared_ptr<const PanelWeights> panel_ GUARDED_BY(mu_);
  mutable int64_t small_calls_ GUARDED_BY(mu_) = 0;
  mutable int64_t large_calls_ GUARDED_BY(mu_) = 0;
};

}  // namespace inferd::cpu
