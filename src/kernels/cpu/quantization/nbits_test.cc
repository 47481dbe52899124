// Weight-only 4/8-bit kernels (nbits_gemm.h, MatMulNBits/GatherNBits) against float math on the
// dequantized weights, with error bounds derived from the quantization steps.
#include "kernels/cpu/quantization/nbits_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "session/test_util.h"

namespace inferd {
namespace nbits_test {
namespace {

using cpu::NBitsWeights;
using testing::AttrInt;
using testing::RunNode;

struct Packed {
  std::vector<uint8_t> data, zp;
  std::vector<float> scales;
  NBitsWeights view;
};

Packed Pack(const std::vector<float>& w, int64_t n, int64_t k, int bits, int64_t group,
            bool asym) {
  Packed p;
  const int64_t groups = cpu::NBitsGroups(k, group);
  p.data.resize(n * cpu::NBitsRowBytes(bits, k));
  p.scales.resize(n * groups);
  if (asym) p.zp.resize(n * groups);
  cpu::QuantizeNBits(w.data(), n, k, bits, group, asym, p.data.data(), p.scales.data(),
                     asym ? p.zp.data() : nullptr);
  p.view = {bits, n, k, group, p.data.data(), p.scales.data(), asym ? p.zp.data() : nullptr};
  return p;
}

std::vector<float> Random(int64_t count, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> Dequantize(const NBitsWeights& w) {
  std::vector<float> out(w.n * w.k);
  for (int64_t r = 0; r < w.n; ++r) cpu::DequantizeNBitsRow(w, r, out.data() + r * w.k);
  return out;
}

struct Case {
  int bits;
  int64_t group;
  bool asym;
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (int bits : {4, 8}) {
    for (int64_t group : {32, 64, 128}) {
      for (bool asym : {false, true}) cases.push_back({bits, group, asym});
    }
  }
  return cases;
}

std::string Name(const Case& c, int64_t n, int64_t k, int64_t m) {
  return ::testing::PrintToString(c.bits) + "-bit group " + std::to_string(c.group) +
         (c.asym ? " asym" : " sym") + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
         " m=" + std::to_string(m);
}

TEST(NBitsTest, RoundTripErrorIsWithinOneStep) {
  const int64_t n = 7, k = 100;  // k: not a multiple of any group
  const std::vector<float> w = Random(n * k, 1, -2.f, 3.f);
  for (const Case& c : AllCases()) {
    Packed p = Pack(w, n, k, c.bits, c.group, c.asym);
    std::vector<float> dq = Dequantize(p.view);
    const int64_t groups = cpu::NBitsGroups(k, c.group);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < k; ++i) {
        const float s = std::fabs(p.scales[r * groups + i / c.group]);
        // Half a step, except ggml's symmetric 4-bit rule, which clips the largest value of the
        // other sign by up to one step.
        const float bound = (c.bits == 4 && !c.asym ? 1.f : 0.5f) * s * 1.0001f;
        ASSERT_LE(std::fabs(dq[r * k + i] - w[r * k + i]), bound)
            << Name(c, n, k, 1) << " row " << r << " col " << i;
      }
    }
  }
}

TEST(NBitsTest, ConstantAndZeroGroupsAreExact) {
  const int64_t k = 64;
  std::vector<float> w(2 * k, 0.f);
  for (int64_t i = 0; i < k; ++i) w[k + i] = -0.75f;
  for (const Case& c : AllCases()) {
    Packed p = Pack(w, 2, k, c.bits, c.group, c.asym);
    std::vector<float> dq = Dequantize(p.view);
    for (int64_t i = 0; i < 2 * k; ++i) ASSERT_FLOAT_EQ(dq[i], w[i]) << Name(c, 2, k, 1) << i;
  }
}

// y = a · dequant(W)ᵀ in double, and the bound of the activation rounding: each value of a moves
// by at most half its sub-block's step max|a| / L (L = 127 against 4-bit weights, 63 against 8-bit
// ones), so |Δy| <= Σ |w| · step / 2.
void Reference(const std::vector<float>& a, int64_t m, const std::vector<float>& dq, int64_t n,
               int64_t k, int bits, std::vector<double>* y, std::vector<double>* bound) {
  y->assign(m * n, 0.0);
  bound->assign(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    std::vector<double> step(k);
    for (int64_t b = 0; b < k; b += 32) {
      double amax = 0;
      for (int64_t j = b; j < std::min(k, b + 32); ++j) amax = std::max(amax, double(std::fabs(a[i * k + j])));
      for (int64_t j = b; j < std::min(k, b + 32); ++j) step[j] = amax / (bits == 4 ? 127.0 : 63.0);
    }
    for (int64_t r = 0; r < n; ++r) {
      double s = 0, e = 0, mag = 0;
      for (int64_t j = 0; j < k; ++j) {
        s += double(a[i * k + j]) * dq[r * k + j];
        e += std::fabs(dq[r * k + j]) * step[j] / 2;
        mag += std::fabs(double(a[i * k + j]) * dq[r * k + j]);
      }
      (*y)[i * n + r] = s;
      (*bound)[i * n + r] = e * 1.001 + 1e-5 * mag + 1e-6;
    }
  }
}

TEST(NBitsTest, SmallMMatchesDequantizedReferenceWithinActivationRounding) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 32}, {5, 40}, {17, 100}, {9, 768}};
  for (const Case& c : AllCases()) {
    for (auto [n, k] : shapes) {
      for (int64_t m : {1, 3, 8}) {
        const std::vector<float> w = Random(n * k, 2 + n, -1.f, 1.5f);
        const std::vector<float> a = Random(m * k, 3 + k, -2.f, 2.f);
        Packed p = Pack(w, n, k, c.bits, c.group, c.asym);
        std::vector<double> ref, bound;
        Reference(a, m, Dequantize(p.view), n, k, c.bits, &ref, &bound);
        std::vector<float> y(m * n), ys(m * n);
        cpu::NBitsMatMul(a.data(), m, p.view, y.data());
        cpu::NBitsMatMulSmallMScalar(a.data(), m, p.view, ys.data());
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_LE(std::fabs(y[i] - ref[i]), bound[i]) << Name(c, n, k, m) << " at " << i;
          ASSERT_NEAR(y[i], ys[i], 1e-4 * (1 + std::fabs(ref[i]))) << Name(c, n, k, m);
        }
      }
    }
  }
}

TEST(NBitsTest, BatchedPathIsFloatExact) {
  for (const Case& c : AllCases()) {
    for (auto [n, k, m] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {16, 64, cpu::kNBitsSmallM + 1}, {37, 300, 33}, {5, 40, cpu::kNBitsSmallM + 5}}) {
      const std::vector<float> w = Random(n * k, 4, -1.f, 1.f);
      const std::vector<float> a = Random(m * k, 5, -1.f, 1.f);
      Packed p = Pack(w, n, k, c.bits, c.group, c.asym);
      std::vector<double> ref, bound;
      Reference(a, m, Dequantize(p.view), n, k, c.bits, &ref, &bound);
      std::vector<float> y(m * n);
      cpu::NBitsMatMul(a.data(), m, p.view, y.data());
      for (int64_t i = 0; i < m * n; ++i) {
        ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << Name(c, n, k, m);
      }
    }
  }
}

TEST(NBitsTest, RowsDoNotDependOnTheBatch) {
  const int64_t n = 33, k = 96;  // n: a tail tile of 1 row
  const std::vector<float> w = Random(n * k, 6), a = Random(cpu::kNBitsSmallM * k, 7);
  for (const Case& c : AllCases()) {
    Packed p = Pack(w, n, k, c.bits, c.group, c.asym);
    const cpu::NBitsDecodeWeights decode(p.view);
    std::vector<float> one(n);
    for (int64_t m = 2; m <= cpu::kNBitsSmallM; ++m) {  // 4 rows of A per pass, then the rest
      std::vector<float> all(m * n);
      cpu::NBitsMatMul(a.data(), m, p.view, &decode, all.data());
      for (int64_t i = 0; i < m; ++i) {
        cpu::NBitsMatMul(a.data() + i * k, 1, p.view, &decode, one.data());
        for (int64_t r = 0; r < n; ++r) {
          ASSERT_EQ(one[r], all[i * n + r]) << Name(c, n, k, m) << " row " << i << " col " << r;
        }
      }
    }
  }
}

// The code of value j of sub-block b of row r in the decode layout (nbits_gemm.h), as the file
// layout stores it (8 bits: the signed byte).
int DecodeLayoutCode(const cpu::NBitsDecodeWeights& d, int64_t r, int64_t b, int64_t j) {
  const int64_t tile = cpu::NBitsDecodeWeights::kTile, lane = r % tile;
  const uint8_t* sub = d.codes(r / tile) + b * tile * 32 * d.bits() / 8;
  if (d.bits() == 8) return static_cast<int8_t>(sub[(j / 4) * 32 + lane * 4 + j % 4] ^ 0x80);
  const uint8_t byte = sub[((j % 16) / 4) * 32 + lane * 4 + j % 4];
  return j < 16 ? byte & 15 : byte >> 4;
}

int FileCode(const NBitsWeights& w, int64_t r, int64_t b, int64_t j) {
  const uint8_t* sub = w.data + r * cpu::NBitsRowBytes(w.bits, w.k) + b * 32 * w.bits / 8;
  if (w.bits == 8) return static_cast<int8_t>(sub[j]);
  return j < 16 ? sub[j] & 15 : sub[j - 16] >> 4;
}

TEST(NBitsTest, DecodeLayoutHoldsEveryCodeScaleAndZeroPoint) {
  for (const Case& c : AllCases()) {
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 32}, {7, 100}, {9, 200}}) {
      Packed p = Pack(Random(n * k, 20 + n, -1.f, 2.f), n, k, c.bits, c.group, c.asym);
      const cpu::NBitsDecodeWeights d(p.view);
      ASSERT_EQ(d.tiles(), (n + 7) / 8) << Name(c, n, k, 1);
      ASSERT_EQ(d.asymmetric(), c.asym);
      const int64_t groups = cpu::NBitsGroups(k, c.group), subs = (k + 31) / 32;
      for (int64_t r = 0; r < d.tiles() * 8; ++r) {
        const int64_t t = r / 8, lane = r % 8;
        for (int64_t g = 0; g < groups; ++g) {
          const float s = r < n ? p.scales[r * groups + g] : 0.f;  // padded rows: scale 0
          ASSERT_EQ(d.scales(t)[g * 8 + lane], s) << Name(c, n, k, 1) << " row " << r;
          if (!c.asym) continue;
          float zp = 0.f;
          if (r < n) {
            const uint8_t z = p.zp[r * groups + g];
            zp = c.bits == 4 ? z : static_cast<int8_t>(z) + 128.f;
          }
          ASSERT_EQ(d.offsets(t)[g * 8 + lane], s * zp) << Name(c, n, k, 1) << " row " << r;
        }
        if (r >= n) continue;
        for (int64_t b = 0; b < subs; ++b) {
          for (int64_t j = 0; j < 32; ++j) {
            ASSERT_EQ(DecodeLayoutCode(d, r, b, j), FileCode(p.view, r, b, j))
                << Name(c, n, k, 1) << " row " << r << " value " << b * 32 + j;
          }
        }
      }
    }
  }
}

TEST(NBitsTest, RepackedAtLoadEqualsRepackedPerCallAndTheScalarPath) {
  for (const Case& c : AllCases()) {
    // n: 1 row, a tail tile, whole tiles; k: one sub-block, a partial one, a partial group.
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 32}, {7, 40}, {9, 100}, {16, 200}, {45, 416}}) {
      Packed p = Pack(Random(n * k, 30 + k, -1.f, 1.f), n, k, c.bits, c.group, c.asym);
      const cpu::NBitsDecodeWeights decode(p.view);
      for (int64_t m = 1; m <= cpu::kNBitsSmallM; ++m) {
        const std::vector<float> a = Random(m * k, 31 + m, -3.f, 1.f);
        std::vector<float> y(m * n, -1.f), per_call(m * n, -2.f), scalar(m * n);
        cpu::NBitsMatMul(a.data(), m, p.view, &decode, y.data());
        cpu::NBitsMatMul(a.data(), m, p.view, per_call.data());
        cpu::NBitsMatMulSmallMScalar(a.data(), m, p.view, scalar.data());
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_EQ(y[i], per_call[i]) << Name(c, n, k, m) << " at " << i;
          ASSERT_NEAR(y[i], scalar[i], 1e-4 * (1 + std::fabs(scalar[i]))) << Name(c, n, k, m);
        }
      }
    }
  }
}

// The decode kernel's pieces as the MoE kernel calls them (NBitsActivations, NBitsDecodeTiles
// over a subset of tiles into a wider output, rows in any order): the same bits as NBitsMatMul's
// decode path, and the plain C++ version of the tile kernel the same bits as the vector one.
TEST(NBitsTest, DecodeTilesOnAnyRowsAndTilesEqualsTheMatMulAndItsScalarVersion) {
  for (const Case& c : AllCases()) {
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{7, 40}, {45, 416}, {64, 96}}) {
      Packed p = Pack(Random(n * k, 40 + k, -1.f, 1.f), n, k, c.bits, c.group, c.asym);
      const cpu::NBitsDecodeWeights decode(p.view);
      const int64_t m = 11;  // more rows than kNBitsSmallM: the pieces take any count
      const std::vector<float> a = Random(m * k, 41, -2.f, 2.f);
      cpu::NBitsActivations q;
      q.Quantize(a.data(), m, k, k, c.bits, c.group, true);
      std::vector<cpu::NBitsQuantizedRow> rows;
      for (int64_t i = m - 1; i >= 0; --i) rows.push_back(q.row(i));  // reversed
      const int64_t ldy = n + 5, t1 = decode.tiles(), t0 = t1 / 2;
      std::vector<float> y(m * ldy, -7.f), scalar(m * ldy, -7.f), one(n);
      cpu::NBitsDecodeTiles(decode, 0, t0, rows.data(), m, y.data(), ldy);
      cpu::NBitsDecodeTiles(decode, t0, t1, rows.data(), m, y.data(), ldy);
      cpu::NBitsDecodeTilesScalar(decode, 0, t1, rows.data(), m, scalar.data(), ldy);
      for (int64_t i = 0; i < m; ++i) {
        cpu::NBitsMatMul(a.data() + (m - 1 - i) * k, 1, p.view, &decode, one.data());
        for (int64_t r = 0; r < ldy; ++r) {
          if (r >= n) {  // past the weight rows: not written
            ASSERT_EQ(y[i * ldy + r], -7.f);
            continue;
          }
          ASSERT_EQ(y[i * ldy + r], one[r]) << Name(c, n, k, m) << " row " << i << " col " << r;
          ASSERT_EQ(scalar[i * ldy + r], one[r]) << Name(c, n, k, m) << " scalar, row " << i;
        }
      }
    }
  }
}

// Repacked weights share 16 MB blocks of large pages, and a buffer over 8 MB gets its own: each
// copy stays intact while others come and go.
TEST(NBitsTest, RepackedWeightsStayIntactWhileOthersComeAndGo) {
  auto check = [](const Packed& p, const cpu::NBitsDecodeWeights& d, uint32_t seed) {
    const std::vector<float> a = Random(p.view.k, seed);
    std::vector<float> y(p.view.n), per_call(p.view.n);
    cpu::NBitsMatMul(a.data(), 1, p.view, &d, y.data());
    cpu::NBitsMatMul(a.data(), 1, p.view, per_call.data());
    for (int64_t i = 0; i < p.view.n; ++i) ASSERT_EQ(y[i], per_call[i]) << i;
  };
  std::vector<Packed> packed;
  for (int i = 0; i < 3; ++i) packed.push_back(Pack(Random(300 * 512, 40 + i), 300, 512, 4, 32, i == 2));
  auto first = std::make_unique<cpu::NBitsDecodeWeights>(packed[0].view);
  cpu::NBitsDecodeWeights second(packed[1].view);
  first.reset();  // its block stays: `second` was cut from it
  cpu::NBitsDecodeWeights third(packed[2].view);
  check(packed[1], second, 50);
  check(packed[2], third, 51);
  // 4100 rows of 4096 4-bit values: 8.4 MB of codes, a block of their own.
  const int64_t n = 4100, k = 4096;
  Packed big = Pack(Random(n * k, 52), n, k, 4, 128, false);
  const cpu::NBitsDecodeWeights big_d(big.view);
  check(big, big_d, 53);
  check(packed[1], second, 54);
}

TEST(NBitsTest, NonFiniteActivationsGiveNaN) {
  const int64_t n = 4, k = 64;
  Packed p = Pack(Random(n * k, 8), n, k, 4, 32, false);
  std::vector<float> a = Random(k, 9), y(n);
  a[40] = std::numeric_limits<float>::quiet_NaN();
  cpu::NBitsMatMul(a.data(), 1, p.view, y.data());
  for (float v : y) EXPECT_TRUE(std::isnan(v));
}

// The ONNX ops: shapes, constant weights, optional zero points, and bad input.
Tensor ToTensor(const std::vector<uint8_t>& v, Shape s, DataType t) {
  Tensor out = Tensor::Allocate(t, std::move(s));
  std::memcpy(out.raw_data(), v.data(), v.size());
  return out;
}

TEST(NBitsOpsTest, MatMulAndGatherMatchTheKernels) {
  const int64_t n = 24, k = 72;
  for (const Case& c : AllCases()) {
    const std::vector<float> w = Random(n * k, 10);
    Packed p = Pack(w, n, k, c.bits, c.group, c.asym);
    const DataType code = c.bits == 4 ? DataType::kUInt8 : DataType::kInt8;
    const int64_t groups = cpu::NBitsGroups(k, c.group);
    Tensor q = ToTensor(p.data, {n, cpu::NBitsRowBytes(c.bits, k)}, code);
    Tensor s = Tensor::FromVector<float>(p.scales, {n, groups});
    Tensor z = c.asym ? ToTensor(p.zp, {n, groups}, code) : Tensor();
    std::map<std::string, Attribute> attrs = {{"K", AttrInt(k)},
                                              {"N", AttrInt(n)},
                                              {"bits", AttrInt(c.bits)},
                                              {"block_size", AttrInt(c.group)}};
    Tensor a = Tensor::FromVector<float>(Random(2 * 3 * k, 11), {2, 3, k});
    std::vector<Tensor> ins = {a, q, s};
    if (c.asym) ins.push_back(z);
    auto r = RunNode("MatMulNBits", attrs, ins, 1, 17, {1, 2, 3}, "ai.inferd");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ((*r)[0].shape(), (Shape{2, 3, n}));
    std::vector<float> y(6 * n);
    cpu::NBitsMatMul(a.data<float>(), 6, p.view, y.data());
    for (int64_t i = 0; i < 6 * n; ++i) ASSERT_EQ((*r)[0].data<float>()[i], y[i]) << Name(c, n, k, 6);

    attrs.erase("N");
    Tensor idx = Tensor::FromVector<int64_t>({3, -1, 0}, {3});
    std::vector<Tensor> gins = {q, s, idx};
    if (c.asym) gins.push_back(z);
    auto g = RunNode("GatherNBits", attrs, gins, 1, 17, {0, 1, 3}, "ai.inferd");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_EQ((*g)[0].shape(), (Shape{3, k}));
    std::vector<float> dq = Dequantize(p.view);
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ((*g)[0].data<float>()[j], dq[3 * k + j]);
      ASSERT_EQ((*g)[0].data<float>()[k + j], dq[(n - 1) * k + j]);
      ASSERT_EQ((*g)[0].data<float>()[2 * k + j], dq[j]);
    }
  }
}

TEST(NBitsOpsTest, BadAttributesAndCorruptWeightsFailWithTheReason) {
  const int64_t n = 8, k = 64;
  Packed p = Pack(Random(n * k, 12), n, k, 4, 32, false);
  Tensor q = ToTensor(p.data, {n, k / 2}, DataType::kUInt8);
  Tensor s = Tensor::FromVector<float>(p.scales, {n, 2});
  Tensor a = Tensor::FromVector<float>(Random(k, 13), {1, k});
  auto attrs = [&](int64_t bits, int64_t block, int64_t kk) {
    return std::map<std::string, Attribute>{{"K", AttrInt(kk)},
                                            {"N", AttrInt(n)},
                                            {"bits", AttrInt(bits)},
                                            {"block_size", AttrInt(block)}};
  };
  auto run = [&](std::map<std::string, Attribute> at, std::vector<Tensor> ins) {
    return RunNode("MatMulNBits", std::move(at), ins, 1, 17, {1, 2, 3}, "ai.inferd").status();
  };
  Status st = run(attrs(3, 32, k), {a, q, s});
  EXPECT_NE(st.message().find("bits must be 4 or 8"), std::string::npos) << st.ToString();
  st = run(attrs(4, 48, k), {a, q, s});
  EXPECT_NE(st.message().find("block_size must be 32, 64 or 128"), std::string::npos) << st.ToString();
  // Scales of another group size: the packed shapes do not match.
  st = run(attrs(4, 64, k), {a, q, s});
  EXPECT_NE(st.message().find("do not match"), std::string::npos) << st.ToString();
  // Truncated weights.
  Tensor short_q = ToTensor(std::vector<uint8_t>(n * 16), {n, 16}, DataType::kUInt8);
  st = run(attrs(4, 32, k), {a, short_q, s});
  EXPECT_NE(st.message().find("do not match"), std::string::npos) << st.ToString();
  // 8 bits needs int8 data.
  st = run(attrs(8, 32, k), {a, q, s});
  EXPECT_NE(st.message().find("int8 packed weights"), std::string::npos) << st.ToString();
  // Zero points of the wrong shape.
  st = run(attrs(4, 32, k), {a, q, s, ToTensor({1, 2, 3}, {3}, DataType::kUInt8)});
  EXPECT_NE(st.message().find("zero points"), std::string::npos) << st.ToString();
  // A of the wrong width.
  st = run(attrs(4, 32, k), {Tensor::FromVector<float>(Random(k + 1, 14), {1, k + 1}), q, s});
  EXPECT_NE(st.message().find("A must be float32"), std::string::npos) << st.ToString();
  // Gather index out of range.
  std::map<std::string, Attribute> g = attrs(4, 32, k);
  g.erase("N");
  st = RunNode("GatherNBits", g, {q, s, Tensor::FromVector<int64_t>({n}, {1})}, 1, 17, {0, 1},
               "ai.inferd")
           .status();
  EXPECT_NE(st.message().find("out of range"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace nbits_test
}  // namespace inferd
