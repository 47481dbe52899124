#include "optimizer/swiglu_fusion.h"

#include <gtest/gtest.h>

#include <random>

#include "optimizer/sibling_matmul_merge.h"
#include "optimizer/test_graphs.h"

namespace inferd {
namespace swiglu_fusion_test {
namespace {

using testing::CloneModel;
using testing::CountOps;
using testing::ExpectTensorNear;
using testing::ModelBuilder;
using testing::RunModel;

Tensor RandomTensor(Shape shape, uint32_t seed, float scale = 1.f) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// A SwiGLU MLP: h = SiLU(x wg) * (x wu), F = 20 (two 8-lane vectors and a tail); `swap` lists
// up before gate (so the merged gate is the second half) and flips each Mul's operands.
Model Mlp(bool swap, bool gate_is_output = false) {
  ModelBuilder b;
  b.Input("x", {2, 3, 8});
  b.Init("wg", RandomTensor({8, 20}, 1, 3.f)).Init("wu", RandomTensor({8, 20}, 2));
  if (swap) b.Add("MatMul", {"x", "wu"}, {"u"});
  b.Add("MatMul", {"x", "wg"}, {"g"});
  if (!swap) b.Add("MatMul", {"x", "wu"}, {"u"});
  b.Add("Sigmoid", {"g"}, {"s"});
  b.Add("Mul", swap ? std::vector<std::string>{"s", "g"} : std::vector<std::string>{"g", "s"},
        {"a"});
  b.Add("Mul", swap ? std::vector<std::string>{"u", "a"} : std::vector<std::string>{"a", "u"},
        {"h"});
  b.Output("h");
  if (gate_is_output) b.Output("g");
  return b.Build();
}

TEST(SwiGluFusion, FusesTheActivationAfterTheMergeInEitherOrder) {
  for (bool swap : {false, true}) {
    SCOPED_TRACE(swap ? "up first" : "gate first");
    Model m = Mlp(swap);
    Model fused = CloneModel(m);
    ASSERT_TRUE(SiblingMatMulMerge().Run(fused.graph).ok());
    auto fired = SwiGluFusion().Run(fused.graph);
    ASSERT_TRUE(fired.ok()) << fired.status().ToString();
    EXPECT_EQ(*fired, 1);
    EXPECT_EQ(CountOps(fused.graph, "SwiGlu"), 1);
    EXPECT_EQ(CountOps(fused.graph, "Split"), 0);
    EXPECT_EQ(CountOps(fused.graph, "Sigmoid"), 0);
    EXPECT_EQ(CountOps(fused.graph, "Mul"), 0);
    EXPECT_EQ(CountOps(fused.graph, "MatMul"), 1);
    const std::vector<Tensor> in = {RandomTensor({2, 3, 8}, 3)};
    auto want = RunModel(CloneModel(m), in, OptimizationLevel::kNone);
    auto got = RunModel(std::move(fused), in, OptimizationLevel::kAll);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ((*got)[0].shape(), (Shape{2, 3, 20}));
    ExpectTensorNear((*got)[0], (*want)[0], 1e-5, 1e-6);
  }
}

TEST(SwiGluFusion, LeavesChainsWithOtherReadersAlone) {
  Model m = Mlp(false, /*gate_is_output=*/true);
  ASSERT_TRUE(SiblingMatMulMerge().Run(m.graph).ok());
  auto fired = SwiGluFusion().Run(m.graph);
  ASSERT_TRUE(fired.ok());
  EXPECT_EQ(*fired, 0);
  EXPECT_EQ(CountOps(m.graph, "Sigmoid"), 1);
  EXPECT_EQ(CountOps(m.graph, "Split"), 1);
}

TEST(SwiGluFusion, KernelRejectsAnOddLastDim) {
  ModelBuilder b;
  b.Input("x", {2, 5});
  b.Add("SwiGlu", {"x"}, {"y"})->domain = "ai.inferd";
  b.Output("y");
  auto got = RunModel(b.Build(), {RandomTensor({2, 5}, 4)}, OptimizationLevel::kNone);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().ToString().find("even"), std::string::npos) << got.status().ToString();
}

}  // namespace
}  // namespace swiglu_fusion_test
}  // namespace inferd
