// ai.inferd.MoE (moe.h): PanelGemm products per expert over the rows routing grouped
// (moe_routing.h).
#include "kernels/cpu/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/moe/moe_nbits.h"
#include "kernels/cpu/moe/moe_routing.h"
#include "kernels/cpu/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

constexpr int64_t kPanel = PanelWeights::kPanel;

// The products of one expert's rows with one [K, 16] panel: y[:, 0..cols) (row stride ldy) =
// a [m, k] · panel. PanelGemm's tile order (K in blocks of 256, rows in tiles of at most 6, each
// element summed k by k within a block, the blocks added in order), so a row's result does not
// depend on m; unlike PanelGemmPanel the first row tile of each block prefetches the panel
// 2 KB ahead (into the next block, and past the panel's end into the next panel of the same
// expert, which follows it in memory): at the 2-6 rows per expert of a decode step the products
// stream their weights from memory and the hardware prefetcher alone keeps too few lines in
// flight.
typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4), may_alias));
constexpr int64_t kKBlock = 256, kMaxRows = 6, kAhead = 32;  // kAhead: lines of 64 bytes

inline V8 Load8(const float* p) { return *reinterpret_cast<const V8u*>(p); }
inline void Store8(float* p, V8 v) { *reinterpret_cast<V8u*>(p) = v; }

template <int MR>
void StreamTile(const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc,
                bool accumulate, bool prefetch) {
  V8 acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = V8{};
  for (int64_t k = 0; k < kc; ++k) {
    if (prefetch) __builtin_prefetch(b + (k + kAhead) * kPanel, 0, 2);
    const V8 b0 = Load8(b + k * kPanel), b1 = Load8(b + k * kPanel + 8);
    for (int r = 0; r < MR; ++r) {
      const float av = a[r * lda + k];
      acc[r][0] += av * b0;
      acc[r][1] += av * b1;
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* dst = c + r * ldc;
    V8 v0 = acc[r][0], v1 = acc[r][1];
    if (accumulate) {
      v0 = Load8(dst) + v0;
      v1 = Load8(dst + 8) + v1;
    }
    Store8(dst, v0);
    Store8(dst + 8, v1);
  }
}

void RunStreamTile(int mr, const float* a, int64_t lda, const float* b, int64_t kc, float* c,
                   int64_t ldc, bool accumulate, bool prefetch) {
  switch (mr) {
    case 1: return StreamTile<1>(a, lda, b, kc, c, ldc, accumulate, prefetch);
    case 2: return StreamTile<2>(a, lda, b, kc, c, ldc, accumulate, prefetch);
    case 3: return StreamTile<3>(a, lda, b, kc, c, ldc, accumulate, prefetch);
    case 4: return StreamTile<4>(a, lda, b, kc, c, ldc, accumulate, prefetch);
    case 5: return StreamTile<5>(a, lda, b, kc, c, ldc, accumulate, prefetch);
    default: return StreamTile<6>(a, lda, b, kc, c, ldc, accumulate, prefetch);
  }
}

void ExpertPanel(const float* a, int64_t m, int64_t k, const float* panel, int64_t cols,
                 float* y, int64_t ldy) {
  const int64_t tiles = (m + kMaxRows - 1) / kMaxRows;
  auto begin = [&](int64_t i) { return m * i / tiles; };  // balanced tiles, as PanelGemm's
  if (cols == kPanel) {
    for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {
      const int64_t kc = std::min(kKBlock, k - k0);
      for (int64_t i = 0; i < tiles; ++i) {
        const int64_t row = begin(i);
        RunStreamTile(static_cast<int>(begin(i + 1) - row), a + row * k + k0, k,
                      panel + k0 * kPanel, kc, y + row * ldy, ldy, k0 > 0, i == 0);
      }
    }
    return;
  }
  alignas(64) float tmp[kMaxRows * kPanel];
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t row = begin(i), mr = begin(i + 1) - row;
    for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {
      RunStreamTile(static_cast<int>(mr), a + row * k + k0, k, panel + k0 * kPanel,
                    std::min(kKBlock, k - k0), tmp, kPanel, k0 > 0, true);
    }
    for (int64_t r = 0; r < mr; ++r) std::memcpy(y + (row + r) * ldy, tmp + r * kPanel, cols * 4);
  }
}

// One unit of work of a product phase: expert e's rows against its panel p.
struct Item {
  int64_t expert, panel;
};

// Starts loading the first lines of a panel (4 KB) into L2 while the current item computes: the
// hardware prefetcher then finds a running stream instead of a cold start at every panel.
inline void PrefetchPanel(const float* panel) {
  for (int64_t line = 0; line < 64; ++line) __builtin_prefetch(panel + line * kPanel, 0, 2);
}

std::vector<Item> Items(const MoeRouting& r, int64_t experts, int64_t panels) {
  std::vector<Item> items;
  for (int64_t e = 0; e < experts; ++e) {
    if (r.rows(e) == 0) continue;  // no token: its weights are not read
    for (int64_t p = 0; p < panels; ++p) items.push_back({e, p});
  }
  return items;
}

// g [rows, I] = SiLU(a · gate[e]) ⊙ (a · up[e]) for each expert's rows of a [rows, H]; u is
// scratch of g's size.
void GateUp(const MoeWeights& w, const MoeRouting& r, const float* a, float* g, float* u) {
  const int64_t h = w.hidden, n = w.inter;
  const std::vector<Item> items = Items(r, w.experts, (n + kPanel - 1) / kPanel);
  ParallelFor(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t e = items[i].expert, c0 = items[i].panel * kPanel;
      const int64_t r0 = r.offset[e], m = r.offset[e + 1] - r0, cols = std::min(kPanel, n - c0);
      const float* ae = a + r0 * h;
      float* ge = g + r0 * n + c0;
      float* ue = u + r0 * n + c0;
      if (i + 1 < i1) {
        PrefetchPanel(w.gate[items[i + 1].expert].panel(items[i + 1].panel));
        PrefetchPanel(w.up[items[i + 1].expert].panel(items[i + 1].panel));
      }
      ExpertPanel(ae, m, h, w.gate[e].panel(items[i].panel), cols, ge, n);
      ExpertPanel(ae, m, h, w.up[e].panel(items[i].panel), cols, ue, n);
      for (int64_t row = 0; row < m; ++row) {
        for (int64_t c = 0; c < cols; ++c) ge[row * n + c] = SiLU(ge[row * n + c]) * ue[row * n + c];
      }
    }
  });
}

// d [rows, H] = g · down[e] for each expert's rows of g [rows, I].
void Down(const MoeWeights& w, const MoeRouting& r, const float* g, float* d) {
  const int64_t h = w.hidden, n = w.inter;
  const std::vector<Item> items = Items(r, w.experts, (h + kPanel - 1) / kPanel);
  ParallelFor(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t e = items[i].expert, c0 = items[i].panel * kPanel;
      const int64_t r0 = r.offset[e], m = r.offset[e + 1] - r0, cols = std::min(kPanel, h - c0);
      if (i + 1 < i1) PrefetchPanel(w.down[items[i + 1].expert].panel(items[i + 1].panel));
      ExpertPanel(g + r0 * n, m, n, w.down[e].panel(items[i].panel), cols, d + r0 * h + c0, h);
    }
  });
}

}  // namespace

void PackMoeWeights(const float* router, const float* gate, const float* up, const float* down,
                    int64_t h, int64_t i, int64_t e, MoeWeights* w) {
  w->hidden = h;
  w->inter = i;
  w->experts = e;
  w->router.Pack(router, h, e);
  w->gate.resize(e);
  w->up.resize(e);
  w->down.resize(e);
  for (int64_t x = 0; x < e; ++x) {
    w->gate[x].Pack(gate + x * h * i, h, i);
    w->up[x].Pack(up + x * h * i, h, i);
    w->down[x].Pack(down + x * i * h, i, h);
  }
}

void MoeForward(const float* x, int64_t t, const MoeWeights& w, int top_k, bool normalize,
                float* y, int64_t* counts) {
  const int64_t h = w.hidden, n = w.inter, e = w.experts, k = top_k;
  if (counts) std::fill_n(counts, e, int64_t{0});
  if (t <= 0) return;
  const int64_t rows = t * k;
  const bool small = rows < kMoeParallelRows;
  const MoeRouting r = RouteTokens(x, t, w.router, top_k, normalize, small, counts);
  // Uninitialized scratch (every element is written before it is read): the gathered rows, the
  // gate and up products, the down products.
  std::unique_ptr<float[]> buf(new float[rows * (2 * h + 2 * n)]);
  float* a = buf.get();
  float* g = a + rows * h;
  float* u = g + rows * n;
  float* d = u + rows * n;
  auto gather = [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) std::copy_n(x + r.token[row] * h, h, a + row * h);
  };
  if (small) {
    gather(0, rows);
  } else {
    ParallelFor(rows, std::max<int64_t>(1, 4096 / h), gather);
  }
  GateUp(w, r, a, g, u);
  Down(w, r, g, d);
  CombineExpertRows(r, d, t, h, small, y);
}

namespace {

// Checks one weight input: a constant float32 tensor of `want` shape.
Status CheckWeight(const KernelInfo& info, size_t i, const char* what, const Shape& want) {
  const Node& node = info.node();
  const Tensor* t = info.ConstantInput(i);
  if (t == nullptr) {
    return InvalidArgument("{}: {} (input {}) must be an initializer (constant weights)",
                           node.Describe(), what, i);
  }
  if (t->dtype() != DataType::kFloat32 || t->shape() != want) {
    return InvalidArgument("{}: {} must be float32 {}, got {}", node.Describe(), what,
                           ShapeToString(want), t->DebugString());
  }
  return Status::Ok();
}

class MoeKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    if (info.NumInputs() != 5) {
      return InvalidArgument("{}: needs 5 inputs (X, router, gate, up, down), got {}",
                             node.Describe(), info.NumInputs());
    }
    const Tensor* router = info.ConstantInput(1);
    const Tensor* gate = info.ConstantInput(2);
    if (!router || router->rank() != 2 || !gate || gate->rank() != 3) {
      return InvalidArgument(
          "{}: router must be a constant [H, E] and gate a constant [E, H, I] (got {} and {})",
          node.Describe(), router ? router->DebugString() : "a run-time input",
          gate ? gate->DebugString() : "a run-time input");
    }
    const int64_t h = router->dim(0), e = router->dim(1), n = gate->dim(2);
    if (h < 1 || e < 1 || n < 1) {
      return InvalidArgument("{}: empty router or experts ({}, {})", node.Describe(),
                             router->DebugString(), gate->DebugString());
    }
    RETURN_IF_ERROR(CheckWeight(info, 1, "router", {h, e}));
    RETURN_IF_ERROR(CheckWeight(info, 2, "gate", {e, h, n}));
    RETURN_IF_ERROR(CheckWeight(info, 3, "up", {e, h, n}));
    RETURN_IF_ERROR(CheckWeight(info, 4, "down", {e, n, h}));
    RETURN_IF_ERROR(ParseMoeAttributes(node, e, &top_k_, &normalize_));
    PackMoeWeights(router->data<float>(), gate->data<float>(), info.ConstantInput(3)->data<float>(),
                   info.ConstantInput(4)->data<float>(), h, n, e, &w_);
    for (size_t i = 1; i <= 4; ++i) info.ReleaseConstantInput(i);  // one copy: the packed one
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    return ComputeMoe(ctx, w_.hidden, w_.experts,
                      [&](const float* x, int64_t tokens, float* y, int64_t* counts) {
                        MoeForward(x, tokens, w_, top_k_, normalize_, y, counts);
                      });
  }

 private:
  MoeWeights w_;
  int top_k_ = 2;
  bool normalize_ = true;
};

}  // namespace

void RegisterMoeKernels(KernelRegistry& r) {
  KernelDef def;
  def.domain = kInferdDomain;
  def.op_type = "MoE";
  def.types = {DataType::kFloat32};
  def.factory = MakeKernel<MoeKernel>();
  r.Register(std::move(def));
  RegisterMoeNBitsKernel(r);
}

}  // namespace inferd::cpu
