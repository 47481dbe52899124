// The MatMulNBits decode kernel (kernels/cpu/quantization/nbits_gemm.h) over the products of one
// llama-110m decode step (12 layers of merged QKV, O, merged gate/up, down, then the LM head),
// random weights quantized as `inferd quantize` does, repacked as at load. Run by hand, never by
// ctest:
//   build/inferd_nbits_bench [--bits 4] [--group 32] [--asymmetric 0] [--rows 1] [--threads 2]
//                            [--steps 20] [--layers 12] [--head 1]
// Prints the median wall and CPU time per step and the GB/s of weight bytes streamed (the
// repacked codes, scales and offsets each product reads once) per wall and per CPU second.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/quantization/nbits_gemm.h"

namespace {

double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// One product's weights: the file layout (kept alive for the view) and its repacked copy.
struct Product {
  std::vector<uint8_t> data, zp;
  std::vector<float> scales;
  inferd::cpu::NBitsWeights view;
  std::unique_ptr<inferd::cpu::NBitsDecodeWeights> decode;
  int64_t bytes = 0;  // what one call streams
};

std::unique_ptr<Product> Make(int64_t n, int64_t k, int bits, int64_t group, bool asym,
                              std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  std::vector<float> w(n * k);
  for (float& x : w) x = dist(rng);
  auto p = std::make_unique<Product>();
  const int64_t groups = inferd::cpu::NBitsGroups(k, group);
  p->data.resize(n * inferd::cpu::NBitsRowBytes(bits, k));
  p->scales.resize(n * groups);
  if (asym) p->zp.resize(n * groups);
  inferd::cpu::QuantizeNBits(w.data(), n, k, bits, group, asym, p->data.data(), p->scales.data(),
                             asym ? p->zp.data() : nullptr);
  p->view = {bits, n, k, group, p->data.data(), p->scales.data(),
             asym ? p->zp.data() : nullptr};
  p->decode = std::make_unique<inferd::cpu::NBitsDecodeWeights>(p->view);
  const int64_t tiles = p->decode->tiles();
  p->bytes = tiles * p->decode->tile_bytes() + tiles * groups * 8 * 4 * (asym ? 2 : 1);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int bits = 4, rows = 1, threads = 2, steps = 20, layers = 12;
  int64_t group = 32;
  bool asym = false, head = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--bits")) bits = v;
    if (!std::strcmp(argv[i], "--group")) group = v;
    if (!std::strcmp(argv[i], "--asymmetric")) asym = v != 0;
    if (!std::strcmp(argv[i], "--rows")) rows = v;
    if (!std::strcmp(argv[i], "--threads")) threads = v;
    if (!std::strcmp(argv[i], "--steps")) steps = v;
    if (!std::strcmp(argv[i], "--layers")) layers = v;
    if (!std::strcmp(argv[i], "--head")) head = v != 0;
  }
  if ((bits != 4 && bits != 8) || (group != 32 && group != 64 && group != 128) || rows < 1 ||
      rows > inferd::cpu::kNBitsSmallM || threads < 1 || steps < 1 || layers < 0) {
    std::fprintf(stderr, "nbits_bench: bad arguments (bits 4|8, group 32|64|128, rows 1..%lld)\n",
                 static_cast<long long>(inferd::cpu::kNBitsSmallM));
    return 1;
  }
  omp_set_num_threads(threads);
  std::mt19937 rng(1);
  std::vector<std::unique_ptr<Product>> products;
  for (int l = 0; l < layers; ++l) {  // [N, K]: QKV, O, gate/up, down
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1280, 768}, {768, 768}, {3072, 768},
                        {768, 1536}}) {
      products.push_back(Make(n, k, bits, group, asym, rng));
    }
  }
  if (head) products.push_back(Make(32000, 768, bits, group, asym, rng));
  int64_t bytes = 0, kmax = 0, nmax = 0;
  for (const auto& p : products) {
    bytes += p->bytes;
    kmax = std::max(kmax, p->view.k);
    nmax = std::max(nmax, p->view.n);
  }
  std::vector<float> a(rows * kmax), y(rows * nmax);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& x : a) x = dist(rng);
  std::vector<double> wall, cpu;
  for (int s = 0; s < steps + 2; ++s) {  // 2 warm-up steps
    const double c0 = CpuMs();
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& p : products) {
      inferd::cpu::NBitsMatMul(a.data(), rows, p->view, p->decode.get(), y.data());
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s >= 2) {
      wall.push_back(ms);
      cpu.push_back(CpuMs() - c0);
    }
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  const double med = wall[wall.size() / 2], cpu_med = cpu[cpu.size() / 2];
  // Per CPU second as well: on a shared host the wall time holds the waits for a core.
  std::printf(
      "%d-bit group %lld %s, %d rows, %d threads, %zu products, %.1f MB per step: median %.3f ms "
      "(cpu %.3f ms), %.2f GB/s (%.2f GB/s per CPU second)\n",
      bits, static_cast<long long>(group), asym ? "asym" : "sym", rows, threads, products.size(),
      bytes / 1e6, med, cpu_med, bytes / med / 1e6, bytes / cpu_med / 1e6);
  return 0;
}
