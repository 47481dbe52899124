// Bf16Compute: which BlockedConvs compute in bf16 and which activations stay bf16 between them.
#include "optimizer/bf16_compute.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/onednn/bf16_choice.h"
#include "optimizer/test_graphs.h"

namespace inferd::testing {
namespace {

// Rounds every value to the nearest bf16 (what a Cast from a bf16 initializer yields).
Tensor Bf16Exact(Tensor t) {
  for (float& v : std::span<float>(t.data<float>(), t.NumElements())) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&v, &bits, sizeof(bits));
  }
  return t;
}

// The largest |got - want| over two float32 tensors of one shape.
double MaxAbsDiff(const Tensor& got, const Tensor& want) {
  double max_diff = 0;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    max_diff = std::max<double>(max_diff, std::fabs(got.data<float>()[i] - want.data<float>()[i]));
  }
  return max_diff;
}

// compute_bf16 layers compute in bf16 only where bf16 pays on this CPU (kernels/cpu/onednn/
// bf16_choice.h: native bf16, measured faster than FP32, per layer kind); elsewhere the kernels
// compute in FP32 from the same (bf16-valued) weights, so the outputs equal the FP32 model's
// exactly.
void ExpectBf16OrFp32(const Tensor& got, const Tensor& want, double min_bf16_diff, bool bf16) {
  if (bf16) {
    EXPECT_GT(MaxAbsDiff(got, want), min_bf16_diff) << "did not compute in bf16";
  } else {
    EXPECT_EQ(MaxAbsDiff(got, want), 0) << "bf16 does not pay here: FP32 compute expected";
  }
}

// x[1, 3, 9, 9] → c1 (→ 20) → Relu → c2 (→ 20) + r1 → Relu → c3 (→ 24) → c4 (FP32 weights,
// as --exclude leaves them) → MaxPool → y. All four Convs are blocked at level all.
Model ChainModel(bool request_bf16) {
  ModelBuilder b;
  b.Input("x", {1, 3, 9, 9});
  b.Init("W1", Bf16Exact(RandomFloat({20, 3, 3, 3}, -1, 1, 30)))
      .Init("B1", RandomFloat({20}, -1, 1, 31));
  b.Init("W2", Bf16Exact(RandomFloat({20, 20, 3, 3}, -0.3f, 0.3f, 32)));
  b.Init("W3", Bf16Exact(RandomFloat({24, 20, 1, 1}, -0.5f, 0.5f, 33)));
  b.Init("W4", RandomFloat({24, 24, 3, 3}, -0.2f, 0.2f, 34));  // not bf16-exact
  const auto pad = AttrInts({1, 1, 1, 1});
  b.Add("Conv", {"x", "W1", "B1"}, {"c1"}, {{"pads", pad}, {"strides", AttrInts({2, 2})}}, "c1");
  b.Add("Relu", {"c1"}, {"r1"});
  b.Add("Conv", {"r1", "W2"}, {"c2"}, {{"pads", pad}}, "c2");
  b.ValueShape("c1", {1, 20, 5, 5}).ValueShape("r1", {1, 20, 5, 5}).ValueShape("c2", {1, 20, 5, 5});
  b.Add("Add", {"c2", "r1"}, {"s"});
  b.Add("Relu", {"s"}, {"r2"});
  b.Add("Conv", {"r2", "W3"}, {"c3"}, {}, "c3");
  b.ValueShape("s", {1, 20, 5, 5}).ValueShape("r2", {1, 20, 5, 5}).ValueShape("c3", {1, 24, 5, 5});
  b.Add("Conv", {"c3", "W4"}, {"c4"}, {{"pads", pad}}, "c4");
  b.Add("MaxPool", {"c4"}, {"y"}, {{"kernel_shape", AttrInts({2, 2})}});
  b.Output("y");
  if (request_bf16) b.model().metadata[kComputePrecisionKey] = "bf16";
  return b.Build();
}

const Node* Find(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes) {
    if (n->name == name) return n.get();
  }
  return nullptr;
}

TEST(Bf16Compute, MarksBf16WeightConvsAndKeepsActivationsBetweenThem) {
  OptimizationReport report;
  Model opt = Optimized(ChainModel(true), &report, OptimizationLevel::kAll);
  EXPECT_GT(Fired(report, "Bf16Compute"), 0);
  struct Want {
    const char* node;
    int compute, x, z, y;
  };
  // c1's output r1 is read by c2 as X and as Z (both bf16); c3's reader c4 has FP32 weights, so
  // c3 writes float32; c4 computes in FP32.
  for (const Want& w : {Want{"c1", 1, 0, 0, 1}, Want{"c2", 1, 1, 1, 1}, Want{"c3", 1, 1, 0, 0},
                        Want{"c4", 0, 0, 0, 0}}) {
    const Node* n = Find(opt.graph, w.node);
    ASSERT_NE(n, nullptr) << w.node;
    EXPECT_EQ(n->op_type, "BlockedConv") << w.node;
    EXPECT_EQ(n->GetInt("compute_bf16", 0), w.compute) << w.node;
    EXPECT_EQ(n->GetInt("x_bf16", 0), w.x) << w.node;
    EXPECT_EQ(n->GetInt("z_bf16", 0), w.z) << w.node;
    EXPECT_EQ(n->GetInt("y_bf16", 0), w.y) << w.node;
  }
  // A second run changes nothing.
  EXPECT_EQ(*Bf16Compute().Run(opt.graph), 0);
}

TEST(Bf16Compute, OnlyWhenTheModelAsksForIt) {
  OptimizationReport report;
  Model opt = Optimized(ChainModel(false), &report, OptimizationLevel::kAll);
  EXPECT_EQ(Fired(report, "Bf16Compute"), -1);
  for (const auto& n : opt.graph.nodes) EXPECT_FALSE(n->HasAttribute("compute_bf16"));
  // The extended level has no blocked convolutions to mark.
  Optimized(ChainModel(true), &report, OptimizationLevel::kExtended);
  EXPECT_EQ(Fired(report, "Bf16Compute"), -1);
}

TEST(Bf16Compute, OutputsStayCloseToFp32) {
  // bf16 activations carry 8 significant bits: ~0.4% relative error per rounding.
  const std::vector<Tensor> x = {RandomFloat({1, 3, 9, 9}, -1, 1, 35)};
  auto want = RunModel(ChainModel(false), x, OptimizationLevel::kAll);
  auto got = RunModel(ChainModel(true), x, OptimizationLevel::kAll);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << got.status().ToString();
  ExpectTensorNear((*got)[0], (*want)[0], 3e-2, 3e-2);
  // ... and not equal where the convolutions did compute in bf16.
  ExpectBf16OrFp32((*got)[0], (*want)[0], 1e-5, cpu::Bf16ComputeChoice().conv);
  // Against the unoptimized FP32 graph on other data.
  ExpectSameOutputs(ChainModel(true), {RandomFloat({1, 3, 9, 9}, -1, 1, 36)},
                    OptimizationLevel::kAll, 3e-2, 3e-2);
}

TEST(Bf16Compute, FusedMatMulWithBf16WeightsComputesInBf16) {
  auto model = [](bool request_bf16) {
    ModelBuilder b;
    b.Input("x", {2, 3, 40});
    b.Init("W", Bf16Exact(RandomFloat({40, 24}, -0.5f, 0.5f, 40)))
        .Init("bias", RandomFloat({24}, -1, 1, 41));
    b.Add("MatMul", {"x", "W"}, {"mm"}, {}, "mm");
    b.ValueShape("mm", {2, 3, 24});
    b.Add("Add", {"mm", "bias"}, {"a"});
    b.ValueShape("a", {2, 3, 24});
    b.Add("Relu", {"a"}, {"y"});
    b.Output("y");
    if (request_bf16) b.model().metadata[kComputePrecisionKey] = "bf16";
    return b.Build();
  };
  Model opt = Optimized(model(true), nullptr, OptimizationLevel::kAll);
  int marked = 0;
  for (const auto& n : opt.graph.nodes) {
    if (n->op_type == "FusedMatMul") marked += n->GetInt("compute_bf16", 0) == 1;
  }
  EXPECT_EQ(marked, 1);
  const std::vector<Tensor> x = {RandomFloat({2, 3, 40}, -1, 1, 42)};
  auto want = RunModel(model(false), x, OptimizationLevel::kAll);
  auto got = RunModel(model(true), x, OptimizationLevel::kAll);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << got.status().ToString();
  ExpectTensorNear((*got)[0], (*want)[0], 3e-2, 3e-2);
  ExpectBf16OrFp32((*got)[0], (*want)[0], 1e-6, cpu::Bf16ComputeChoice().matmul);
}

}  // namespace
}  // namespace inferd::testing
