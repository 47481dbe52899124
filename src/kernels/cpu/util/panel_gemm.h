// A float32 GEMM over constant weights repacked once into 16-column panels: what MatMul and
// FusedMatMul run for a constant 2-D B on CPUs without AVX-512 (PreferPanelGemm in
// onednn/dnnl_util.h), where oneDNN 2.6 takes its AVX2 "gemm:jit" path, at decode-sized row counts
// and in decoders (which M takes which kernel, and the one copy of the weights:
// onednn/gemm_weights.h).
//
// Why hand-written: that path reads B in its plain row-major layout on every call. The rows of a
// 16-column strip lie N floats apart (768, 1280, 3072, 32000 in a decoder: strides that map them
// onto a few L1 sets and one hardware-prefetch stream per row), so at the 2-64 rows of a batched
// decode step it runs far below the FMA peak while the weights stream from memory. Here each
// panel is K x 16 contiguous floats, read front to back by a 6 x 16 register tile, K in blocks of
// 256 that stay in L1 while every row tile uses them; while they compute on one block, the row
// tiles prefetch the next (at 3+ rows the weights' stream from memory overlaps all of a block's
// passes instead of only the first one's). The same code runs any M (a decoder's prefill, bit for
// bit the rows of a decode), but at encoder sizes oneDNN's sgemm, which blocks A too, is faster:
// docs/performance.md. Measured decode figures: docs/generation.md.
#pragma once

#include <cstdint>

#include "common/tensor.h"

namespace inferd::cpu {

// B [K, N] float32 as ceil(N / 16) panels of [K, 16], the last one zero-padded past N.
class PanelWeights {
 public:
  static constexpr int64_t kPanel = 16;

  // Packs row-major `b` [k, n] (any alignment); k, n >= 1.
  void Pack(const float* b, int64_t k, int64_t n);
  bool defined() const { return k_ > 0; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t num_panels() const { return (n_ + kPanel - 1) / kPanel; }
  // Panel p: k() rows of kPanel floats.
  const float* panel(int64_t p) const { return data_.data<float>() + p * k_ * kPanel; }

 private:
  Tensor data_;  // 64-byte aligned
  int64_t k_ = 0, n_ = 0;
};

// What is added to A · B before it is stored, in this order.
struct GemmEpilogue {
  const float* bias = nullptr;      // [N], added to every row
  const float* residual = nullptr;  // [M, N] row-major; must not alias y
};

// y [m, N] = a [m, K] · B + bias + residual; a and y row-major and dense (lda = K, ldy = N),
// m >= 1. Every element is summed in one order whatever m and the thread split are (K in blocks
// of 256, each block in order, the blocks added in order), so a row gives bit-identical results
// alone or in a batch of any size: a sequence decodes the same greedy tokens alone as among 16.
// Runs on the OpenMP threads (ParallelFor) over panels, or over rows when there are too few
// panels to share.
void PanelGemm(const float* a, int64_t m, const PanelWeights& b, float* y,
               const GemmEpilogue& epilogue = {});

// y[:, 0..cols) (row stride ldy) = a [m, k] · panel, one [k, 16] panel in the PanelWeights layout
// supplied by the caller (1 <= cols <= 16: the valid columns; the panel's others are read, not
// stored), on the calling thread, with PanelGemm's tiles and summation order. For kernels that
// produce panels on the fly (kernels/cpu/quantization/nbits_gemm.h dequantizes weights into one).
void PanelGemmPanel(const float* a, int64_t m, int64_t k, const float* panel, int64_t cols,
                    float* y, int64_t ldy);

}  // namespace inferd::cpu
