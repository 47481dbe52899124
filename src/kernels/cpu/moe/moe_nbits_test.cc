// ai.inferd.MoENBits against a double-precision reference of the MoE block (every token through
// its experts one at a time) with the error bound that follows from the quantization: per product
// the weights' actual rounding (|w - dequant(w)| per element) and the activations' (half a step of
// max|a| / L per 32 values, L = 127 against 4-bit weights, 63 against 8-bit ones), carried through
// SiLU (|SiLU'| <= 1.1), the up product, down and the routing weights. Against the reference on
// the dequantized weights the weight terms vanish and only the activations' remain. Also: the
// counts, batch independence bit for bit, bad inputs, NaN.
#include "kernels/cpu/moe/moe_nbits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "session/test_util.h"

namespace inferd {
namespace moe_nbits_test {  // unity builds: moe_test.cc and moe_nbits_test.cc share a TU
namespace {

using testing::AttrInt;
using testing::RandomFloat;

struct MoeCase {
  int64_t h, n, e;  // hidden, expert width, experts
};

struct Quant {
  int bits;
  int64_t group;
  bool asym;
};

// Float MoE weights in MatMul layout: router [H, E], gate/up [E, H, I], down [E, I, H].
struct FloatWeights {
  Tensor router, gate, up, down;
};

FloatWeights RandomWeights(const MoeCase& c, uint32_t seed) {
  return {RandomFloat({c.h, c.e}, -1.f, 1.f, seed),
          RandomFloat({c.e, c.h, c.n}, -0.3f, 0.3f, seed + 1),
          RandomFloat({c.e, c.h, c.n}, -0.3f, 0.3f, seed + 2),
          RandomFloat({c.e, c.n, c.h}, -0.3f, 0.3f, seed + 3)};
}

// One stacked expert matrix [E, K, N] quantized as MoENBits reads it (codes [E, N, row bytes],
// scales and zero points [E, N, groups]) and its dequantized value in the float layout.
struct QuantMatrix {
  Tensor codes, scales, zero_points, dequantized;
};

QuantMatrix QuantizeExperts(const Tensor& w, const Quant& q) {
  const int64_t e = w.dim(0), k = w.dim(1), n = w.dim(2);
  const int64_t rb = cpu::NBitsRowBytes(q.bits, k), groups = cpu::NBitsGroups(k, q.group);
  const DataType code = q.bits == 4 ? DataType::kUInt8 : DataType::kInt8;
  QuantMatrix m;
  m.codes = Tensor::Allocate(code, {e, n, rb});
  m.scales = Tensor::Allocate(DataType::kFloat32, {e, n, groups});
  if (q.asym) m.zero_points = Tensor::Allocate(code, {e, n, groups});
  m.dequantized = Tensor::Allocate(DataType::kFloat32, w.shape());
  std::vector<float> rows(n * k), row(k);
  for (int64_t x = 0; x < e; ++x) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) rows[j * k + i] = w.data<float>()[(x * k + i) * n + j];
    }
    uint8_t* codes = static_cast<uint8_t*>(m.codes.raw_data()) + x * n * rb;
    float* scales = m.scales.data<float>() + x * n * groups;
    uint8_t* zp =
        q.asym ? static_cast<uint8_t*>(m.zero_points.raw_data()) + x * n * groups : nullptr;
    cpu::QuantizeNBits(rows.data(), n, k, q.bits, q.group, q.asym, codes, scales, zp);
    const cpu::NBitsWeights view{q.bits, n, k, q.group, codes, scales, zp};
    for (int64_t j = 0; j < n; ++j) {
      cpu::DequantizeNBitsRow(view, j, row.data());
      for (int64_t i = 0; i < k; ++i) m.dequantized.data<float>()[(x * k + i) * n + j] = row[i];
    }
  }
  return m;
}

struct QuantWeights {
  Tensor router;
  QuantMatrix gate, up, down;
  FloatWeights dequantized() const {
    return {router, gate.dequantized, up.dequantized, down.dequantized};
  }
};

QuantWeights Quantize(const FloatWeights& w, const Quant& q) {
  return {w.router, QuantizeExperts(w.gate, q), QuantizeExperts(w.up, q),
          QuantizeExperts(w.down, q)};
}

std::vector<Tensor> Inputs(const Tensor& x, const QuantWeights& w) {
  std::vector<Tensor> in = {x,          w.router,    w.gate.codes, w.gate.scales,
                            w.up.codes, w.up.scales, w.down.codes, w.down.scales};
  if (w.gate.zero_points.defined()) {
    in.insert(in.end(), {w.gate.zero_points, w.up.zero_points, w.down.zero_points});
  }
  return in;
}

StatusOr<std::vector<Tensor>> RunNode(const std::vector<Tensor>& inputs, const Quant& q,
                                      int64_t top_k, int64_t normalize = 1, size_t outputs = 2) {
  std::vector<size_t> constants;
  for (size_t i = 1; i < inputs.size(); ++i) constants.push_back(i);
  return testing::RunNode("MoENBits",
                          {{"top_k", AttrInt(top_k)},
                           {"normalize", AttrInt(normalize)},
                           {"bits", AttrInt(q.bits)},
                           {"block_size", AttrInt(q.group)}},
                          inputs, outputs, 17, constants, "ai.inferd");
}

// Half the activation step of each value of a: max|a| / L / 2 per 32 values (a row of k).
std::vector<double> HalfSteps(const std::vector<double>& a, int bits) {
  std::vector<double> s(a.size());
  for (size_t b = 0; b < a.size(); b += 32) {
    double amax = 0;
    for (size_t j = b; j < std::min(a.size(), b + 32); ++j) amax = std::max(amax, std::fabs(a[j]));
    for (size_t j = b; j < std::min(a.size(), b + 32); ++j)
      s[j] = amax / (bits == 4 ? 127 : 63) / 2;
  }
  return s;
}

// The block for one token in double with weights `ref`, and per output the bound of how far the
// kernel, running on `used` (the dequantized weights) with its activations quantized, may be.
void ReferenceToken(const float* xf, const MoeCase& c, const FloatWeights& ref,
                    const FloatWeights& used, int k, bool normalize, int bits,
                    std::vector<double>* y, std::vector<double>* bound,
                    std::vector<int64_t>* counts) {
  std::vector<double> x(xf, xf + c.h);
  std::vector<double> logit(c.e, 0.0);
  for (int64_t e = 0; e < c.e; ++e) {
    for (int64_t i = 0; i < c.h; ++i) logit[e] += x[i] * ref.router.data<float>()[i * c.e + e];
  }
  const double m = *std::max_element(logit.begin(), logit.end());
  double sum = 0;
  for (double& l : logit) sum += l = std::exp(l - m);
  std::vector<std::pair<double, int64_t>> ranked;
  for (int64_t e = 0; e < c.e; ++e) ranked.push_back({-logit[e] / sum, e});
  std::stable_sort(ranked.begin(), ranked.end());
  double top = 0;
  for (int j = 0; j < k; ++j) top -= ranked[j].first;
  const std::vector<double> sx = HalfSteps(x, bits);
  y->assign(c.h, 0.0);
  bound->assign(c.h, 0.0);
  auto at = [](const Tensor& t, int64_t i) { return double{t.data<float>()[i]}; };
  for (int j = 0; j < k; ++j) {
    const int64_t e = ranked[j].second;
    ++(*counts)[e];
    const double wt = -ranked[j].first / (normalize ? top : 1.0);
    std::vector<double> act(c.n), dact(c.n), act_hi(c.n);
    for (int64_t f = 0; f < c.n; ++f) {
      double g = 0, u = 0, eg = 0, eu = 0;
      for (int64_t i = 0; i < c.h; ++i) {
        const int64_t o = (e * c.h + i) * c.n + f;
        g += x[i] * at(ref.gate, o);
        u += x[i] * at(ref.up, o);
        eg += std::fabs(x[i]) * std::fabs(at(ref.gate, o) - at(used.gate, o)) +
              sx[i] * std::fabs(at(used.gate, o));
        eu += std::fabs(x[i]) * std::fabs(at(ref.up, o) - at(used.up, o)) +
              sx[i] * std::fabs(at(used.up, o));
      }
      const double silu = g / (1 + std::exp(-g));
      act[f] = silu * u;
      dact[f] = 1.1 * eg * (std::fabs(u) + eu) + std::fabs(silu) * eu;
      act_hi[f] = std::fabs(act[f]) + dact[f];  // what the kernel's value may reach
    }
    const std::vector<double> sa = HalfSteps(act_hi, bits);
    for (int64_t o = 0; o < c.h; ++o) {
      double s = 0, err = 0, mag = 0;
      for (int64_t f = 0; f < c.n; ++f) {
        const int64_t i = (e * c.n + f) * c.h + o;
        const double d = at(used.down, i);
        s += act[f] * at(ref.down, i);
        err += dact[f] * std::fabs(d) + std::fabs(act[f]) * std::fabs(at(ref.down, i) - d) +
               sa[f] * std::fabs(d);
        mag += act_hi[f] * std::fabs(d);
      }
      (*y)[o] += wt * s;
      (*bound)[o] += wt * (err * 1.01 + 1e-5 * mag);
    }
  }
  for (double& b : *bound) b += 1e-6;
}

struct Agreement {
  double worst = 0;    // largest |error| / bound
  double sqnr_db = 0;  // 10 log10(Σ ref² / Σ error²) over all outputs
};

// The kernel against the reference on `ref` weights (the float originals or the dequantized
// ones): every output within its bound.
Agreement CheckAgainstReference(const MoeCase& c, const Quant& q, const Shape& x_shape, int k,
                                bool normalize, bool dequantized_reference) {
  const FloatWeights w = RandomWeights(c, 7);
  const QuantWeights qw = Quantize(w, q);
  const FloatWeights dq = qw.dequantized();
  const Tensor x = RandomFloat(x_shape, -1.f, 1.f, 3);
  auto out = RunNode(Inputs(x, qw), q, k, normalize ? 1 : 0);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  EXPECT_EQ((*out)[0].shape(), x_shape);
  const int64_t t = x.NumElements() / c.h;
  std::vector<int64_t> counts(c.e, 0);
  Agreement agree;
  double norm = 0, noise = 0;
  for (int64_t tok = 0; tok < t; ++tok) {
    std::vector<double> want, bound;
    ReferenceToken(x.data<float>() + tok * c.h, c, dequantized_reference ? dq : w, dq, k, normalize,
                   q.bits, &want, &bound, &counts);
    for (int64_t o = 0; o < c.h; ++o) {
      const double err = std::fabs((*out)[0].data<float>()[tok * c.h + o] - want[o]);
      agree.worst = std::max(agree.worst, err / bound[o]);
      norm += want[o] * want[o];
      noise += err * err;
      if (err > bound[o]) {
        ADD_FAILURE() << q.bits << " bits, group " << q.group << (q.asym ? " asym" : " sym")
                      << (dequantized_reference ? ", dequantized" : ", float")
                      << " reference: token " << tok << " column " << o << " error " << err
                      << " > bound " << bound[o] << " (h " << c.h << ", n " << c.n << ", e " << c.e
                      << ", k " << k << ")";
        return agree;
      }
    }
  }
  for (int64_t e = 0; e < c.e; ++e) EXPECT_EQ((*out)[1].data<int64_t>()[e], counts[e]) << e;
  agree.sqnr_db = 10 * std::log10(norm / std::max(noise, 1e-300));
  return agree;
}

std::vector<Quant> AllQuants() {
  std::vector<Quant> all;
  for (int bits : {4, 8}) {
    for (int64_t group : {32, 64, 128}) {
      for (bool asym : {false, true}) all.push_back({bits, group, asym});
    }
  }
  return all;
}

TEST(MoENBits, MatchesTheFloatReferenceWithinTheQuantizationBound) {
  // Widths that are and are not multiples of 32-value sub-blocks and 8-row tiles; 1 to 37 tokens.
  for (const Quant& q : AllQuants()) {
    for (const MoeCase c : {MoeCase{64, 48, 8}, MoeCase{40, 20, 4}}) {
      for (int64_t t : {1, 5, 37}) {
        CheckAgainstReference(c, q, {1, t, c.h}, 2, true, false);
      }
    }
  }
  const Quant q{4, 32, false};
  CheckAgainstReference({40, 24, 8}, q, {2, 5, 40}, 2, false, false);  // rank 3, not renormalized
  CheckAgainstReference({40, 24, 8}, q, {6, 40}, 1, true, false);      // top-1
  CheckAgainstReference({24, 16, 3}, q, {9, 24}, 3, true, false);      // every expert
}

// On the dequantized weights only the activations' rounding remains: a bound that much tighter,
// and a signal-to-noise ratio far above the one against the float weights. (The worst-case bounds
// sum every rounding with one sign; the errors seen stay within ~5% of them, so the SQNR is the
// sharper check: a wrong scale, zero point or nibble costs tens of dB.) Measured on these random
// weights: 40-42 dB (4 bits, activations per 127) and 34-37 dB (8 bits, per 63: the activations'
// rounding dominates) against the dequantized weights; against the float ones 19 dB at 4 bits,
// 34-36 dB at 8.
TEST(MoENBits, MatchesTheDequantizedWeightsReferenceWithinActivationRounding) {
  for (const Quant& q : AllQuants()) {
    for (int64_t t : {1, 37}) {
      const Agreement dq = CheckAgainstReference({64, 48, 8}, q, {t, 64}, 2, true, true);
      const Agreement fp = CheckAgainstReference({64, 48, 8}, q, {t, 64}, 2, true, false);
      const std::string name = std::to_string(q.bits) + " bits, group " + std::to_string(q.group) +
                               (q.asym ? " asym" : " sym") + ", tokens " + std::to_string(t);
      EXPECT_GT(dq.sqnr_db, q.bits == 4 ? 37.0 : 32.0) << name;
      EXPECT_GT(fp.sqnr_db, q.bits == 4 ? 16.5 : 31.0) << name;
      if (q.bits == 4) {
        EXPECT_GT(dq.sqnr_db, fp.sqnr_db + 15.0) << name;
      }
    }
  }
}

// The same experts through the float MoE on the dequantized weights: the two kernels agree to
// the activations' rounding (a loose sanity check that both read the same layout), and the
// quantized kernel's error against the float weights is the size the quantization predicts
// (8 bits several times closer than 4).
TEST(MoENBits, EightBitsAreCloserToFloatThanFour) {
  const MoeCase c{128, 96, 8};
  const FloatWeights w = RandomWeights(c, 21);
  const Tensor x = RandomFloat({16, c.h}, -1.f, 1.f, 22);
  auto ref = testing::RunNode("MoE", {{"top_k", AttrInt(2)}}, {x, w.router, w.gate, w.up, w.down},
                              1, 17, {1, 2, 3, 4}, "ai.inferd");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  double rms[2] = {0, 0}, norm = 0;
  for (int b = 0; b < 2; ++b) {
    const Quant q{b == 0 ? 4 : 8, 32, false};
    auto out = RunNode(Inputs(x, Quantize(w, q)), q, 2, 1, 1);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      const double want = (*ref)[0].data<float>()[i];
      rms[b] += std::pow((*out)[0].data<float>()[i] - want, 2);
      if (b == 0) norm += want * want;
    }
  }
  const double db4 = 10 * std::log10(norm / rms[0]), db8 = 10 * std::log10(norm / rms[1]);
  EXPECT_GT(db4, 15.0);  // random uniform weights: 19.4 dB at 4 bits, 33.6 at 8 (measured)
  EXPECT_GT(db8, db4 + 12.0) << "4 bits " << db4 << " dB, 8 bits " << db8 << " dB";
}

// A token's output is bit-identical alone, among 20 (a decode-sized step: the small parts on the
// calling thread) or among 100 (every phase parallel, 25 rows per expert).
TEST(MoENBits, ATokenDoesNotDependOnTheBatch) {
  const MoeCase c{64, 40, 8};
  for (const Quant& q : {Quant{4, 32, false}, Quant{8, 64, true}}) {
    const QuantWeights w = Quantize(RandomWeights(c, 9), q);
    const Tensor batch = RandomFloat({1, 100, c.h}, -1.f, 1.f, 4);
    auto all = RunNode(Inputs(batch, w), q, 2, 1, 1);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    Tensor twenty = Tensor::Allocate(DataType::kFloat32, {1, 20, c.h});
    std::copy_n(batch.data<float>(), 20 * c.h, twenty.data<float>());
    auto some = RunNode(Inputs(twenty, w), q, 2, 1, 1);
    ASSERT_TRUE(some.ok()) << some.status().ToString();
    for (int64_t o = 0; o < 20 * c.h; ++o) {
      ASSERT_EQ((*some)[0].data<float>()[o], (*all)[0].data<float>()[o]) << o;
    }
    for (int64_t tok : {0, 7, 19, 99}) {
      Tensor one = Tensor::Allocate(DataType::kFloat32, {1, 1, c.h});
      std::copy_n(batch.data<float>() + tok * c.h, c.h, one.data<float>());
      auto alone = RunNode(Inputs(one, w), q, 2, 1, 1);
      ASSERT_TRUE(alone.ok()) << alone.status().ToString();
      for (int64_t o = 0; o < c.h; ++o) {
        ASSERT_EQ((*alone)[0].data<float>()[o], (*all)[0].data<float>()[tok * c.h + o])
            << q.bits << " bits, token " << tok;
      }
    }
  }
}

void ExpectFails(const StatusOr<std::vector<Tensor>>& r, const std::string& reason) {
  ASSERT_FALSE(r.ok()) << "expected a failure naming: " << reason;
  EXPECT_NE(r.status().message().find(reason), std::string::npos) << r.status().ToString();
}

TEST(MoENBits, BadAttributesAndWeightsFailTheLoadWithTheReason) {
  const MoeCase c{64, 16, 4};
  const Quant q4{4, 32, false}, q8a{8, 32, true};
  const QuantWeights w = Quantize(RandomWeights(c, 1), q4);
  const QuantWeights wa = Quantize(RandomWeights(c, 1), q8a);
  const Tensor x = RandomFloat({1, 2, 64});
  ExpectFails(RunNode(Inputs(x, w), {3, 32, false}, 2), "bits must be 4 or 8, got 3");
  ExpectFails(RunNode(Inputs(x, w), {4, 16, false}, 2), "block_size must be 32, 64 or 128, got 16");
  ExpectFails(RunNode(Inputs(x, w), q4, 5), "top_k 5 outside 1..4");
  ExpectFails(RunNode(Inputs(x, w), q4, 2, 2), "normalize must be 0 or 1");
  // 4-bit codes declared as 8 bits: the codes are uint8 of the wrong width.
  ExpectFails(RunNode(Inputs(x, w), {8, 32, false}, 2), "gate must be int8 [4, 16, 64]");
  // Group 64 declared for weights packed with 32: the scales have twice the groups.
  ExpectFails(RunNode(Inputs(x, w), {4, 64, false}, 2), "gate_scales must be float32 [4, 16, 1]");
  std::vector<Tensor> in = Inputs(x, w);
  in[6] = RandomFloat({4, 64, 8});  // down codes as float
  ExpectFails(RunNode(in, q4, 2), "down must be uint8 [4, 64, 16]");
  in = Inputs(x, w);
  in[5] = RandomFloat({4, 16, 3});
  ExpectFails(RunNode(in, q4, 2), "up_scales must be float32 [4, 16, 2]");
  in = Inputs(x, wa);
  in[10] = Tensor::Allocate(DataType::kInt8, {4, 64, 2});
  ExpectFails(RunNode(in, q8a, 2), "down_zero_points must be int8 [4, 64, 1]");
  in = Inputs(x, wa);
  in.pop_back();  // zero points of gate and up only
  ExpectFails(RunNode(in, q8a, 2), "or 11 (and the zero points of gate, up and down");
  in = Inputs(x, w);
  in[1] = RandomFloat({64});
  ExpectFails(RunNode(in, q4, 2), "router must be a constant [H, E]");
  // Weights fed at run time instead of initializers.
  ExpectFails(testing::RunNode("MoENBits", {{"bits", AttrInt(4)}, {"block_size", AttrInt(32)}},
                               Inputs(x, w), 1, 17, {1, 2, 3, 4, 5, 6}, "ai.inferd"),
              "down_scales (input 7) must be an initializer");
  // X of the wrong width: the run fails, not the load.
  ExpectFails(RunNode(Inputs(RandomFloat({1, 2, 63}), w), q4, 2), "X must be float32 [..., 64]");
}

TEST(MoENBits, NonFiniteInputsPropagateWithoutCrashing) {
  const MoeCase c{32, 16, 4};
  const Quant q{8, 32, false};
  Tensor x = RandomFloat({1, 3, 32});
  x.data<float>()[32 + 5] = std::nanf("");
  auto out = RunNode(Inputs(x, Quantize(RandomWeights(c, 2), q)), q, 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::isnan((*out)[0].data<float>()[32]));  // token 1: NaN everywhere
  EXPECT_FALSE(std::isnan((*out)[0].data<float>()[0]));  // token 0 untouched
  int64_t total = 0;
  for (int64_t e = 0; e < 4; ++e) total += (*out)[1].data<int64_t>()[e];
  EXPECT_EQ(total, 6);  // the NaN token still goes to 2 distinct experts
}

}  // namespace
}  // namespace moe_nbits_test
}  // namespace inferd
