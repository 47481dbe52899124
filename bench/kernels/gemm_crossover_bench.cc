// PanelGemm (util/panel_gemm.h) against oneDNN's matmul on the same row-major constant weights
// (as kernels/cpu/math/matmul.cc and fused/matmul.cc create it: plain [K, N] weights, plain
// A and Y), per row count M, at the weight shapes of BERT-base and of the 110M decoders: where
// the crossover lies on the CPU at hand (onednn/gemm_weights.h's kPanelGemmMaxRows). Weights are
// rotated over enough copies that they stream from memory at small M, as in a model. The two
// kernels alternate within each repetition; the table has the median per product. Run by hand:
//   build/inferd_gemm_crossover_bench [--threads 2] [--reps 5] [--rows 1,4,...] [--shapes
//   768x768,...]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/util/panel_gemm.h"

namespace {

using dnnl::memory;
using Clock = std::chrono::steady_clock;

std::vector<int64_t> ParseList(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',' || *p == 'x') ++p;
  }
  return v;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Shape {
  int64_t k, n;
};

// One (K, N) at every M: prints M, both medians, GFLOP/s and oneDNN / PanelGemm.
void RunShape(const Shape& s, const std::vector<int64_t>& rows_list, int reps) {
  // >= 96 MB of each layout (at most 16 copies): L3 cannot hold the weights of one pass.
  const int64_t bytes = s.k * s.n * 4;
  const int copies = static_cast<int>(std::clamp<int64_t>((96 << 20) / bytes + 1, 1, 16));
  std::vector<std::vector<float>> plain(copies, std::vector<float>(s.k * s.n));
  std::vector<inferd::cpu::PanelWeights> panels(copies);
  for (int c = 0; c < copies; ++c) {
    for (int64_t i = 0; i < s.k * s.n; ++i) plain[c][i] = float((i * 7919 + c) % 1000) * 1e-3f;
    panels[c].Pack(plain[c].data(), s.k, s.n);
  }
  dnnl::engine& eng = inferd::cpu::DnnlEngine();
  for (int64_t m : rows_list) {
    std::vector<float> a(m * s.k, 0.5f), y(m * s.n);
    const auto w_md = inferd::cpu::PlainDesc({s.k, s.n});
    dnnl::matmul::desc desc(inferd::cpu::PlainDesc({m, s.k}), w_md,
                            inferd::cpu::PlainDesc({m, s.n}));
    dnnl::matmul::primitive_desc pd(desc, eng);
    dnnl::matmul prim(pd);
    dnnl::stream st(eng);
    memory src(pd.src_desc(), eng, a.data()), dst(pd.dst_desc(), eng, y.data());
    std::vector<memory> w;
    for (int c = 0; c < copies; ++c) w.emplace_back(w_md, eng, plain[c].data());
    // Products per timed pass: every copy once, at least ~50 ms of work at 100 GFLOP/s.
    const int64_t per = std::max<int64_t>(copies, int64_t(5e9 / (2.0 * m * s.k * s.n)));
    auto time_pass = [&](bool panel) {
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < per; ++i) {
        const int c = static_cast<int>(i % copies);
        if (panel) {
          inferd::cpu::PanelGemm(a.data(), m, panels[c], y.data());
        } else {
          prim.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w[c]}, {DNNL_ARG_DST, dst}});
          st.wait();
        }
      }
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / per;
    };
    time_pass(true);  // warm both
    time_pass(false);
    std::vector<double> tp, to;
    for (int r = 0; r < reps; ++r) {
      tp.push_back(time_pass(true));
      to.push_back(time_pass(false));
    }
    const double p = Median(tp), o = Median(to), flop = 2.0 * m * s.k * s.n;
    std::printf("| %ldx%ld | %ld | %.1f | %.1f | %.1f | %.1f | %.2f |\n", long(s.k), long(s.n),
                long(m), p, o, flop / p * 1e-3, flop / o * 1e-3, o / p);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  std::vector<int64_t> rows = {1, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 2048};
  std::vector<int64_t> shape_list = {768,  768, 768,  3072, 3072, 768, 768,
                                     2304, 768, 1280, 1536, 768,  768, 32000};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rows")) rows = ParseList(argv[i + 1]);
    if (!std::strcmp(argv[i], "--shapes")) shape_list = ParseList(argv[i + 1]);
  }
  omp_set_num_threads(threads);
  {  // What oneDNN picks for `any` weights here (the kernels pass the plain layout on AVX2).
    dnnl::matmul::desc d(inferd::cpu::PlainDesc({64, 768}),
                         memory::desc({768, 768}, memory::data_type::f32, memory::format_tag::any),
                         inferd::cpu::PlainDesc({64, 768}));
    dnnl::matmul::primitive_desc pd(d, inferd::cpu::DnnlEngine());
    std::printf("oneDNN matmul: %s; 'any' weights are plain: %s; threads %d\n", pd.impl_info_str(),
                pd.weights_desc() == inferd::cpu::PlainDesc({768, 768}) ? "yes" : "no", threads);
  }
  std::printf(
      "| K x N | M | PanelGemm us | oneDNN us | PanelGemm GFLOP/s | oneDNN GFLOP/s | oneDNN / "
      "PanelGemm |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i + 1 < shape_list.size(); i += 2) {
    RunShape({shape_list[i], shape_list[i + 1]}, rows, reps);
  }
  return 0;
}
