#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/onednn/gemm_weights.h"
#include "kernels/cpu/util/broadcast.h"
#include "kernels/cpu/util/kernel_util.h"
#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrFloat;
using testing::AttrInt;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

// numpy.matmul in double, for float32 or int64 tensors.
Tensor RefMatMul(const Tensor& a, const Tensor& b) {
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch = *BroadcastShapes({ab, bb});
  Shape out = batch;
  if (a.rank() != 1) out.push_back(m);
  if (b.rank() != 1) out.push_back(n);
  Tensor y = Tensor::Allocate(a.dtype(), out);
  BroadcastIterator it(PlanBroadcast(batch, {ab, bb}));
  for (int64_t bi = 0; bi < NumElements(batch); ++bi, it.Next()) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) {
          acc += a.GetAsDouble(it.offset(0) * m * k + i * k + q) *
                 b.GetAsDouble(it.offset(1) * k * n + q * n + j);
        }
        const int64_t o = (bi * m + i) * n + j;
        if (a.dtype() == DataType::kFloat32) {
          y.data<float>()[o] = static_cast<float>(acc);
        } else {
          y.data<int64_t>()[o] = static_cast<int64_t>(acc);
        }
      }
    }
  }
  return y;
}

Tensor RandomInt64(Shape s, uint32_t seed) {
  Tensor f = RandomFloat(s, -5, 5, seed);
  Tensor t = Tensor::Allocate(DataType::kInt64, s);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<int64_t>()[i] = static_cast<int64_t>(f.data<float>()[i]);
  return t;
}

TEST(NnMatMul, MatchesReference) {
  std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},       {{2, 3, 4}, {4, 5}},    {{2, 1, 3, 4}, {3, 4, 2}},
      {{4}, {4, 5}},          {{3, 4}, {4}},          {{4}, {4}},
      {{2, 3, 4}, {2, 4, 6}}, {{1, 7, 16}, {5, 16, 8}}, {{64, 33}, {33, 70}},
  };
  for (const auto& [as, bs] : cases) {
    SCOPED_TRACE(ShapeToString(as) + " x " + ShapeToString(bs));
    Tensor a = RandomFloat(as, -1, 1, 1), b = RandomFloat(bs, -1, 1, 2);
    Tensor ref = RefMatMul(a, b);
    for (bool const_b : {false, true}) {
      auto out = RunNode("MatMul", {}, {a, b}, 1, 13, const_b ? std::vector<size_t>{1} : std::vector<size_t>{});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectTensorNear((*out)[0], ref, 1e-4, 1e-5);
    }
    Tensor ai = RandomInt64(as, 3), bi = RandomInt64(bs, 4);
    auto outi = RunNode("MatMul", {}, {ai, bi}, 1);
    ASSERT_TRUE(outi.ok()) << outi.status().ToString();
    ExpectTensorNear((*outi)[0], RefMatMul(ai, bi), 0, 0);
  }
}

TEST(NnMatMul, BadInputs) {
  EXPECT_FALSE(RunNode("MatMul", {}, {RandomFloat({3, 4}), RandomFloat({5, 6})}, 1).ok());
  EXPECT_FALSE(RunNode("MatMul", {}, {RandomFloat({2, 3, 4}), RandomFloat({3, 4, 5})}, 1).ok());
  EXPECT_FALSE(RunNode("MatMul", {}, {Tensor::Scalar(1.f), RandomFloat({3})}, 1).ok());
  EXPECT_FALSE(RunNode("MatMul", {}, {RandomFloat({3, 4}), RandomInt64({4, 2}, 1)}, 1).ok());
}

// A constant 2-D float32 B on every GemmWeights path (each forced; auto is the CPU's choice), at
// row counts on both sides of PanelGemmMaxRows, A of rank 1 to 3.
TEST(NnMatMul, ConstantWeightsOnEveryGemmPath) {
  const Tensor b = RandomFloat({64, 37}, -1, 1, 5);
  const std::vector<Shape> a_shapes = {{64}, {1, 64}, {3, 64}, {2, 7, 64}, {130, 64}, {3, 50, 64}};
  for (GemmPath path : {GemmPath::kPanel, GemmPath::kOneDnn, GemmPath::kByRows, GemmPath::kAuto}) {
    ScopedGemmPathForTesting scoped(path);
    for (const Shape& as : a_shapes) {
      SCOPED_TRACE(::testing::Message()
                   << "path " << static_cast<int>(path) << ", A " << ShapeToString(as));
      const Tensor a = RandomFloat(as, -1, 1, 6);
      auto out = RunNode("MatMul", {}, {a, b}, 1, 13, {1});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectTensorNear((*out)[0], RefMatMul(a, b), 1e-4, 1e-5);
    }
  }
}

// A one-node MatMul session over the constant B (kept by the caller: the session erases it).
std::unique_ptr<Session> MatMulSession(const Tensor& b, bool batch_invariant) {
  Model model;
  model.opsets[""] = 13;
  Graph& g = model.graph;
  g.name = "matmul";
  ValueInfo in;
  in.name = "a";
  in.dtype = DataType::kFloat32;
  g.inputs = {in};
  ValueInfo out;
  out.name = "y";
  g.outputs = {out};
  g.initializers["b"] = b;
  g.AddNode("MatMul", {"a", "b"}, {"y"}, "mm");
  SessionOptions opts;
  opts.num_threads = 2;
  opts.batch_invariant_matmul = batch_invariant;
  auto s = Session::Create(std::move(model), opts);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// By rows: encoder-sized calls run oneDNN on the initializer's own buffer (no copy), then once
// small calls outnumber them the weights become panels and the plain copy goes; every result
// right along the way.
TEST(NnMatMul, ByRowsHoldsOneCopyAndSwitchesToPanels) {
  ScopedGemmPathForTesting scoped(GemmPath::kByRows);
  const Tensor b = RandomFloat({64, 37}, -1, 1, 7);
  const GemmWeights::Totals before = GemmWeights::LiveTotals();
  auto session = MatMulSession(b, false);
  ASSERT_TRUE(session);
  auto run = [&](int64_t rows) {
    SCOPED_TRACE(rows);
    const Tensor a = RandomFloat({rows, 64}, -1, 1, static_cast<uint32_t>(rows));
    std::vector<Tensor> outs;
    ASSERT_TRUE(session->Run({a}, &outs).ok());
    ExpectTensorNear(outs[0], RefMatMul(a, b), 1e-4, 1e-5);
  };
  using Bytes = std::pair<int64_t, int64_t>;  // plain, panels
  auto held = [&] {
    const GemmWeights::Totals now = GemmWeights::LiveTotals();
    return Bytes(now.plain_bytes - before.plain_bytes, now.panel_bytes - before.panel_bytes);
  };
  const int64_t plain = static_cast<int64_t>(b.ByteSize());
  const int64_t large = PanelGemmMaxRows(64, 37) + 1;
  run(large);
  run(large);
  EXPECT_EQ(held(), Bytes(plain, 0));
  run(1);
  run(2);
  EXPECT_EQ(held(), Bytes(plain, 0));  // two small against two large: still plain
  run(3);  // three against two: panels (3 of 16 columns, the last padded), no plain copy
  EXPECT_EQ(held(), Bytes(0, 64 * 48 * 4));
  run(large);
  run(1);
  session.reset();
  EXPECT_EQ(held(), Bytes(0, 0));
}

// A batch-invariant session (the decoder runner's) computes a row bit for bit the same alone as
// among 200 (PanelGemm for every M, whatever the by-rows rule would take).
TEST(NnMatMul, BatchInvariantRowsDoNotDependOnTheBatch) {
  ScopedGemmPathForTesting scoped(GemmPath::kByRows);
  const Tensor b = RandomFloat({300, 40}, -1, 1, 8);
  auto session = MatMulSession(b, true);
  ASSERT_TRUE(session);
  const Tensor a = RandomFloat({200, 300}, -1, 1, 9);
  std::vector<Tensor> all;
  ASSERT_TRUE(session->Run({a}, &all).ok());
  ExpectTensorNear(all[0], RefMatMul(a, b), 1e-4, 1e-5);
  for (int64_t row : {0, 77, 199}) {
    const Tensor one = Tensor::FromVector(
        std::vector<float>(a.data<float>() + row * 300, a.data<float>() + (row + 1) * 300),
        {1, 300});
    std::vector<Tensor> outs;
    ASSERT_TRUE(session->Run({one}, &outs).ok());
    EXPECT_EQ(std::memcmp(outs[0].raw_data(), all[0].data<float>() + row * 40, 40 * sizeof(float)),
              0)
        << "row " << row;
  }
}

Tensor RefGemm(const Tensor& a, const Tensor& b, const Tensor* c, bool ta, bool tb, float alpha,
               float beta) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  Tensor y = Tensor::Allocate(DataType::kFloat32, {m, n});
  std::vector<int64_t> cs = c ? BroadcastStrides(c->shape(), {m, n}) : std::vector<int64_t>{};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < k; ++q) {
        acc += double(a.data<float>()[ta ? q * m + i : i * k + q]) *
               b.data<float>()[tb ? j * k + q : q * n + j];
      }
      double v = alpha * acc + (c ? beta * c->data<float>()[i * cs[0] + j * cs[1]] : 0.0);
      y.data<float>()[i * n + j] = static_cast<float>(v);
    }
  }
  return y;
}

TEST(NnGemm, MatchesReference) {
  const int64_t m = 5, k = 7, n = 6;
  std::vector<Shape> c_shapes = {{}, {n}, {1, n}, {m, 1}, {m, n}};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float alpha : {1.f, 0.5f}) {
        for (float beta : {1.f, 2.f}) {
          for (size_t ci = 0; ci <= c_shapes.size(); ++ci) {
            SCOPED_TRACE(::testing::Message() << ta << tb << " " << alpha << " " << beta << " c" << ci);
            Tensor a = RandomFloat(ta ? Shape{k, m} : Shape{m, k}, -1, 1, 1);
            Tensor b = RandomFloat(tb ? Shape{n, k} : Shape{k, n}, -1, 1, 2);
            std::vector<Tensor> ins = {a, b};
            Tensor c;
            if (ci < c_shapes.size()) {
              c = RandomFloat(c_shapes[ci], -1, 1, 3);
              ins.push_back(c);
            }
            Tensor ref = RefGemm(a, b, c.defined() ? &c : nullptr, ta, tb, alpha, beta);
            for (bool const_b : {false, true}) {
              auto out = RunNode("Gemm",
                                 {{"transA", AttrInt(ta)}, {"transB", AttrInt(tb)},
                                  {"alpha", AttrFloat(alpha)}, {"beta", AttrFloat(beta)}},
                                 ins, 1, 13, const_b ? std::vector<size_t>{1} : std::vector<size_t>{});
              ASSERT_TRUE(out.ok()) << out.status().ToString();
              ExpectTensorNear((*out)[0], ref, 1e-4, 1e-5);
            }
          }
        }
      }
    }
  }
}

TEST(NnGemm, IntegerAndBadInputs) {
  Tensor a = Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::FromVector<int32_t>({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor c = Tensor::FromVector<int32_t>({10, 20}, {2});
  auto out = RunNode("Gemm", {}, {a, b, c}, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], Tensor::FromVector<int32_t>({14, 25, 20, 31}, {2, 2}), 0, 0);
  EXPECT_FALSE(RunNode("Gemm", {}, {RandomFloat({2, 3}), RandomFloat({4, 2})}, 1).ok());
  EXPECT_FALSE(RunNode("Gemm", {}, {RandomFloat({2, 3, 1}), RandomFloat({3, 2})}, 1).ok());
  EXPECT_FALSE(
      RunNode("Gemm", {}, {RandomFloat({2, 3}), RandomFloat({3, 2}), RandomFloat({3})}, 1).ok());
}

}  // namespace
}  // namespace inferd::cpu
