// DenseAttention (the encoder kernel) against flash_attention.h's ReferenceAttention (scores in
// double) at the shapes that cross its tiles: rows around the 6- and 12-row register tiles and the
// 48-row tile, keys around the 8-lane vector, the 16-key panel and the 512-key softmax block, head and
// value sizes that are not multiples of 8 or 16; every mask stride form; rows that see only -inf;
// a running max that grows from one key block to the next; the AVX-512 and AVX2 tiles bit for bit
// where the CPU has both. MultiHeadAttention is checked with
// batches and with a head's rows split over threads.
#include "kernels/cpu/attention/dense_attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/cpu/attention/flash_attention.h"
#include "kernels/cpu/util/denormals.h"
#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::ExpectTensorNear;
using testing::RandomFloat;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Problem {
  int64_t rows, keys, d, dv;
  Tensor q, k, v, mask;  // q [rows, d], k [keys, d], v [keys, dv]; mask [rows, keys] if defined

  Problem(int64_t rows_, int64_t keys_, int64_t d_, int64_t dv_, uint32_t seed)
      : rows(rows_),
        keys(keys_),
        d(d_),
        dv(dv_),
        q(RandomFloat({rows_, d_}, -2, 2, seed)),
        k(RandomFloat({keys_, d_}, -2, 2, seed + 1)),
        v(RandomFloat({keys_, dv_}, -1, 1, seed + 2)) {}

  // The head with the mask read at (row_stride, key_stride) when the mask is defined.
  DenseAttentionHead Head(float* out, int64_t mask_row_stride, int64_t mask_key_stride) const {
    DenseAttentionHead h;
    h.q = q.data<float>();
    h.q_row_stride = d;
    h.key = k.data<float>();
    h.key_row_stride = d;
    h.value = v.data<float>();
    h.value_row_stride = dv;
    h.out = out;
    h.out_row_stride = dv;
    h.num_rows = rows;
    h.num_keys = keys;
    h.head_dim = d;
    h.value_dim = dv;
    h.scale = 0.4f;
    if (mask.defined()) {
      h.mask = mask.data<float>();
      h.mask_row_stride = mask_row_stride;
      h.mask_key_stride = mask_key_stride;
    }
    return h;
  }
};

Tensor Reference(const DenseAttentionHead& h) {
  Tensor ref = Tensor::Allocate(DataType::kFloat32, {h.num_rows, h.value_dim});
  AttentionTile t;
  t.q = h.q;
  t.q_row_stride = h.q_row_stride;
  t.out = ref.data<float>();
  t.out_row_stride = h.value_dim;
  t.num_rows = h.num_rows;
  t.head_dim = h.head_dim;
  t.value_dim = h.value_dim;
  t.scale = h.scale;
  t.key = {h.key, h.key_row_stride};
  t.value = {h.value, h.value_row_stride};
  t.num_keys = h.num_keys;
  t.mask = h.mask;
  t.mask_row_stride = h.mask_row_stride;
  t.mask_key_stride = h.mask_key_stride;
  ReferenceAttention(t);
  return ref;
}

void ExpectMatches(const Problem& p, int64_t mask_row_stride, int64_t mask_key_stride) {
  Tensor out = Tensor::Allocate(DataType::kFloat32, {p.rows, p.dv});
  const DenseAttentionHead h = p.Head(out.data<float>(), mask_row_stride, mask_key_stride);
  DenseAttention(h);
  ExpectTensorNear(out, Reference(h), 1e-5, 2e-6);
}

std::string Name(const Problem& p) {
  return "rows " + std::to_string(p.rows) + " keys " + std::to_string(p.keys) + " d " +
         std::to_string(p.d) + " dv " + std::to_string(p.dv);
}

TEST(DenseAttention, ReportsItsPath) {
  // Either path is correct; the vectorized one is what x86-64 CPUs with AVX2 get.
  EXPECT_EQ(DenseAttentionVectorized(),
            __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
}

// The AVX-512 tiles (12 rows, two panels at once or one for an odd last panel, 16-lane softmax)
// and the AVX2 ones (6 rows, one panel) sum each output in the same order, so on a CPU with both
// they must agree bit for bit, at every tile edge of either (odd and even panel counts of keys
// and of value columns among the shapes).
TEST(DenseAttention, WideAndNarrowTilesAgreeExactly) {
  if (DenseAttentionBestTiles() != DenseAttentionTiles::kAvx512) {
    GTEST_SKIP() << "this CPU has no AVX-512: only the AVX2 tiles run here";
  }
  const int64_t shapes[][4] = {{1, 1, 1, 1},      {7, 15, 64, 64}, {12, 33, 64, 64},
                               {13, 16, 16, 17},  {25, 100, 64, 64}, {48, 512, 64, 64},
                               {49, 513, 24, 36}, {100, 130, 64, 64}};
  uint32_t seed = 5;
  for (const auto& sh : shapes) {
    Problem p(sh[0], sh[1], sh[2], sh[3], seed += 3);
    p.mask = RandomFloat({p.rows, p.keys}, -3, 0, seed + 1);
    SCOPED_TRACE(Name(p));
    Tensor wide = Tensor::Allocate(DataType::kFloat32, {p.rows, p.dv});
    Tensor narrow = Tensor::Allocate(DataType::kFloat32, {p.rows, p.dv});
    DenseAttention(p.Head(wide.data<float>(), p.keys, 1), nullptr, DenseAttentionTiles::kAvx512);
    DenseAttention(p.Head(narrow.data<float>(), p.keys, 1), nullptr, DenseAttentionTiles::kAvx2);
    ASSERT_EQ(std::memcmp(wide.data<float>(), narrow.data<float>(), p.rows * p.dv * 4), 0);
    ExpectTensorNear(wide, Reference(p.Head(wide.data<float>(), p.keys, 1)), 1e-5, 2e-6);
  }
}

TEST(DenseAttention, MatchesReferenceAcrossTileEdges) {
  const int64_t shapes[][4] = {
      {1, 1, 1, 1},      {1, 40, 16, 24},  {5, 7, 3, 5},      {6, 8, 8, 8},     {7, 15, 64, 64},
      {13, 16, 64, 64},  {47, 17, 16, 17}, {48, 100, 64, 64}, {49, 33, 24, 36}, {100, 130, 64, 64},
      {20, 511, 64, 64}, {9, 512, 32, 48}, {11, 513, 64, 64}, {3, 1100, 16, 8},
  };
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    Problem p(s[0], s[1], s[2], s[3], seed += 3);
    SCOPED_TRACE(Name(p));
    ExpectMatches(p, 0, 0);
  }
}

TEST(DenseAttention, MatchesReferenceWithEachMaskForm) {
  for (int64_t keys : {9, 64, 530}) {
    Problem p(50, keys, 64, 64, 7);
    p.mask = RandomFloat({p.rows, keys}, -3, 0, 11);
    float* m = p.mask.data<float>();
    for (int64_t i = 0; i < p.mask.NumElements(); i += 5) m[i] = -10000.f;
    for (int64_t i = 2; i < p.mask.NumElements(); i += 7) m[i] = kNegInf;
    SCOPED_TRACE("keys " + std::to_string(keys));
    ExpectMatches(p, keys, 1);  // a row per query row (the fusion's [B, H, Sq, Skv])
    ExpectMatches(p, 0, 1);     // one row for all (the padding mask [B, 1, 1, Skv])
    // One value per query row, a scalar: a shift of the whole row (-inf: the row sees nothing).
    // Without the -10000s, which would shift a whole row beyond FP32's resolution of its scores.
    Problem shifted(p.rows, keys, 64, 64, 7);
    shifted.mask = RandomFloat({p.rows, keys}, -3, 0, 12);
    shifted.mask.data<float>()[2] = kNegInf;
    ExpectMatches(shifted, 1, 0);
    ExpectMatches(shifted, 0, 0);
    Problem half(p.rows, keys / 2, 64, 64, 8);  // every other key of the mask row
    half.mask = p.mask;
    ExpectMatches(half, keys, 2);
  }
}

TEST(DenseAttention, RowsThatSeeNoKeyGetZeros) {
  for (int64_t keys : {20, 600}) {  // one key block, two
    Problem p(8, keys, 16, 16, 21);
    p.mask = RandomFloat({p.rows, keys}, -1, 0, 22);
    float* m = p.mask.data<float>();
    for (int64_t k = 0; k < keys; ++k) m[3 * keys + k] = kNegInf;  // row 3 sees nothing
    for (int64_t k = 0; k < std::min<int64_t>(keys, 512); ++k) {
      m[5 * keys + k] = kNegInf;  // row 5 sees only keys past the first block (if any)
    }
    Tensor out = Tensor::Allocate(DataType::kFloat32, {p.rows, p.dv});
    const DenseAttentionHead h = p.Head(out.data<float>(), keys, 1);
    DenseAttention(h);
    for (int64_t c = 0; c < p.dv; ++c) EXPECT_EQ(out.data<float>()[3 * p.dv + c], 0.f);
    ExpectTensorNear(out, Reference(h), 1e-5, 2e-6);
  }
}

TEST(DenseAttention, RunningMaxGrowsAcrossKeyBlocks) {
  // Scores in the second and third 512-key blocks far above the first: the accumulated output
  // must be rescaled, and a first block that ends up with weight ~e^-40 must vanish.
  Problem p(30, 1300, 64, 64, 31);
  p.mask = Tensor::Allocate(DataType::kFloat32, {1, p.keys});
  for (int64_t k = 0; k < p.keys; ++k)
    p.mask.data<float>()[k] = k < 512 ? 0.f : k < 1024 ? 8.f : 40.f;
  ExpectMatches(p, 0, 1);
}

TEST(DenseAttention, DenormalWeightsAreFlushedAndTheCallersModeKept) {
  // BERT's padding: keys masked with -1e4 get softmax weights of e^-87 (the kernel's exp floor,
  // ~1e-38) whose products with the values are denormal; the kernel flushes them
  // (util/denormals.h) and must still match the double-precision reference, and leave the
  // calling thread's floating-point mode (MXCSR) as it found it.
  Problem p(40, 200, 64, 64, 41);
  p.mask = Tensor::Allocate(DataType::kFloat32, {1, p.keys});
  for (int64_t k = 0; k < p.keys; ++k) p.mask.data<float>()[k] = k % 8 == 7 ? -10000.f : 0.f;
  float* v = p.v.data<float>();
  for (int64_t i = 0; i < p.keys * p.dv; ++i) v[i] *= 1e-3f;  // products below FLT_MIN
#if defined(__x86_64__)
  // The control bits only: bits 0-5 are sticky exception flags any float operation may set.
  const auto mode = [] { return _mm_getcsr() & ~0x3Fu; };
  const unsigned before = mode();
  ExpectMatches(p, 0, 1);
  EXPECT_EQ(mode(), before);
  {
    FlushDenormalsScope scope;
    EXPECT_EQ(_mm_getcsr() & FlushDenormalsScope::kFtzDaz, FlushDenormalsScope::kFtzDaz);
    volatile float tiny = 1e-30f;
    EXPECT_EQ(tiny * 1e-10f, 0.f);  // 1e-40 is denormal: flushed
  }
  EXPECT_EQ(mode(), before);
  volatile float tiny = 1e-30f;
  EXPECT_GT(tiny * 1e-10f, 0.f);  // denormal again outside the scope
#else
  ExpectMatches(p, 0, 1);
#endif
}

TEST(MultiHeadAttention, MatchesPerHeadReferenceWithBatchesAndSplitRows) {
  const int64_t b = 3, heads = 2, sq = 70, skv = 45, d = 16, dv = 24;
  Tensor q = RandomFloat({b, sq, heads * d}, -2, 2, 41);
  Tensor k = RandomFloat({b, skv, heads * d}, -2, 2, 42);
  Tensor v = RandomFloat({b, skv, heads * dv}, -1, 1, 43);
  Tensor mask = RandomFloat({b, 1, 1, skv}, -4, 0, 44);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 4, 16}) {  // 16 threads: fewer heads (6) than threads, rows split
    omp_set_num_threads(threads);
    Tensor y = Tensor::Allocate(DataType::kFloat32, {b, sq, heads * dv});
    MultiHeadAttentionArgs a;
    a.q = q.data<float>();
    a.k = k.data<float>();
    a.v = v.data<float>();
    a.y = y.data<float>();
    a.batch = b;
    a.q_seq = sq;
    a.kv_seq = skv;
    a.heads = heads;
    a.head_dim = d;
    a.value_dim = dv;
    a.scale = 0.25f;
    a.mask = mask.data<float>();
    a.mask_strides[0] = skv;
    a.mask_strides[3] = 1;
    MultiHeadAttention(a);
    Tensor ref = Tensor::Allocate(DataType::kFloat32, {b, sq, heads * dv});
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t hi = 0; hi < heads; ++hi) {
        AttentionTile t;
        t.q = a.q + bi * sq * heads * d + hi * d;
        t.q_row_stride = heads * d;
        t.out = ref.data<float>() + bi * sq * heads * dv + hi * dv;
        t.out_row_stride = heads * dv;
        t.num_rows = sq;
        t.head_dim = d;
        t.value_dim = dv;
        t.scale = a.scale;
        t.key = {a.k + bi * skv * heads * d + hi * d, heads * d};
        t.value = {a.v + bi * skv * heads * dv + hi * dv, heads * dv};
        t.num_keys = skv;
        t.mask = a.mask + bi * skv;
        t.mask_key_stride = 1;
        ReferenceAttention(t);
      }
    }
    SCOPED_TRACE("threads " + std::to_string(threads));
    ExpectTensorNear(y, ref, 1e-5, 2e-6);
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace inferd::cpu
