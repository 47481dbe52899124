#include "kernels/cpu/onednn/bf16_choice.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {
namespace {

using dnnl::memory;

// One oneDNN primitive with its arguments allocated and zero-filled (zeros keep both types free of
// denormals and NaNs; the kernels' speed does not depend on the values).
struct Probe {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  template <typename Pd>
  Probe(dnnl::primitive p, const Pd& pd) : prim(std::move(p)) {
    for (const auto& [arg, md] : {std::pair{DNNL_ARG_SRC, pd.src_desc()},
                                  std::pair{DNNL_ARG_WEIGHTS, pd.weights_desc()},
                                  std::pair{DNNL_ARG_DST, pd.dst_desc()}}) {
      memory m(md, DnnlEngine());
      std::memset(m.get_data_handle(), 0, md.get_size());
      args.emplace(arg, m);
    }
  }
  double Run(dnnl::stream& s) {
    const auto t0 = std::chrono::steady_clock::now();
    prim.execute(s, args);
    s.wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

// f32 time / bf16 time: the median of 9 ratios of back-to-back runs (order alternating), after a
// warm-up of each, so a burst of other load hits one pair, not the decision.
double Speedup(Probe f32, Probe bf16) {
  dnnl::stream s(DnnlEngine());
  f32.Run(s);
  bf16.Run(s);
  std::vector<double> ratios;
  for (int i = 0; i < 9; ++i) {
    double f, b;
    if (i % 2 == 0) {
      f = f32.Run(s);
      b = bf16.Run(s);
    } else {
      b = bf16.Run(s);
      f = f32.Run(s);
    }
    ratios.push_back(f / b);
  }
  std::nth_element(ratios.begin(), ratios.begin() + 4, ratios.end());
  return ratios[4];
}

// BlockedConv's bf16 chain keeps its activations in bf16, so the probe's src and dst are bf16 too
// (0.4 GFLOP: a few ms on 2 cores).
Probe Conv(memory::data_type t) {
  const memory::desc src({4, 256, 56, 56}, t, memory::format_tag::any),
      w({64, 256, 1, 1}, t, memory::format_tag::any),
      dst({4, 64, 56, 56}, t, memory::format_tag::any);
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::convolution_direct, src, w, dst, {1, 1},
                                          {0, 0}, {0, 0});
  const dnnl::convolution_forward::primitive_desc pd(d, DnnlEngine());
  return Probe(dnnl::convolution_forward(pd), pd);
}

// FusedMatMul in bf16 reads bf16 A and B and writes FP32 (0.6 GFLOP).
Probe MatMul(memory::data_type t) {
  const memory::desc a({128, 768}, t, memory::format_tag::ab),
      b({768, 3072}, t, memory::format_tag::any),
      c({128, 3072}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::desc d(a, b, c);
  const dnnl::matmul::primitive_desc pd(d, DnnlEngine());
  return Probe(dnnl::matmul(pd), pd);
}

Bf16Choice Measure() {
  const char* env = std::getenv("INFERD_BF16_COMPUTE");
  const std::string_view mode = env == nullptr ? "" : env;
  const bool native = DnnlHasNativeBf16();
  double conv = 0, matmul = 0;
  if (native && (mode.empty() || mode == "auto" || (mode != "on" && mode != "off"))) {
    try {
      conv = Speedup(Conv(memory::data_type::f32), Conv(memory::data_type::bf16));
      matmul = Speedup(MatMul(memory::data_type::f32), MatMul(memory::data_type::bf16));
    } catch (const dnnl::error& e) {
      // No bf16 primitive after all: FP32 (speedups stay 0).
      spdlog::warn("bf16 probe failed ({}): bf16 layers compute in FP32", e.what());
      conv = matmul = 0;
    }
  }
  Bf16Choice c = DecideBf16(native, mode, conv, matmul);
  spdlog::info("bf16 compute: {}", c.reason);
  return c;
}

}  // namespace

Bf16Choice DecideBf16(bool native, std::string_view env, double conv_speedup,
                      double matmul_speedup) {
  Bf16Choice c;
  if (!native) {
    c.reason = "this CPU has no native bf16: bf16 layers compute in FP32 from their widened weights";
    return c;
  }
  if (env == "on" || env == "off") {
    c.conv = c.matmul = env == "on";
    c.reason = fmt::format("INFERD_BF16_COMPUTE={}: bf16 layers compute in {}", env,
                           env == "on" ? "bf16" : "FP32 from their widened weights");
    return c;
  }
  c.conv_speedup = conv_speedup;
  c.matmul_speedup = matmul_speedup;
  c.conv = conv_speedup >= kBf16MinSpeedup;
  c.matmul = matmul_speedup >= kBf16MinSpeedup;
  auto side = [](const char* what, bool on, double x) {
    return fmt::format("{} {} (bf16 measured {:.2f}x FP32)", what, on ? "in bf16" : "in FP32", x);
  };
  c.reason = fmt::format(
      "{}{}, {}; bf16 compute where it is at least {}x FP32 (INFERD_BF16_COMPUTE=on|off forces)",
      env.empty() || env == "auto" ? "" : fmt::format("INFERD_BF16_COMPUTE={} unknown, auto: ", env),
      side("convolutions", c.conv, conv_speedup), side("matmuls", c.matmul, matmul_speedup),
      kBf16MinSpeedup);
  return c;
}

const Bf16Choice& Bf16ComputeChoice() {
  static const Bf16Choice choice = Measure();
  return choice;
}

}  // namespace inferd::cpu
