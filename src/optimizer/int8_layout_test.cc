// Int8LayoutPropagation and QdqFusion's residual join on a small QDQ ResNet-like graph: three
// blocks (1x1, grouped 3x3, strided 3x3, 1x1 and 3x3 convolutions with residual joins; a strided
// downsample branch), a pool after the last join and a graph output inside the chain.
// Level all (NHWC chains, fused joins) must compute what level basic (NCHW QLinearConv +
// DequantizeAdd) computes, up to one unit of requantization rounding.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "optimizer/int8_layout.h"
#include "optimizer/test_graphs.h"

namespace inferd::testing {
namespace {

class QdqBuilder {
 public:
  explicit QdqBuilder(ModelBuilder& b) : b_(b) {}

  // Q → DQ of a float value: returns the DequantizeLinear output.
  std::string QuantDequant(const std::string& x, float scale, uint8_t zp) {
    const std::string s = x + "_s", z = x + "_zp", q = x + "_q", dq = x + "_dq";
    b_.Init(s, Tensor::Scalar<float>(scale)).Init(z, Tensor::Scalar<uint8_t>(zp));
    b_.Add("QuantizeLinear", {x, s, z}, {q});
    b_.Add("DequantizeLinear", {q, s, z}, {dq});
    scale_[dq] = scale;
    return dq;
  }

  // DQ(x) → Conv(DQ(int8 W), DQ(int32 B)) [→ Relu] → Q → DQ, per-channel weights.
  std::string Conv(const std::string& x_dq, const std::string& name, Shape w,
                   std::map<std::string, Attribute> attrs, bool relu, float y_scale,
                   uint8_t y_zp) {
    const int64_t m = w[0];
    const float x_scale = scale_.at(x_dq);
    std::mt19937 rng(seed_++);
    std::uniform_int_distribution<int> wd(-127, 127), bd(-3000, 3000);
    Tensor wq = Tensor::Allocate(DataType::kInt8, w), bq = Tensor::Allocate(DataType::kInt32, {m});
    for (int64_t i = 0; i < wq.NumElements(); ++i) wq.data<int8_t>()[i] = wd(rng);
    std::vector<float> ws(m), bs(m);
    for (int64_t i = 0; i < m; ++i) {
      ws[i] = 0.002f * (1 + i % 4);
      bs[i] = x_scale * ws[i];
      bq.data<int32_t>()[i] = bd(rng);
    }
    b_.Init(name + "_wq", wq).Init(name + "_ws", Tensor::FromVector<float>(ws, {m}));
    b_.Init(name + "_bq", bq).Init(name + "_bs", Tensor::FromVector<float>(bs, {m}));
    b_.Add("DequantizeLinear", {name + "_wq", name + "_ws"}, {name + "_w"}, {{"axis", AttrInt(0)}});
    b_.Add("DequantizeLinear", {name + "_bq", name + "_bs"}, {name + "_b"}, {{"axis", AttrInt(0)}});
    b_.Add("Conv", {x_dq, name + "_w", name + "_b"}, {name + "_y"}, std::move(attrs), name);
    std::string y = name + "_y";
    if (relu) {
      b_.Add("Relu", {y}, {name + "_relu"});
      y = name + "_relu";
    }
    return QuantDequant(y, y_scale, y_zp);
  }

 private:
  ModelBuilder& b_;
  std::map<std::string, float> scale_;
  uint32_t seed_ = 7;
};

Model BlocksModel() {
  ModelBuilder b(13);
  b.Input("x", {2, 8, 10, 10});
  QdqBuilder q(b);
  const std::map<std::string, Attribute> pad1 = {{"pads", AttrInts({1, 1, 1, 1})}};
  // Block 1: identity residual (the graph input itself).
  std::string x = q.QuantDequant("x", 0.02f, 128);
  std::string a = q.Conv(x, "b1_c1", {8, 8, 1, 1}, {}, true, 0.03f, 0);
  std::string c = q.Conv(a, "b1_c2", {8, 4, 3, 3},
                         {{"pads", AttrInts({1, 1, 1, 1})}, {"group", AttrInt(2)}}, true, 0.03f, 0);
  std::string d = q.Conv(c, "b1_c3", {8, 8, 1, 1}, {}, false, 0.04f, 128);
  b.Add("Add", {d, "x"}, {"b1_sum"});
  b.Add("Relu", {"b1_sum"}, {"r1"});
  // Block 2: strided, with a downsample branch; r1 is also a graph output.
  std::string r1 = q.QuantDequant("r1", 0.03f, 0);
  std::string e = q.Conv(r1, "b2_c1", {16, 8, 3, 3},
                         {{"pads", AttrInts({1, 1, 1, 1})}, {"strides", AttrInts({2, 2})}}, true,
                         0.03f, 0);
  std::string f = q.Conv(e, "b2_c2", {16, 16, 1, 1}, {}, false, 0.05f, 120);
  std::string ds = q.Conv(r1, "b2_ds", {16, 8, 1, 1}, {{"strides", AttrInts({2, 2})}}, false,
                          0.05f, 130);
  b.Add("Add", {f, ds}, {"b2_sum"});
  b.Add("Relu", {"b2_sum"}, {"r2"});
  // Block 3: identity residual r2, NHWC in the chain; its join feeds the pool (NCHW).
  std::string r2 = q.QuantDequant("r2", 0.03f, 0);
  std::string g = q.Conv(r2, "b3_c1", {16, 16, 1, 1}, {}, true, 0.03f, 0);
  std::string h = q.Conv(g, "b3_c2", {16, 16, 3, 3}, pad1, false, 0.05f, 125);
  b.Add("Add", {h, "r2"}, {"b3_sum"});
  b.Add("Relu", {"b3_sum"}, {"r3"});
  b.Add("GlobalAveragePool", {"r3"}, {"pooled"});
  b.Output("pooled").Output("r1");
  for (const std::string& v : {d, std::string("x"), std::string("b1_sum"), std::string("r1")}) {
    b.ValueShape(v, {2, 8, 10, 10});
  }
  for (const std::string& v : {f, ds, h, std::string("b2_sum"), std::string("r2"),
                               std::string("b3_sum"), std::string("r3")}) {
    b.ValueShape(v, {2, 16, 5, 5});
  }
  return b.Build();
}

int CountDomainOps(const Graph& g, const std::string& domain, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node->domain == domain && node->op_type == op;
  return n;
}

TEST(Int8LayoutPropagationTest, ChannelsLastChainsAndFusedJoins) {
  const Model model = BlocksModel();
  Model basic = Optimized(model, nullptr, OptimizationLevel::kBasic);
  // Basic: the residual joins are conv post-ops already, NCHW.
  EXPECT_EQ(CountDomainOps(basic.graph, "ai.inferd", "DequantizeAdd"), 0);
  EXPECT_EQ(CountDomainOps(basic.graph, "ai.inferd", "QLinearConv"), 3);
  OptimizationReport report;
  Model all = Optimized(model, &report, OptimizationLevel::kAll);
  EXPECT_GT(Fired(report, "Int8LayoutPropagation"), 0);
  int nhwc_in = 0, nhwc_out = 0, fused = 0;
  for (const auto& n : all.graph.nodes) {
    if (n->op_type != "QLinearConv") continue;
    EXPECT_EQ(n->domain, "ai.inferd") << n->name;
    nhwc_in += n->GetInt("x_channels_last", 0) != 0;
    nhwc_out += n->GetInt("y_channels_last", 0) != 0;
    fused += n->HasInput(9);
  }
  // NCHW in: b1_c1 (graph input), b2_c1 and b2_ds (r1 is a graph output). NCHW out: b1_c3 (its
  // Z is the graph input), b3_c2 (feeds the pool). r2 is NHWC: its reader b3_c2's Z gets a
  // Transpose. All three joins are fused.
  EXPECT_EQ(nhwc_in, 5);
  EXPECT_EQ(nhwc_out, 6);
  EXPECT_EQ(fused, 3);
  EXPECT_EQ(CountOps(all.graph, "Transpose"), 1);
  // Running the pass again changes nothing.
  auto again = Int8LayoutPropagation().Run(all.graph);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);

  std::vector<Tensor> in = {RandomFloat({2, 8, 10, 10}, -2, 2, 5)};
  auto want = RunModel(CloneModel(model), in, OptimizationLevel::kBasic);
  auto got = RunModel(CloneModel(model), in, OptimizationLevel::kAll);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  // One requantization unit of the last layers (rounding ties may differ between paths).
  ExpectTensorNear((*got)[0], (*want)[0], 0, 0.06);
  ExpectTensorNear((*got)[1], (*want)[1], 0, 0.05);
  // And the float QDQ graph (level none) within a few units.
  auto ref = RunModel(CloneModel(model), in, OptimizationLevel::kNone);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  ExpectTensorNear((*got)[0], (*ref)[0], 0, 0.2);
}

// Concurrent runs of one session share the cached int8 primitives and packed weights (each run
// has its own scratch and arena): every run gives the single-threaded result exactly.
TEST(Int8LayoutPropagationTest, ConcurrentRunsAgree) {
  SessionOptions opts;
  opts.num_threads = 1;
  opts.optimization_level = OptimizationLevel::kAll;
  auto session = Session::Create(BlocksModel(), opts);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> in = {RandomFloat({2, 8, 10, 10}, -2, 2, 5)};
  std::vector<Tensor> want;
  ASSERT_TRUE((*session)->Run(std::span<const Tensor>(in), &want).ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        std::vector<Tensor> got;
        if (!(*session)->Run(std::span<const Tensor>(in), &got).ok() || got.size() != want.size()) {
          ++mismatches;
          continue;
        }
        for (size_t k = 0; k < got.size(); ++k) {
          if (std::memcmp(got[k].raw_data(), want[k].raw_data(), want[k].ByteSize()) != 0) {
            ++mismatches;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// c1's output feeds c2 (NHWC) and, dequantized, a MaxPool and an Add (NCHW): one Transpose, on
// the uint8 value before its DequantizeLinear; c2's output, read only through NCHW ops, stays NCHW.
TEST(Int8LayoutPropagationTest, TransposeForNchwReaders) {
  ModelBuilder b(13);
  b.Input("x", {1, 8, 6, 6});
  QdqBuilder q(b);
  std::string x = q.QuantDequant("x", 0.02f, 128);
  std::string a = q.Conv(x, "c1", {8, 8, 1, 1}, {}, true, 0.03f, 0);
  std::string c = q.Conv(a, "c2", {8, 8, 3, 3}, {{"pads", AttrInts({1, 1, 1, 1})}}, true, 0.03f,
                         0);
  b.Add("MaxPool", {a}, {"pool"}, {{"kernel_shape", AttrInts({2, 2})}});
  b.Add("Add", {c, a}, {"sum"});
  b.Output("pool").Output("sum");
  const Model model = b.Build();
  Model all = Optimized(model, nullptr, OptimizationLevel::kAll);
  EXPECT_EQ(CountOps(all.graph, "Transpose"), 1);
  std::vector<Tensor> in = {RandomFloat({1, 8, 6, 6}, -2, 2, 6)};
  auto want = RunModel(CloneModel(model), in, OptimizationLevel::kBasic);
  auto got = RunModel(CloneModel(model), in, OptimizationLevel::kAll);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t i = 0; i < want->size(); ++i) ExpectTensorNear((*got)[i], (*want)[i], 0, 0.04);
}

// DQ → MaxPool → Q with equal parameters becomes an int8 ai.inferd.MaxPool inside the NHWC chain
// (ResNet's stem).
TEST(Int8LayoutPropagationTest, QuantizedMaxPoolInTheChain) {
  ModelBuilder b(13);
  b.Input("x", {2, 8, 9, 9});
  QdqBuilder q(b);
  std::string x = q.QuantDequant("x", 0.02f, 128);
  std::string a = q.Conv(x, "c1", {16, 8, 3, 3}, {{"pads", AttrInts({1, 1, 1, 1})}}, true, 0.03f,
                         0);
  b.Add("MaxPool", {a}, {"pool"},
        {{"kernel_shape", AttrInts({3, 3})}, {"strides", AttrInts({2, 2})},
         {"pads", AttrInts({1, 1, 1, 1})}});
  std::string p = q.QuantDequant("pool", 0.03f, 0);
  std::string c = q.Conv(p, "c2", {8, 16, 1, 1}, {}, false, 0.05f, 128);
  b.Output(c);
  const Model model = b.Build();
  Model all = Optimized(model, nullptr, OptimizationLevel::kAll);
  int pools = 0;
  for (const auto& n : all.graph.nodes) {
    if (n->op_type != "MaxPool") continue;
    ++pools;
    EXPECT_EQ(n->domain, "ai.inferd");
    EXPECT_EQ(n->GetInt("x_channels_last", 0), 1);
    EXPECT_EQ(n->GetInt("y_channels_last", 0), 1);
  }
  EXPECT_EQ(pools, 1);
  std::vector<Tensor> in = {RandomFloat({2, 8, 9, 9}, -2, 2, 8)};
  auto want = RunModel(CloneModel(model), in, OptimizationLevel::kNone);
  auto got = RunModel(CloneModel(model), in, OptimizationLevel::kAll);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectTensorNear((*got)[0], (*want)[0], 0, 0.1);
}

}  // namespace
}  // namespace inferd::testing
