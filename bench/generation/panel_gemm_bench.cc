// PanelGemm over the matrix products of one llama-110m decode step (12 layers of merged QKV,
// O, merged gate/up, down, then the LM head), weights too large for the caches, as in the model
// runner. Run by hand, never by ctest:
//   build/inferd_panel_gemm_bench [--rows 16] [--threads 2] [--steps 20] [--layers 12] [--head 1]
// Prints the median wall and CPU time per step and the GFLOP/s of the products.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "kernels/cpu/util/panel_gemm.h"

namespace {

double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Product {
  inferd::cpu::PanelWeights w;
  int64_t k, n;
};

}  // namespace

int main(int argc, char** argv) {
  int rows = 16, threads = 2, steps = 20, layers = 12;
  bool head = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows")) rows = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    // --layers 1 --head 0: one layer's 9 MB of weights, L3-resident (the kernel's ceiling).
    if (!std::strcmp(argv[i], "--layers")) layers = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--head")) head = std::atoi(argv[i + 1]) != 0;
  }
  omp_set_num_threads(threads);
  const int64_t shapes[][2] = {{768, 1280}, {768, 768}, {768, 3072}, {1536, 768}};
  std::vector<Product> products;
  std::vector<float> tmp;
  double flop = 0;
  auto add = [&](int64_t k, int64_t n) {
    tmp.assign(k * n, 0.f);
    for (int64_t i = 0; i < k * n; ++i) tmp[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f;
    products.push_back({});
    products.back().w.Pack(tmp.data(), k, n);
    products.back().k = k;
    products.back().n = n;
    flop += 2.0 * rows * k * n;
  };
  for (int l = 0; l < layers; ++l) {
    for (const auto& s : shapes) add(s[0], s[1]);
  }
  if (head) add(768, 32000);
  std::vector<float> a(rows * 1536, 0.5f), y(rows * 32000);
  std::vector<double> wall, cpu;
  for (int s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = CpuMs();
    for (const Product& p : products) inferd::cpu::PanelGemm(a.data(), rows, p.w, y.data());
    cpu.push_back(CpuMs() - c0);
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  const double w = wall[wall.size() / 2];
  std::printf("rows=%d threads=%d: %.2f ms/step wall (%.1f GFLOP/s), %.2f ms CPU, y0=%g\n", rows,
              threads, w, flop / w / 1e6, cpu[cpu.size() / 2], y[0]);
  return 0;
}
