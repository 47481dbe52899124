#include "kernels/cpu/attention/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

#include "kernels/cpu/attention/flash_attention.h"
#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrFloat;
using testing::AttrInt;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

// One sequence of a step: `cached` tokens already in the cache, `fresh` new ones this step.
struct Seq {
  int64_t cached, fresh;
};

// A PagedAttention call: random caches (the cached prefixes filled in), random new Q/K/V, block
// tables drawn from a shuffled pool (non-contiguous), plus the full K/V of every sequence for
// the reference.
struct Case {
  int64_t h, hkv, d, bs, num_blocks, max_blocks;
  std::vector<Seq> seqs;
  Tensor q, k, v, key_cache, value_cache, slots, starts, lens, tables;
  std::vector<std::vector<float>> full_k, full_v;  // per sequence: [pos][hkv][d]

  std::vector<Tensor> Inputs() const {
    return {q, k, v, key_cache, value_cache, slots, starts, lens, tables};
  }
};

Case MakeCase(int64_t h, int64_t hkv, int64_t d, int64_t bs, std::vector<Seq> seqs,
              uint32_t seed = 7) {
  Case c{h, hkv, d, bs, 0, 0, std::move(seqs)};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  int64_t t = 0;
  for (const Seq& s : c.seqs) {
    const int64_t blocks = (s.cached + s.fresh + bs - 1) / bs;
    c.num_blocks += blocks;
    c.max_blocks = std::max(c.max_blocks, blocks + 1);  // a spare -1 entry at the end
    t += s.fresh;
  }
  c.num_blocks += 3;  // blocks no sequence uses
  std::vector<int64_t> pool(c.num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  const int64_t ns = static_cast<int64_t>(c.seqs.size());
  c.q = RandomFloat({1, h, t, d}, -1, 1, seed + 1);
  c.k = RandomFloat({1, hkv, t, d}, -1, 1, seed + 2);
  c.v = RandomFloat({1, hkv, t, d}, -1, 1, seed + 3);
  c.key_cache = RandomFloat({c.num_blocks, hkv, bs, d}, -1, 1, seed + 4);
  c.value_cache = RandomFloat({c.num_blocks, hkv, bs, d}, -1, 1, seed + 5);
  c.slots = Tensor::Allocate(DataType::kInt64, {t});
  c.starts = Tensor::Allocate(DataType::kInt64, {ns + 1});
  c.lens = Tensor::Allocate(DataType::kInt64, {ns});
  c.tables = Tensor::Allocate(DataType::kInt64, {ns, c.max_blocks});
  std::fill_n(c.tables.data<int64_t>(), ns * c.max_blocks, -1);
  int64_t next_block = 0, tok = 0;
  c.starts.data<int64_t>()[0] = 0;
  for (int64_t s = 0; s < ns; ++s) {
    const Seq& sq = c.seqs[s];
    const int64_t len = sq.cached + sq.fresh;
    int64_t* table = c.tables.data<int64_t>() + s * c.max_blocks;
    for (int64_t b = 0; b * bs < len; ++b) table[b] = pool[next_block++];
    std::vector<float> fk(len * hkv * d), fv(len * hkv * d);
    for (int64_t p = 0; p < len; ++p) {
      const int64_t slot = table[p / bs] * bs + p % bs;
      for (int64_t g = 0; g < hkv; ++g) {
        float* ck = c.key_cache.data<float>() + ((slot / bs * hkv + g) * bs + slot % bs) * d;
        float* cv = c.value_cache.data<float>() + ((slot / bs * hkv + g) * bs + slot % bs) * d;
        for (int64_t x = 0; x < d; ++x) {
          float kx = ck[x], vx = cv[x];  // cached prefix: what the cache holds
          if (p >= sq.cached) {          // new token: from the inputs; the cache slot is stale
            const int64_t row = (g * t + tok + p - sq.cached) * d + x;
            kx = c.k.data<float>()[row];
            vx = c.v.data<float>()[row];
            ck[x] = dist(rng);
            cv[x] = dist(rng);
          }
          fk[(p * hkv + g) * d + x] = kx;
          fv[(p * hkv + g) * d + x] = vx;
        }
      }
      if (p >= sq.cached) c.slots.data<int64_t>()[tok + p - sq.cached] = slot;
    }
    c.full_k.push_back(std::move(fk));
    c.full_v.push_back(std::move(fv));
    tok += sq.fresh;
    c.starts.data<int64_t>()[s + 1] = tok;
    c.lens.data<int64_t>()[s] = len;
  }
  return c;
}

// Plain attention over the full K/V: materialized scores, softmax in double.
Tensor Reference(const Case& c, float scale) {
  const int64_t t = c.q.dim(2), d = c.d, group = c.h / c.hkv;
  Tensor out = Tensor::Allocate(DataType::kFloat32, {1, c.h, t, d});
  int64_t tok = 0;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    for (int64_t j = 0; j < c.seqs[s].fresh; ++j, ++tok) {
      const int64_t p = c.seqs[s].cached + j;
      for (int64_t h = 0; h < c.h; ++h) {
        const int64_t g = h / group;
        const float* q = c.q.data<float>() + (h * t + tok) * d;
        std::vector<double> w(p + 1);
        double mx = -1e300, sum = 0;
        for (int64_t k = 0; k <= p; ++k) {
          double dot = 0;
          for (int64_t x = 0; x < d; ++x)
            dot += double{q[x]} * c.full_k[s][(k * c.hkv + g) * d + x];
          w[k] = dot * scale;
          mx = std::max(mx, w[k]);
        }
        for (double& x : w) sum += x = std::exp(x - mx);
        for (int64_t x = 0; x < d; ++x) {
          double acc = 0;
          for (int64_t k = 0; k <= p; ++k) acc += w[k] * c.full_v[s][(k * c.hkv + g) * d + x];
          out.data<float>()[(h * t + tok) * d + x] = static_cast<float>(acc / sum);
        }
      }
    }
  }
  return out;
}

StatusOr<std::vector<Tensor>> RunOp(const Case& c, std::map<std::string, Attribute> attrs = {}) {
  return RunNode("PagedAttention", std::move(attrs), c.Inputs(), 1, 17, {}, "ai.inferd");
}

void ExpectMatchesReference(const Case& c) {
  auto out = RunOp(c, {{"num_heads", AttrInt(c.h)}, {"num_kv_heads", AttrInt(c.hkv)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], Reference(c, 1.f / std::sqrt(static_cast<float>(c.d))), 1e-5, 2e-6);
}

// A step mixing a fresh prefill, a prefill chunk after a cached prefix, and decodes at and
// across block boundaries.
std::vector<Seq> MixedStep() { return {{0, 37}, {45, 20}, {70, 1}, {0, 1}, {31, 1}, {32, 1}}; }

TEST(PagedAttention, MatchesReferenceAcrossShapes) {
  for (int64_t d : {32, 64, 128}) {
    for (int64_t group : {1, 2, 4}) {
      for (int64_t bs : {1, 8, 16, 32}) {
        SCOPED_TRACE("head_dim " + std::to_string(d) + " group " + std::to_string(group) +
                     " block " + std::to_string(bs));
        ExpectMatchesReference(MakeCase(2 * group, 2, d, bs, MixedStep()));
      }
    }
  }
}

TEST(PagedAttention, LongPrefillAndDecode) {
  // 200 new rows span several 48-row tiles and 32-key chunks; the decodes read ~1000 keys.
  ExpectMatchesReference(MakeCase(4, 1, 64, 16, {{0, 200}, {1000, 1}, {613, 1}, {100, 90}}));
  ExpectMatchesReference(MakeCase(8, 2, 64, 16, {{0, 130}, {999, 1}}));
}

TEST(PagedAttention, OddHeadDimAndBlockSize) {
  ExpectMatchesReference(MakeCase(3, 3, 20, 3, MixedStep()));
  ExpectMatchesReference(MakeCase(4, 2, 7, 5, {{0, 11}, {7, 0}, {9, 4}, {40, 1}}));  // one idle
}

TEST(PagedAttention, WritesNewKeysAndValuesAtTheirSlots) {
  Case c = MakeCase(4, 2, 16, 8, {{5, 6}, {10, 1}});
  Tensor before_k = c.key_cache.Clone();
  ASSERT_TRUE(RunOp(c).ok());
  const int64_t t = c.q.dim(2);
  std::vector<bool> written(c.num_blocks * c.bs, false);
  for (int64_t i = 0; i < t; ++i) {
    const int64_t slot = c.slots.data<int64_t>()[i];
    written[slot] = true;
    for (int64_t g = 0; g < c.hkv; ++g) {
      for (int64_t x = 0; x < c.d; ++x) {
        const int64_t at = ((slot / c.bs * c.hkv + g) * c.bs + slot % c.bs) * c.d + x;
        EXPECT_EQ(c.key_cache.data<float>()[at], c.k.data<float>()[(g * t + i) * c.d + x]);
        EXPECT_EQ(c.value_cache.data<float>()[at], c.v.data<float>()[(g * t + i) * c.d + x]);
      }
    }
  }
  for (int64_t slot = 0; slot < c.num_blocks * c.bs; ++slot) {
    if (written[slot]) continue;
    for (int64_t g = 0; g < c.hkv; ++g) {
      const int64_t at = ((slot / c.bs * c.hkv + g) * c.bs + slot % c.bs) * c.d;
      ASSERT_EQ(c.key_cache.data<float>()[at], before_k.data<float>()[at]) << "slot " << slot;
    }
  }
}

TEST(PagedAttention, ScaleAttribute) {
  Case c = MakeCase(2, 1, 32, 16, {{20, 5}, {3, 1}});
  auto out = RunOp(c, {{"scale", AttrFloat(0.5f)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], Reference(c, 0.5f), 1e-5, 2e-6);
}

TEST(PagedAttention, EmptyStep) {
  Case c = MakeCase(2, 1, 8, 4, {});
  auto out = RunOp(c);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 0, 8}));
}

TEST(PagedAttention, ReferenceFunctionAgrees) {
  Case c = MakeCase(4, 2, 32, 8, MixedStep());
  PagedAttentionArgs a;
  a.query = c.q.data<float>();
  a.key = c.k.data<float>();
  a.value = c.v.data<float>();
  a.key_cache = c.key_cache.data<float>();
  a.value_cache = c.value_cache.data<float>();
  a.slot_mapping = c.slots.data<int64_t>();
  a.query_start = c.starts.data<int64_t>();
  a.context_lens = c.lens.data<int64_t>();
  a.block_tables = c.tables.data<int64_t>();
  a.num_heads = c.h;
  a.num_kv_heads = c.hkv;
  a.head_dim = c.d;
  a.num_tokens = c.q.dim(2);
  a.num_seqs = static_cast<int64_t>(c.seqs.size());
  a.num_blocks = c.num_blocks;
  a.block_size = c.bs;
  a.max_blocks_per_seq = c.max_blocks;
  a.scale = 1.f / std::sqrt(32.f);
  ASSERT_TRUE(CheckPagedAttentionArgs(a).ok());
  Tensor out = Tensor::Allocate(DataType::kFloat32, c.q.shape());
  PagedAttentionReference(a, out.data<float>());
  ExpectTensorNear(out, Reference(c, a.scale), 1e-5, 2e-6);
}

// Expects INVALID_ARGUMENT whose message contains `what`.
void ExpectBad(const std::vector<Tensor>& inputs, const std::string& what,
               std::map<std::string, Attribute> attrs = {}) {
  auto out = RunNode("PagedAttention", std::move(attrs), inputs, 1, 17, {}, "ai.inferd");
  ASSERT_FALSE(out.ok()) << "expected an error about " << what;
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
  EXPECT_NE(out.status().ToString().find(what), std::string::npos) << out.status().ToString();
}

TEST(PagedAttention, BadInputsGiveErrors) {
  const Case c = MakeCase(4, 2, 16, 8, {{5, 6}, {10, 1}});
  auto with = [&](int i, Tensor t) {
    std::vector<Tensor> in = c.Inputs();
    in[i] = std::move(t);
    return in;
  };
  auto ints = [](std::vector<int64_t> v, Shape shape) { return Tensor::FromVector(v, shape); };
  std::vector<Tensor> missing = c.Inputs();
  missing.pop_back();
  ExpectBad(missing, "block_tables");
  ExpectBad(with(0, RandomFloat({1, 4, 6, 16})), "inconsistent shapes");  // T differs from key
  ExpectBad(with(0, RandomFloat({1, 3, 7, 16})), "inconsistent shapes");  // 3 heads over 2
  ExpectBad(with(3, RandomFloat({c.num_blocks, 2, 8, 8})), "inconsistent shapes");
  ExpectBad(with(5, Tensor::Allocate(DataType::kInt32, {7})), "slot_mapping");
  ExpectBad(c.Inputs(), "inconsistent shapes", {{"num_heads", AttrInt(8)}});
  const int64_t slots = c.num_blocks * c.bs;
  ExpectBad(with(5, ints({0, 1, 2, 3, 4, 5, slots}, {7})), "slot_mapping[6]");
  ExpectBad(with(5, ints({0, 1, 2, -1, 4, 5, 6}, {7})), "slot_mapping[3]");
  ExpectBad(with(6, ints({0, 6, 8}, {3})), "query_start");
  ExpectBad(with(6, ints({0, 8, 7}, {3})), "query_start decreases");
  ExpectBad(with(7, ints({11, 0}, {2})), "context_lens[1]");
  ExpectBad(with(7, ints({11, 1000}, {2})), "context_lens[1]");
  Tensor table = c.tables.Clone();
  table.data<int64_t>()[1] = -1;  // sequence 0's second block, which it uses
  ExpectBad(with(8, table), "block_tables[0][1]");
  table.data<int64_t>()[1] = c.num_blocks;
  ExpectBad(with(8, table), "block_tables[0][1]");
}

// The INT8 cache form of a Case: every row of its float caches quantized per (token, head)
// (QuantizeKvRow), and the op's inputs with those caches and their scales (inputs 9, 10).
struct Int8Caches {
  Tensor key, value, key_scales, value_scales;
};

Int8Caches Quantize(const Case& c) {
  const Shape codes = c.key_cache.shape(), scales = {c.num_blocks, c.hkv, c.bs};
  Int8Caches q{Tensor::Allocate(DataType::kInt8, codes), Tensor::Allocate(DataType::kInt8, codes),
               Tensor::Allocate(DataType::kFloat32, scales),
               Tensor::Allocate(DataType::kFloat32, scales)};
  for (int64_t r = 0; r < c.num_blocks * c.hkv * c.bs; ++r) {
    QuantizeKvRow(c.key_cache.data<float>() + r * c.d, c.d, q.key.data<int8_t>() + r * c.d,
                  q.key_scales.data<float>() + r);
    QuantizeKvRow(c.value_cache.data<float>() + r * c.d, c.d, q.value.data<int8_t>() + r * c.d,
                  q.value_scales.data<float>() + r);
  }
  return q;
}

std::vector<Tensor> Int8Inputs(const Case& c, const Int8Caches& q) {
  std::vector<Tensor> in = c.Inputs();
  in[3] = q.key;
  in[4] = q.value;
  in.push_back(q.key_scales);
  in.push_back(q.value_scales);
  return in;
}

TEST(PagedAttentionInt8, QuantizeKvRow) {
  const float x[5] = {0.5f, -1.27f, 0.01f, 1.27f, -0.005f};
  int8_t q[5];
  float scale = -1;
  QuantizeKvRow(x, 5, q, &scale);
  EXPECT_FLOAT_EQ(scale, 0.01f);
  EXPECT_EQ(std::vector<int>(q, q + 5), (std::vector<int>{50, -127, 1, 127, 0}));  // -0.5 → 0
  const float zero[3] = {0, 0, 0};
  QuantizeKvRow(zero, 3, q, &scale);
  EXPECT_EQ(scale, 0.f);
  EXPECT_EQ(std::vector<int>(q, q + 3), (std::vector<int>{0, 0, 0}));
  const float odd[3] = {NAN, 2.54f, INFINITY};  // non-finite: code 0, scale from the rest
  QuantizeKvRow(odd, 3, q, &scale);
  EXPECT_FLOAT_EQ(scale, 0.02f);
  EXPECT_EQ(std::vector<int>(q, q + 3), (std::vector<int>{0, 127, 0}));
}

// The INT8 cache against the float path over the same K/V. Two bounds:
//  - against PagedAttentionReference on the same INT8 caches (attention over the dequantized
//    rows, in double): the kernel's arithmetic on INT8 caches is as exact as on float ones;
//  - against the float reference of the unquantized K/V: each element is off by at most
//    max|row| / 254 = 1/254 here (values in [-1, 1]), so a score q·k·scale moves by at most
//    sqrt(d)/254 · max|q| ≈ 0.022 (d = 32) in the worst case and, with random signs, ~0.004; an
//    output, a convex mix of V rows (each within 1/254), moves by ≲ 1/254 + the probabilities'
//    shift. 1e-2 is ~2.5x the typical error and fails on a broken read (errors of order 1).
TEST(PagedAttentionInt8, MatchesFloatWithinQuantizationError) {
  for (int64_t d : {32, 64, 20}) {
    for (int64_t bs : {1, 16}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + " block " + std::to_string(bs));
      Case c = MakeCase(4, 2, d, bs, MixedStep());
      const float scale = 1.f / std::sqrt(static_cast<float>(d));
      const Tensor want = Reference(c, scale);
      Int8Caches q = Quantize(c);
      auto out = RunNode("PagedAttention", {}, Int8Inputs(c, q), 1, 17, {}, "ai.inferd");
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectTensorNear((*out)[0], want, 0, 1e-2);
      double max_err = 0;
      for (int64_t i = 0; i < want.NumElements(); ++i) {
        max_err = std::max<double>(max_err, std::fabs((*out)[0].data<float>()[i] -
                                                      want.data<float>()[i]));
      }
      EXPECT_GT(max_err, 0.0);  // the INT8 path really ran (float would be exact to ~1e-6)

      // The same INT8 caches through the reference (a second quantization of the step's K/V
      // writes the same codes).
      Int8Caches q2 = Quantize(c);
      PagedAttentionArgs a;
      a.query = c.q.data<float>();
      a.key = c.k.data<float>();
      a.value = c.v.data<float>();
      a.key_cache_i8 = q2.key.data<int8_t>();
      a.value_cache_i8 = q2.value.data<int8_t>();
      a.key_scales = q2.key_scales.data<float>();
      a.value_scales = q2.value_scales.data<float>();
      a.slot_mapping = c.slots.data<int64_t>();
      a.query_start = c.starts.data<int64_t>();
      a.context_lens = c.lens.data<int64_t>();
      a.block_tables = c.tables.data<int64_t>();
      a.num_heads = c.h;
      a.num_kv_heads = c.hkv;
      a.head_dim = d;
      a.num_tokens = c.q.dim(2);
      a.num_seqs = static_cast<int64_t>(c.seqs.size());
      a.num_blocks = c.num_blocks;
      a.block_size = bs;
      a.max_blocks_per_seq = c.max_blocks;
      a.scale = scale;
      ASSERT_TRUE(CheckPagedAttentionArgs(a).ok());
      Tensor ref = Tensor::Allocate(DataType::kFloat32, c.q.shape());
      PagedAttentionReference(a, ref.data<float>());
      ExpectTensorNear((*out)[0], ref, 1e-5, 2e-6);
    }
  }
}

TEST(PagedAttentionInt8, WritesQuantizedKeysAndValuesAtTheirSlots) {
  Case c = MakeCase(4, 2, 16, 8, {{5, 6}, {10, 1}});
  Int8Caches q = Quantize(c);
  const Tensor before = q.key.Clone();
  ASSERT_TRUE(RunNode("PagedAttention", {}, Int8Inputs(c, q), 1, 17, {}, "ai.inferd").ok());
  const int64_t t = c.q.dim(2);
  std::vector<bool> written(c.num_blocks * c.bs, false);
  for (int64_t i = 0; i < t; ++i) {
    const int64_t slot = c.slots.data<int64_t>()[i];
    written[slot] = true;
    for (int64_t g = 0; g < c.hkv; ++g) {
      const int64_t row = (slot / c.bs * c.hkv + g) * c.bs + slot % c.bs;
      for (const auto& [codes, scales, src] :
           {std::tuple{&q.key, &q.key_scales, &c.k}, std::tuple{&q.value, &q.value_scales, &c.v}}) {
        const float* x = src->data<float>() + (g * t + i) * c.d;
        float amax = 0;
        for (int64_t e = 0; e < c.d; ++e) amax = std::max(amax, std::fabs(x[e]));
        const float s = scales->data<float>()[row];
        EXPECT_FLOAT_EQ(s, amax / 127.f);
        for (int64_t e = 0; e < c.d; ++e) {
          EXPECT_NEAR(codes->data<int8_t>()[row * c.d + e] * s, x[e], s / 2 * 1.001f);
        }
      }
    }
  }
  for (int64_t slot = 0; slot < c.num_blocks * c.bs; ++slot) {
    if (written[slot]) continue;
    const int64_t at = (slot / c.bs * c.hkv * c.bs + slot % c.bs) * c.d;
    ASSERT_EQ(q.key.data<int8_t>()[at], before.data<int8_t>()[at]) << "slot " << slot;
  }
}

TEST(PagedAttentionInt8, BadScalesGiveErrors) {
  const Case c = MakeCase(4, 2, 16, 8, {{5, 6}, {10, 1}});
  const Int8Caches q = Quantize(c);
  std::vector<Tensor> in = Int8Inputs(c, q);
  in.pop_back();
  ExpectBad(in, "value_scales");
  in = Int8Inputs(c, q);
  in[9] = RandomFloat({c.num_blocks, c.hkv, c.bs + 1});
  ExpectBad(in, "key_scales");
  in = Int8Inputs(c, q);
  in[4] = c.value_cache;  // int8 keys with float values
  ExpectBad(in, "value_cache must be a rank-4 int8");
}

// The dense form (encoder attention): non-causal, an additive mask, value_dim != head_dim.
TEST(FlashAttention, DenseWithMaskMatchesReference) {
  for (int64_t sq : {1, 7, 64, 130}) {
    const int64_t skv = sq + 5, heads = 3, d = 24, dv = 36;
    Tensor q = RandomFloat({heads, sq, d}, -2, 2, 1);
    Tensor k = RandomFloat({skv, d}, -2, 2, 2);
    Tensor v = RandomFloat({skv, dv}, -1, 1, 3);
    Tensor mask = RandomFloat({sq, skv}, -3, 0, 4);
    for (int64_t j = 0; j < sq; ++j) mask.data<float>()[j * skv + j % skv] = -INFINITY;
    Tensor out = Tensor::Allocate(DataType::kFloat32, {heads, sq, dv});
    Tensor ref = Tensor::Allocate(DataType::kFloat32, {heads, sq, dv});
    AttentionTile t;
    t.q = q.data<float>();
    t.q_head_stride = sq * d;
    t.q_row_stride = d;
    t.out_head_stride = sq * dv;
    t.out_row_stride = dv;
    t.num_heads = heads;
    t.num_rows = sq;
    t.head_dim = d;
    t.value_dim = dv;
    t.scale = 0.3f;
    t.key = {k.data<float>(), d};
    t.value = {v.data<float>(), dv};
    t.num_keys = skv;
    t.mask = mask.data<float>();
    t.mask_row_stride = skv;
    t.mask_key_stride = 1;
    t.out = out.data<float>();
    FlashAttention(t);
    t.out = ref.data<float>();
    ReferenceAttention(t);
    SCOPED_TRACE("rows " + std::to_string(sq));
    ExpectTensorNear(out, ref, 1e-5, 2e-6);
  }
}

}  // namespace
}  // namespace inferd::cpu
