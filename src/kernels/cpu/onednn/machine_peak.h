// The machine's own roofline: its FP32 and INT8 matrix-multiply peaks and its memory read
// bandwidth, measured (not taken from a datasheet) so `inferd bench --profile` can show each
// kernel's achieved GFLOP/s or GB/s as a share of what this CPU, with these threads, reaches.
//
// FP32: oneDNN's dnnl_sgemm on a square n×n×n problem (n = 512 by default: 3 MiB of operands,
// cache-resident on server CPUs; large enough that packing is amortized). INT8: the better of
// dnnl_gemm_u8s8s32 and oneDNN's u8·s8 → s32 matmul primitive (weights in its own layout) on the
// same n: without VNNI oneDNN multiplies with vpmaddubsw, and only the primitive uses AMX-INT8
// tiles where the CPU has them. Each is the best of a few runs after a warm-up run. Memory: a streaming sum over
// `mem_bytes` (256 MiB, well beyond any cache) split over the threads, best of a few passes.
// All three take well under a second on a 2-core machine; a loaded machine reads lower.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace inferd::cpu {

struct PeakOptions {
  int threads = 0;          // OpenMP threads; 0: omp_get_max_threads()
  int64_t gemm_size = 512;  // n of the n×n×n products
  size_t mem_bytes = size_t{256} << 20;
  int tries = 5;  // timed runs per measurement (after one warm-up); the best counts
};

struct MachinePeaks {
  double fp32_gflops = 0;   // 2·n³ / best sgemm time
  double int8_gops = 0;     // 2·n³ / best u8s8s32 time (gemm API or matmul primitive)
  double mem_read_gbps = 0; // bytes / best pass time (1 GB = 1e9 bytes)
  int threads = 0;
  int64_t gemm_size = 0;
  size_t mem_bytes = 0;
  double measure_ms = 0;  // wall time of the whole measurement
};

// Runs the three micro-benchmarks. INVALID_ARGUMENT for sizes below 16 / 4 KiB or tries < 1;
// INTERNAL when oneDNN refuses a gemm.
StatusOr<MachinePeaks> MeasureMachinePeaks(const PeakOptions& options = {});

// achieved / peak as a percentage; 0 when the peak is unknown (0).
double PercentOfPeak(double achieved, double peak);

}  // namespace inferd::cpu
