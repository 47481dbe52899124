// Whether the model's bf16-marked layers (optimizer/bf16_compute.h: BlockedConv and FusedMatMul
// with compute_bf16) really compute in bf16 on this CPU, decided once per process and measured
// rather than assumed. Native bf16 is not enough: on an Intel Xeon (family 6, model 207, KVM) with
// avx512_bf16 but no AMX, ResNet-50 with bf16 compute ran at 0.58x its FP32 speed (every
// convolution slower: docs/performance.md), while on an AMD EPYC with native bf16 it ran at 1.98x.
// So, on a CPU with native bf16 (DnnlHasNativeBf16), the first kernel that asks times a
// representative oneDNN convolution (a ResNet bottleneck's 1x1, 256 -> 64 channels at 56 x 56,
// batch 4) and a matmul (BERT-base's 128 x 768 x 3072) in f32 and in bf16 on the calling thread's
// OpenMP threads (the median of 9 back-to-back ratios; about 0.3 s with the kernels' JIT), and
// computes in bf16 only where bf16 is at least kBf16MinSpeedup faster. Elsewhere the layers
// compute in FP32 from their bf16 weights widened once at load, exactly as on a CPU without bf16
// (so the model runs at about FP32 speed and the file stays half the size).
// INFERD_BF16_COMPUTE=on forces bf16 compute where the CPU has native bf16, =off forces FP32; the
// choice is logged once (info).
#pragma once

#include <string>
#include <string_view>

namespace inferd::cpu {

inline constexpr double kBf16MinSpeedup = 1.1;

struct Bf16Choice {
  bool conv = false;    // BlockedConv's compute_bf16 layers compute in bf16
  bool matmul = false;  // FusedMatMul's compute_bf16 layers compute in bf16
  // f32 time / bf16 time of the probes (0: not measured).
  double conv_speedup = 0, matmul_speedup = 0;
  std::string reason;  // one line for the log and `inferd quantize --precision bf16`
};

// The decision from its inputs (unit-tested): `native` DnnlHasNativeBf16(); `env` the value of
// INFERD_BF16_COMPUTE ("" when unset; on / off / auto); the measured speedups (ignored unless
// native and auto). An unknown env value counts as auto (and the reason says so).
Bf16Choice DecideBf16(bool native, std::string_view env, double conv_speedup,
                      double matmul_speedup);

// The process's decision (measured on first use when needed; thread-safe).
const Bf16Choice& Bf16ComputeChoice();

}  // namespace inferd::cpu
