#include "kernels/cpu/onednn/machine_peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <oneapi/dnnl/dnnl.h>
#include <memory>
#include <vector>

#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Best time in ms of `tries` calls of fn after one warm-up call; fn returns false on failure.
template <typename Fn>
StatusOr<double> BestMs(int tries, Fn&& fn) {
  if (!fn()) return Internal("oneDNN gemm failed");
  double best = 1e300;
  for (int i = 0; i < tries; ++i) {
    const auto start = Clock::now();
    if (!fn()) return Internal("oneDNN gemm failed");
    best = std::min(best, MsSince(start));
  }
  return best;
}

StatusOr<double> Fp32Gflops(int64_t n, int tries) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.f);
  ASSIGN_OR_RETURN(double ms, BestMs(tries, [&] {
                     return dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f,
                                       c.data(), n) == dnnl_success;
                   }));
  return 2.0 * n * n * n / (ms * 1e6);
}

StatusOr<double> Int8Gops(int64_t n, int tries) {
  std::vector<uint8_t> a(n * n, 3);
  std::vector<int8_t> b(n * n, 2);
  std::vector<int32_t> c(n * n, 0);
  const int32_t co = 0;
  ASSIGN_OR_RETURN(double ms, BestMs(tries, [&] {
                     return dnnl_gemm_u8s8s32('N', 'N', 'F', n, n, n, 1.f, a.data(), n, 0,
                                              b.data(), n, 0, 0.f, c.data(), n,
                                              &co) == dnnl_success;
                   }));
  return 2.0 * n * n * n / (ms * 1e6);
}

// The same u8·s8 → s32 product through oneDNN's matmul primitive with its weights in the
// primitive's own layout (reordered once), the path int8 MatMul and convolutions take: on a CPU
// with AMX-INT8 it runs on the tile unit, which the gemm API above never uses (an Intel Xeon with
// AMX, 2 threads: ~630 GOP/s from the gemm API, several times that here), so the INT8 peak is the
// better of the two.
StatusOr<double> Int8MatmulGops(int64_t n, int tries) {
  using dnnl::memory;
  try {
    dnnl::engine& eng = DnnlEngine();
    dnnl::stream strm(eng);
    const memory::dims dims = {n, n};
    const memory::desc a_md(dims, memory::data_type::u8, memory::format_tag::ab),
        b_any(dims, memory::data_type::s8, memory::format_tag::any),
        b_md(dims, memory::data_type::s8, memory::format_tag::ab),
        c_md(dims, memory::data_type::s32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), eng);
    std::vector<uint8_t> a(n * n, 3);
    std::vector<int8_t> b(n * n, 2);
    std::vector<int32_t> c(n * n, 0);
    memory a_mem(a_md, eng, a.data()), b_plain(b_md, eng, b.data()), c_mem(c_md, eng, c.data());
    memory b_mem(pd.weights_desc(), eng);
    dnnl::reorder(b_plain, b_mem).execute(strm, b_plain, b_mem);
    const dnnl::matmul prim(pd);
    ASSIGN_OR_RETURN(double ms, BestMs(tries, [&] {
                       prim.execute(strm, {{DNNL_ARG_SRC, a_mem},
                                           {DNNL_ARG_WEIGHTS, b_mem},
                                           {DNNL_ARG_DST, c_mem}});
                       strm.wait();
                       return true;
                     }));
    return 2.0 * n * n * n / (ms * 1e6);
  } catch (const dnnl::error& e) {
    return Internal("oneDNN int8 matmul failed: {}", e.what());
  }
}

// A streaming read of the whole buffer: integer sums vectorize without reassociation concerns.
uint64_t SumWords(const uint64_t* p, int64_t words, int threads) {
  uint64_t sum = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < words; ++i) sum += p[i];
  return sum;
}

double MemReadGbps(size_t bytes, int threads, int tries) {
  const int64_t words = static_cast<int64_t>(bytes / sizeof(uint64_t));
  std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
  uint64_t* p = buf.get();
  // First touch by the threads that read it (their NUMA node), and every page really mapped.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < words; ++i) p[i] = static_cast<uint64_t>(i);
  volatile uint64_t sink = SumWords(p, words, threads);  // warm-up; volatile keeps the sums
  double best = 1e300;
  for (int i = 0; i < tries; ++i) {
    const auto start = Clock::now();
    sink = SumWords(p, words, threads);
    best = std::min(best, MsSince(start));
  }
  (void)sink;
  return static_cast<double>(words * sizeof(uint64_t)) / (best * 1e6);
}

}  // namespace

StatusOr<MachinePeaks> MeasureMachinePeaks(const PeakOptions& options) {
  if (options.gemm_size < 16 || options.mem_bytes < 4096 || options.tries < 1 ||
      options.threads < 0) {
    return InvalidArgument(
        "machine peak: gemm size must be >= 16, memory >= 4 KiB, tries >= 1, threads >= 0 (got "
        "{}, {}, {}, {})",
        options.gemm_size, options.mem_bytes, options.tries, options.threads);
  }
  const auto start = Clock::now();
  MachinePeaks p;
  p.threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  p.gemm_size = options.gemm_size;
  p.mem_bytes = options.mem_bytes;
  // oneDNN's gemm runs on omp_get_max_threads() threads.
  const int saved = omp_get_max_threads();
  omp_set_num_threads(p.threads);
  StatusOr<double> fp32 = Fp32Gflops(options.gemm_size, options.tries);
  StatusOr<double> int8 = fp32.ok() ? Int8Gops(options.gemm_size, options.tries) : fp32;
  StatusOr<double> int8_matmul =
      int8.ok() ? Int8MatmulGops(options.gemm_size, options.tries) : int8;
  omp_set_num_threads(saved);
  if (!fp32.ok()) return fp32.status();
  if (!int8.ok()) return int8.status();
  if (!int8_matmul.ok()) return int8_matmul.status();
  p.fp32_gflops = *fp32;
  p.int8_gops = std::max(*int8, *int8_matmul);
  p.mem_read_gbps = MemReadGbps(options.mem_bytes, p.threads, std::max(1, options.tries - 2));
  p.measure_ms = MsSince(start);
  return p;
}

double PercentOfPeak(double achieved, double peak) {
  return peak > 0 ? 100.0 * achieved / peak : 0.0;
}

}  // namespace inferd::cpu
