// ai.inferd.MoENBits (moe_nbits.h): the decode micro-kernels of MatMulNBits per expert over the
// rows routing grouped (moe_routing.h).
#include "kernels/cpu/moe/moe_nbits.h"

#include <algorithm>
#include <memory>

#include "kernels/cpu/fused/register.h"
#include "kernels/cpu/moe/moe_routing.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

constexpr int64_t kTile = NBitsDecodeWeights::kTile;
// Tiles (of 8 weight rows) per work item: 32 output columns, 12-48 KB of an expert's codes at
// H = 768, enough items for the threads (8 experts x 24 per phase at I = 768) and few calls.
constexpr int64_t kItemTiles = 4;

// One unit of work of a product phase: expert e's rows against its tiles [t0, t1).
struct Item {
  int64_t expert, t0, t1;
};

// The items over each expert that has rows (an expert no token chose is not read).
std::vector<Item> Items(const MoeRouting& r, int64_t experts, int64_t tiles) {
  std::vector<Item> items;
  for (int64_t e = 0; e < experts; ++e) {
    if (r.rows(e) == 0) continue;
    for (int64_t t = 0; t < tiles; t += kItemTiles) {
      items.push_back({e, t, std::min(tiles, t + kItemTiles)});
    }
  }
  return items;
}

// g [rows, I] = SiLU(a · gate[e]) ⊙ (a · up[e]) over each expert's rows (a: the quantized rows of
// X in expert order); u is scratch of g's size.
void GateUp(const MoeNBitsWeights& w, const MoeRouting& r, const NBitsQuantizedRow* a, float* g,
            float* u) {
  const int64_t n = w.inter;
  const std::vector<Item> items = Items(r, w.experts, (n + kTile - 1) / kTile);
  ParallelFor(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const Item& it = items[i];
      const int64_t r0 = r.offset[it.expert], m = r.rows(it.expert);
      NBitsDecodeTiles(w.gate[it.expert], it.t0, it.t1, a + r0, m, g + r0 * n, n);
      NBitsDecodeTiles(w.up[it.expert], it.t0, it.t1, a + r0, m, u + r0 * n, n);
      const int64_t c0 = it.t0 * kTile, c1 = std::min(n, it.t1 * kTile);
      for (int64_t row = r0; row < r0 + m; ++row) {
        float* gr = g + row * n;
        const float* ur = u + row * n;
        for (int64_t c = c0; c < c1; ++c) gr[c] = SiLU(gr[c]) * ur[c];
      }
    }
  });
}

// d [rows, H] = g · down[e] over each expert's rows (g: quantized, in expert order).
void Down(const MoeNBitsWeights& w, const MoeRouting& r, const NBitsQuantizedRow* g, float* d) {
  const int64_t h = w.hidden;
  const std::vector<Item> items = Items(r, w.experts, (h + kTile - 1) / kTile);
  ParallelFor(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const Item& it = items[i];
      const int64_t r0 = r.offset[it.expert];
      NBitsDecodeTiles(w.down[it.expert], it.t0, it.t1, g + r0, r.rows(it.expert), d + r0 * h, h);
    }
  });
}

}  // namespace

void PackMoeNBitsWeights(const float* router, int64_t h, const std::vector<MoeNBitsExpert>& experts,
                         MoeNBitsWeights* w) {
  const int64_t e = static_cast<int64_t>(experts.size());
  w->hidden = h;
  w->inter = experts.empty() ? 0 : experts[0].gate.n;
  w->experts = e;
  w->router.Pack(router, h, e);
  w->gate.clear();
  w->up.clear();
  w->down.clear();
  for (const MoeNBitsExpert& x : experts) {
    w->gate.emplace_back(x.gate);
    w->up.emplace_back(x.up);
    w->down.emplace_back(x.down);
  }
}

void MoeNBitsForward(const float* x, int64_t t, const MoeNBitsWeights& w, int top_k, bool normalize,
                     float* y, int64_t* counts) {
  const int64_t h = w.hidden, n = w.inter, e = w.experts, k = top_k;
  if (counts) std::fill_n(counts, e, int64_t{0});
  if (t <= 0) return;
  const int64_t rows = t * k;
  const bool small = rows < kMoeParallelRows;
  const MoeRouting r = RouteTokens(x, t, w.router, top_k, normalize, small, counts);
  const NBitsDecodeWeights& first = w.gate[0];
  // Each token quantized once; its k expert rows point at it (no gather of float rows).
  NBitsActivations xq, gq;
  xq.Quantize(x, t, h, h, first.bits(), first.group(), !small);
  std::vector<NBitsQuantizedRow> a(rows);
  for (int64_t row = 0; row < rows; ++row) a[row] = xq.row(r.token[row]);
  // Uninitialized scratch (every element is written before it is read): the gate and up
  // products, the down products.
  std::unique_ptr<float[]> buf(new float[rows * (2 * n + h)]);
  float* g = buf.get();
  float* u = g + rows * n;
  float* d = u + rows * n;
  GateUp(w, r, a.data(), g, u);
  gq.Quantize(g, rows, n, n, first.bits(), first.group(), !small);
  for (int64_t row = 0; row < rows; ++row) a[row] = gq.row(row);
  Down(w, r, a.data(), d);
  CombineExpertRows(r, d, t, h, small, y);
}

namespace {

struct Attrs {
  int64_t bits = 0, block = 0;
};

// Input i must be a constant of `dtype` and shape `want`.
StatusOr<const Tensor*> Constant(const KernelInfo& info, size_t i, const char* what, DataType dtype,
                                 const Shape& want, const Attrs& a) {
  const Node& node = info.node();
  const Tensor* t = info.ConstantInput(i);
  if (t == nullptr) {
    return InvalidArgument("{}: {} (input {}) must be an initializer (constant weights)",
                           node.Describe(), what, i);
  }
  if (t->dtype() != dtype || t->shape() != want) {
    return InvalidArgument("{}: {} must be {} {} ({} bits, block_size {}), got {}", node.Describe(),
                           what, DataTypeName(dtype), ShapeToString(want), a.bits, a.block,
                           t->DebugString());
  }
  return t;
}

class MoeNBitsKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    Attrs a{node.GetInt("bits", 0), node.GetInt("block_size", 0)};
    if (a.bits != 4 && a.bits != 8) {
      return InvalidArgument("{}: bits must be 4 or 8, got {}", node.Describe(), a.bits);
    }
    if (a.block != 32 && a.block != 64 && a.block != 128) {
      return InvalidArgument("{}: block_size must be 32, 64 or 128, got {}", node.Describe(),
                             a.block);
    }
    const size_t inputs = info.NumInputs();
    const bool zp = inputs == 11 && node.HasInput(8) && node.HasInput(9) && node.HasInput(10);
    if (inputs != 8 && !zp) {
      return InvalidArgument(
          "{}: needs 8 inputs (X, router, gate, gate_scales, up, up_scales, down, down_scales) "
          "or 11 (and the zero points of gate, up and down, all three), got {}",
          node.Describe(), inputs);
    }
    const Tensor* router = info.ConstantInput(1);
    const Tensor* gate = info.ConstantInput(2);
    if (!router || router->rank() != 2 || !gate || gate->rank() != 3) {
      return InvalidArgument(
          "{}: router must be a constant [H, E] and gate a constant [E, I, packed H] (got {} and "
          "{})",
          node.Describe(), router ? router->DebugString() : "a run-time input",
          gate ? gate->DebugString() : "a run-time input");
    }
    const int64_t h = router->dim(0), e = router->dim(1), n = gate->dim(1);
    if (h < 1 || e < 1 || n < 1) {
      return InvalidArgument("{}: empty router or experts ({}, {})", node.Describe(),
                             router->DebugString(), gate->DebugString());
    }
    const int bits = static_cast<int>(a.bits);
    const DataType code = bits == 4 ? DataType::kUInt8 : DataType::kInt8;
    const Shape in_codes{e, n, NBitsRowBytes(bits, h)}, in_scales{e, n, NBitsGroups(h, a.block)};
    const Shape out_codes{e, h, NBitsRowBytes(bits, n)}, out_scales{e, h, NBitsGroups(n, a.block)};
    RETURN_IF_ERROR(Constant(info, 1, "router", DataType::kFloat32, {h, e}, a).status());
    struct Matrix {
      const char* name;
      size_t codes, scales, zero_points;
      const Shape &codes_shape, &scales_shape;
    };
    const Matrix matrices[3] = {{"gate", 2, 3, 8, in_codes, in_scales},
                                {"up", 4, 5, 9, in_codes, in_scales},
                                {"down", 6, 7, 10, out_codes, out_scales}};
    const Tensor* t[3][3] = {};  // [matrix][codes, scales, zero points]
    for (int m = 0; m < 3; ++m) {
      const Matrix& x = matrices[m];
      const std::string name = x.name;
      ASSIGN_OR_RETURN(t[m][0], Constant(info, x.codes, name.c_str(), code, x.codes_shape, a));
      ASSIGN_OR_RETURN(t[m][1], Constant(info, x.scales, (name + "_scales").c_str(),
                                         DataType::kFloat32, x.scales_shape, a));
      if (zp) {
        ASSIGN_OR_RETURN(t[m][2], Constant(info, x.zero_points, (name + "_zero_points").c_str(),
                                           code, x.scales_shape, a));
      }
    }
    RETURN_IF_ERROR(ParseMoeAttributes(node, e, &top_k_, &normalize_));
    auto view = [&](int m, int64_t expert, int64_t rows, int64_t k) {
      const int64_t groups = NBitsGroups(k, a.block);
      NBitsWeights v;
      v.bits = bits;
      v.n = rows;
      v.k = k;
      v.group = a.block;
      v.data =
          static_cast<const uint8_t*>(t[m][0]->raw_data()) + expert * rows * NBitsRowBytes(bits, k);
      v.scales = t[m][1]->data<float>() + expert * rows * groups;
      if (zp)
        v.zero_points = static_cast<const uint8_t*>(t[m][2]->raw_data()) + expert * rows * groups;
      return v;
    };
    std::vector<MoeNBitsExpert> experts(e);
    for (int64_t x = 0; x < e; ++x) {
      experts[x] = {view(0, x, n, h), view(1, x, n, h), view(2, x, h, n)};
    }
    PackMoeNBitsWeights(router->data<float>(), h, experts, &w_);
    for (size_t i = 1; i < inputs; ++i) info.ReleaseConstantInput(i);  // one copy: the repacked
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    return ComputeMoe(ctx, w_.hidden, w_.experts,
                      [&](const float* x, int64_t tokens, float* y, int64_t* counts) {
                        MoeNBitsForward(x, tokens, w_, top_k_, normalize_, y, counts);
                      });
  }

 private:
  MoeNBitsWeights w_;
  int top_k_ = 2;
  bool normalize_ = true;
};

}  // namespace

void RegisterMoeNBitsKernel(KernelRegistry& r) {
  KernelDef def;
  def.domain = kInferdDomain;
  def.op_type = "MoENBits";
  def.types = {DataType::kFloat32};
  def.factory = MakeKernel<MoeNBitsKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
