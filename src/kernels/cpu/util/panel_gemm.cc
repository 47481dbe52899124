#include "kernels/cpu/util/panel_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/util/kernel_util.h"
#include "kernels/cpu/util/vec8.h"

namespace inferd::cpu {
namespace {

// V8, Load, Store: util/vec8.h (GCC/clang vector extensions).
constexpr int64_t kPanel = PanelWeights::kPanel;
constexpr int64_t kKBlock = 256;  // 256 x 16 floats = 16 KB of a panel, kept in L1 per K block
constexpr int kMaxRows = 6;       // 6 rows x 2 vectors = 12 accumulators of the 16 ymm registers

// One K block of a tile: MR rows x NP panels (2 vectors each). `b` is the first panel at the
// block's first row, the next panels `b_stride` floats on; `c` the tile's output, `ldc` its row
// stride. accumulate: add to what c holds (the earlier K blocks). bias/res (null: none) are
// added on the last block, res rows `ldr` apart. Every element is summed k by k in order and
// stored as ((c + block) + bias) + res, whatever MR and NP are.
struct TileArgs {
  int64_t kc;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t b_stride;
  float* c;
  int64_t ldc;
  bool accumulate;
  const float* bias;
  const float* res;
  int64_t ldr;
  // Lines to prefetch (null: none): the tile's share of the next K block, one 64-byte line (a
  // [1, 16] panel row) per k step for its first pf_lines steps.
  const float* pf = nullptr;
  int64_t pf_lines = 0;
};

template <int MR, int NP>
void Tile(const TileArgs& t) {
  V8 acc[MR][2 * NP];
  for (int r = 0; r < MR; ++r) {
    for (int q = 0; q < 2 * NP; ++q) acc[r][q] = V8{};
  }
  for (int64_t k = 0; k < t.kc; ++k) {
    if (k < t.pf_lines) __builtin_prefetch(t.pf + k * kPanel, 0, 3);
    V8 bv[2 * NP];
    for (int p = 0; p < NP; ++p) {
      bv[2 * p] = Load(t.b + p * t.b_stride + k * kPanel);
      bv[2 * p + 1] = Load(t.b + p * t.b_stride + k * kPanel + 8);
    }
    for (int r = 0; r < MR; ++r) {
      const float av = t.a[r * t.lda + k];
      for (int q = 0; q < 2 * NP; ++q) acc[r][q] += av * bv[q];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int q = 0; q < 2 * NP; ++q) {
      const int64_t col = q * 8;  // panel q / 2 starts at column 16 * (q / 2)
      float* dst = t.c + r * t.ldc + col;
      V8 v = acc[r][q];
      if (t.accumulate) v = Load(dst) + v;
      if (t.bias) v += Load(t.bias + col);
      if (t.res) v += Load(t.res + r * t.ldr + col);
      Store(dst, v);
    }
  }
}

template <int NP>
void RunTile(int mr, const TileArgs& t) {
  if constexpr (NP == 1) {
    switch (mr) {
      case 1: return Tile<1, 1>(t);
      case 2: return Tile<2, 1>(t);
      case 3: return Tile<3, 1>(t);
      case 4: return Tile<4, 1>(t);
      case 5: return Tile<5, 1>(t);
      default: return Tile<6, 1>(t);
    }
  } else if constexpr (NP == 2) {
    return Tile<2, 2>(t);
  } else {
    return Tile<1, 4>(t);
  }
}

struct Problem {
  const float* a;
  int64_t m;
  const PanelWeights* b;
  float* y;
  GemmEpilogue e;
};

// Rows [r0, r1) in balanced tiles of at most kMaxRows: tile i is rows [TileBegin(i), TileBegin(i+1)).
struct RowTiles {
  int64_t r0, rows, count;
  RowTiles(int64_t begin, int64_t end)
      : r0(begin), rows(end - begin), count((end - begin + kMaxRows - 1) / kMaxRows) {}
  int64_t Begin(int64_t i) const { return r0 + rows * i / count; }
};

// Full panels [p0, p1) for rows [r0, r1), NP panels per tile (NP = 1 when rows > 2: then every
// tile has 3..6 rows; the wider tiles keep the FMA units busy when 1 or 2 rows have too few
// independent accumulators).
template <int NP>
void FullPanels(const Problem& pr, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
  const PanelWeights& b = *pr.b;
  const int64_t k = b.k(), n = b.n();
  const RowTiles tiles(r0, r1);
  for (int64_t p = p0; p < p1;) {
    const int np = p + NP <= p1 ? NP : 1;
    for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {
      const int64_t kc = std::min(kKBlock, k - k0);
      const bool last = k0 + kc == k;
      for (int64_t i = 0; i < tiles.count; ++i) {
        const int64_t row = tiles.Begin(i), mr = tiles.Begin(i + 1) - row;
        TileArgs t{kc,
                   pr.a + row * k + k0,
                   k,
                   b.panel(p) + k0 * kPanel,
                   k * kPanel,
                   pr.y + row * n + p * kPanel,
                   n,
                   k0 > 0,
                   last && pr.e.bias ? pr.e.bias + p * kPanel : nullptr,
                   last && pr.e.residual ? pr.e.residual + row * n + p * kPanel : nullptr,
                   n};
        // The weights stream from memory once per call: while the row tiles compute on this
        // block (in L1), fetch the next one (the next K block, or the next panel's first: the
        // panels lie back to back), split between the tiles. (One-panel tiles only: the wider
        // ones are for 1-2 rows, a single pass that the hardware prefetcher follows.)
        if (np == 1) {
          const int64_t l0 = kc * i / tiles.count;
          t.pf = b.panel(p) + (k0 + kc + l0) * kPanel;
          t.pf_lines = kc * (i + 1) / tiles.count - l0;
        }
        if (np == NP) {
          RunTile<NP>(static_cast<int>(mr), t);
        } else {
          RunTile<1>(static_cast<int>(mr), t);
        }
      }
    }
    p += np;
  }
}

// The last panel when N is not a multiple of 16: tiles go through a 6 x 16 buffer and only the
// valid columns are stored, with the epilogue applied in the same order as FullPanels.
void PartialPanel(const Problem& pr, int64_t r0, int64_t r1) {
  const PanelWeights& b = *pr.b;
  const int64_t k = b.k(), n = b.n(), p = b.num_panels() - 1, cols = n - p * kPanel;
  const RowTiles tiles(r0, r1);
  alignas(64) float tmp[kMaxRows * kPanel];
  for (int64_t i = 0; i < tiles.count; ++i) {
    const int64_t row = tiles.Begin(i), mr = tiles.Begin(i + 1) - row;
    for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {
      TileArgs t{std::min(kKBlock, k - k0), pr.a + row * k + k0, k, b.panel(p) + k0 * kPanel,
                 k * kPanel, tmp, kPanel, k0 > 0, nullptr, nullptr, 0};
      RunTile<1>(static_cast<int>(mr), t);
    }
    for (int64_t r = 0; r < mr; ++r) {
      float* dst = pr.y + (row + r) * n + p * kPanel;
      for (int64_t j = 0; j < cols; ++j) {
        float v = tmp[r * kPanel + j];
        if (pr.e.bias) v += pr.e.bias[p * kPanel + j];
        if (pr.e.residual) v += pr.e.residual[(row + r) * n + p * kPanel + j];
        dst[j] = v;
      }
    }
  }
}

// Panels [p0, p1) (the partial last one included when in range) for rows [r0, r1).
void Block(const Problem& pr, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
  const int64_t full = pr.b->n() / kPanel;
  const int64_t f1 = std::min(p1, full);
  if (p0 < f1) {
    const int64_t rows = r1 - r0;
    if (rows == 1) {
      FullPanels<4>(pr, r0, r1, p0, f1);
    } else if (rows == 2) {
      FullPanels<2>(pr, r0, r1, p0, f1);
    } else {
      FullPanels<1>(pr, r0, r1, p0, f1);
    }
  }
  if (p1 > full && full < pr.b->num_panels()) PartialPanel(pr, r0, r1);
}

}  // namespace

void PanelWeights::Pack(const float* b, int64_t k, int64_t n) {
  k_ = k;
  n_ = n;
  data_ = Tensor::Allocate(DataType::kFloat32, {num_panels() * k * kPanel});  // zero padded
  float* out = data_.data<float>();
  for (int64_t p = 0; p < num_panels(); ++p) {
    const int64_t cols = std::min(kPanel, n - p * kPanel);
    for (int64_t kk = 0; kk < k; ++kk) {
      std::memcpy(out + (p * k + kk) * kPanel, b + kk * n + p * kPanel, cols * sizeof(float));
    }
  }
}

void PanelGemmPanel(const float* a, int64_t m, int64_t k, const float* panel, int64_t cols,
                    float* y, int64_t ldy) {
  const RowTiles tiles(0, m);
  if (cols == kPanel) {
    for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {  // the panel's K block stays in L1 for all rows
      const int64_t kc = std::min(kKBlock, k - k0);
      for (int64_t i = 0; i < tiles.count; ++i) {
        const int64_t row = tiles.Begin(i), mr = tiles.Begin(i + 1) - row;
        TileArgs t{kc,  a + row * k + k0, k,      panel + k0 * kPanel, k * kPanel, y + row * ldy,
                   ldy, k0 > 0,           nullptr, nullptr,             0};
        RunTile<1>(static_cast<int>(mr), t);
      }
    }
    return;
  }
  alignas(64) float tmp[kMaxRows * kPanel];
  for (int64_t i = 0; i < tiles.count; ++i) {
    const int64_t row = tiles.Begin(i), mr = tiles.Begin(i + 1) - row;
    for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {
      TileArgs t{std::min(kKBlock, k - k0), a + row * k + k0, k, panel + k0 * kPanel, k * kPanel,
                 tmp, kPanel, k0 > 0, nullptr, nullptr, 0};
      RunTile<1>(static_cast<int>(mr), t);
    }
    for (int64_t r = 0; r < mr; ++r) {
      std::memcpy(y + (row + r) * ldy, tmp + r * kPanel, cols * sizeof(float));
    }
  }
}

void PanelGemm(const float* a, int64_t m, const PanelWeights& b, float* y,
               const GemmEpilogue& epilogue) {
  const Problem pr{a, m, &b, y, epilogue};
  const int64_t panels = b.num_panels();
  // Chunks of at least ~64K multiply-adds, so small products stay on the calling thread.
  const int64_t per_panel = std::max<int64_t>(1, m * b.k() * kPanel);
  const int64_t min_panels = std::max<int64_t>(1, (int64_t{1} << 16) / per_panel);
  if (panels >= 2 * omp_get_max_threads() || m <= 2 * kMaxRows) {
    ParallelFor(panels, min_panels, [&](int64_t p0, int64_t p1) { Block(pr, 0, m, p0, p1); });
    return;
  }
  // Few panels, many rows: the threads take row ranges (whole tiles) over every panel.
  const int64_t tiles = (m + kMaxRows - 1) / kMaxRows;
  const int64_t min_tiles =
      std::max<int64_t>(1, (int64_t{1} << 16) / (kMaxRows * b.k() * kPanel * panels));
  ParallelFor(tiles, min_tiles, [&](int64_t t0, int64_t t1) {
    Block(pr, t0 * kMaxRows, std::min(m, t1 * kMaxRows), 0, panels);
  });
}

}  // namespace inferd::cpu
