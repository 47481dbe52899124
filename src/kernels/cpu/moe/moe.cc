// ai.inferd.MoE (moe.h): routing, tokens grouped by expert, PanelGemm products per expert.
#include "kernels/cpu/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

constexpr int64_t kPanel = PanelWeights::kPanel;
constexpr int64_t kParallelRows = 128;  // token x expert rows from which every phase is parallel

// Which experts each token goes to, and the expert-ordered rows the products run on.
struct Routing {
  int64_t k = 0;
  std::vector<int32_t> expert;   // [t * k]: token's j-th expert, best first
  std::vector<float> weight;     // [t * k]: its weight
  std::vector<int64_t> row;      // [t * k]: its row in the expert-ordered buffers
  std::vector<int64_t> offset;   // [E + 1]: expert e's rows are offset[e] .. offset[e + 1) - 1
  std::vector<int64_t> token;    // [t * k]: the token of each expert-ordered row
};

// Softmax over one token's logits, the top k (ties: lower index; a NaN never wins a comparison,
// so k distinct experts are always chosen), renormalized when `normalize`.
void RouteToken(const float* logits, int64_t e, int64_t k, bool normalize, int32_t* chosen,
                float* weights) {
  float m = logits[0];
  for (int64_t i = 1; i < e; ++i) m = std::max(m, logits[i]);
  std::vector<float> p(e);
  float sum = 0;
  for (int64_t i = 0; i < e; ++i) sum += p[i] = std::exp(logits[i] - m);
  for (int64_t i = 0; i < e; ++i) p[i] /= sum;
  std::vector<bool> taken(e, false);
  float top_sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = 0;
    while (taken[best]) ++best;
    for (int64_t i = best + 1; i < e; ++i) {
      if (!taken[i] && p[i] > p[best]) best = i;
    }
    taken[best] = true;
    chosen[j] = static_cast<int32_t>(best);
    weights[j] = p[best];
    top_sum += p[best];
  }
  if (normalize) {
    for (int64_t j = 0; j < k; ++j) weights[j] /= top_sum;
  }
}

Routing Route(const float* logits, int64_t t, int64_t e, int64_t k, bool normalize) {
  Routing r;
  r.k = k;
  r.expert.resize(t * k);
  r.weight.resize(t * k);
  for (int64_t i = 0; i < t; ++i) {
    RouteToken(logits + i * e, e, k, normalize, &r.expert[i * k], &r.weight[i * k]);
  }
  r.offset.assign(e + 1, 0);
  for (int32_t x : r.expert) ++r.offset[x + 1];
  for (int64_t i = 0; i < e; ++i) r.offset[i + 1] += r.offset[i];
  std::vector<int64_t> next(r.offset.begin(), r.offset.end() - 1);
  r.row.resize(t * k);
  r.token.resize(t * k);
  for (int64_t i = 0; i < t * k; ++i) {  // token order within an expert
    const int64_t row = next[r.expert[i]]++;
    r.row[i] = row;
    r.token[row] = i / k;
  }
  return r;
}

inline float SiLU(float x) {  // x * sigmoid(x), sigmoid from e^-|x| (never overflows)
  const float e = std::exp(-std::fabs(x));
  return x * (x < 0.f ? e / (1.f + e) : 1.f / (1.f + e));
}

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

std::vector<Item> Items(const Routing& r, int64_t experts, int64_t panels) {
  std::vector<Item> items;
  for (int64_t e = 0; e < experts; ++e) {
    if (r.offset[e + 1] == r.offset[e]) continue;  // no token: its weights are not read
    for (int64_t p = 0; p < panels; ++p) items.push_back({e, p});
  }
  return items;
}

// g [rows, I] = SiLU(a · gate[e]) ⊙ (a · up[e]) for each expert's rows of a [rows, H]; u is
// scratch of g's size.
void GateUp(const MoeWeights& w, const Routing& r, const float* a, float* g, float* u) {
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
void Down(const MoeWeights& w, const Routing& r, const float* g, float* d) {
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
  // Uninitialized scratch (every element is written before it is read): router logits, the
  // gathered rows, the gate and up products, the down products.
  std::unique_ptr<float[]> buf(new float[t * e + rows * (2 * h + 2 * n)]);
  float* logits = buf.get();
  float* a = logits + t * e;
  float* g = a + rows * h;
  float* u = g + rows * n;
  float* d = u + rows * n;
  // Decode-sized steps run the small parts (router product, gather, weighted sum: ~T·H·E and
  // T·k·H operations) on the calling thread: an OpenMP region costs more than they do, and more
  // still on a loaded host where every barrier waits for a descheduled thread.
  const bool small = t * k < kParallelRows;
  if (small) {
    for (int64_t p = 0; p < w.router.num_panels(); ++p) {
      PanelGemmPanel(x, t, h, w.router.panel(p), std::min(kPanel, e - p * kPanel),
                     logits + p * kPanel, e);
    }
  } else {
    PanelGemm(x, t, w.router, logits);
  }
  const Routing r = Route(logits, t, e, k, normalize);
  if (counts) {
    for (int64_t i = 0; i < e; ++i) counts[i] = r.offset[i + 1] - r.offset[i];
  }
  auto loop = [&](int64_t count, auto&& fn) {
    if (small) {
      fn(int64_t{0}, count);
    } else {
      ParallelFor(count, std::max<int64_t>(1, 4096 / h), fn);
    }
  };
  loop(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      std::copy_n(x + r.token[row] * h, h, a + row * h);
    }
  });
  GateUp(w, r, a, g, u);
  Down(w, r, g, d);
  // The weighted sum of each token's expert rows, best expert first: the same order whatever
  // else is in the batch.
  loop(t, [&](int64_t t0, int64_t t1) {
    for (int64_t tok = t0; tok < t1; ++tok) {
      float* dst = y + tok * h;
      for (int64_t j = 0; j < k; ++j) {
        const float wj = r.weight[tok * k + j];
        const float* src = d + r.row[tok * k + j] * h;
        if (j == 0) {
          for (int64_t c = 0; c < h; ++c) dst[c] = wj * src[c];
        } else {
          for (int64_t c = 0; c < h; ++c) dst[c] += wj * src[c];
        }
      }
    }
  });
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
    const int64_t top_k = node.GetInt("top_k", 2), normalize = node.GetInt("normalize", 1);
    if (top_k < 1 || top_k > e) {
      return InvalidArgument("{}: top_k {} outside 1..{} (the number of experts)",
                             node.Describe(), top_k, e);
    }
    if (normalize != 0 && normalize != 1) {
      return InvalidArgument("{}: normalize must be 0 or 1, got {}", node.Describe(), normalize);
    }
    top_k_ = static_cast<int>(top_k);
    normalize_ = normalize == 1;
    PackMoeWeights(router->data<float>(), gate->data<float>(), info.ConstantInput(3)->data<float>(),
                   info.ConstantInput(4)->data<float>(), h, n, e, &w_);
    for (size_t i = 1; i <= 4; ++i) info.ReleaseConstantInput(i);  // one copy: the packed one
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.Input(0);
    if (!x || x->dtype() != DataType::kFloat32 || x->rank() < 1 ||
        x->shape().back() != w_.hidden) {
      return InvalidArgument("{}: X must be float32 [..., {}], got {}", node.Describe(),
                             w_.hidden, x ? x->DebugString() : "nothing");
    }
    Tensor* y = ctx.AllocateOutputUninitialized(0, DataType::kFloat32, x->shape());
    int64_t* counts = nullptr;
    if (ctx.OutputRequested(1)) {
      counts = ctx.AllocateOutput(1, DataType::kInt64, {w_.experts})->data<int64_t>();
    }
    MoeForward(x->data<float>(), x->NumElements() / w_.hidden, w_, top_k_, normalize_,
               y->data<float>(), counts);
    return Status::Ok();
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
}

}  // namespace inferd::cpu
