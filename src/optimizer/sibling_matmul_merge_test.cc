#include "optimizer/sibling_matmul_merge.h"

#include <gtest/gtest.h>

#include <random>

#include "optimizer/test_graphs.h"

namespace inferd {
namespace {

using testing::CloneModel;
using testing::CountOps;
using testing::ExpectTensorNear;
using testing::ModelBuilder;
using testing::RunModel;

Tensor RandomTensor(Shape shape, uint32_t seed) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// x [2, 3, 4] read by q/k/v MatMuls (N 3, 5, 2), by one with another K (through y) and by one
// with a non-constant B; z reads x alone.
Model Projections() {
  ModelBuilder b;
  b.Input("x", {2, 3, 4}).Input("b", {4, 6});
  b.Init("wq", RandomTensor({4, 3}, 1)).Init("wk", RandomTensor({4, 5}, 2));
  b.Init("wv", RandomTensor({4, 2}, 3)).Init("wy", RandomTensor({5, 7}, 4));
  b.Add("MatMul", {"x", "wq"}, {"q"});
  b.Add("MatMul", {"x", "wk"}, {"k"});
  b.Add("MatMul", {"x", "wv"}, {"v"});
  b.Add("MatMul", {"k", "wy"}, {"y"});
  b.Add("MatMul", {"x", "b"}, {"z"});
  for (const char* out : {"q", "k", "v", "y", "z"}) b.Output(out);
  return b.Build();
}

TEST(SiblingMatMulMerge, MergesProjectionsOfOneInputExactly) {
  Model m = Projections();
  Model merged = CloneModel(m);
  auto fired = SiblingMatMulMerge().Run(merged.graph);
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_EQ(*fired, 1);
  EXPECT_EQ(CountOps(merged.graph, "MatMul"), 3);  // merged q/k/v, y, z
  EXPECT_EQ(CountOps(merged.graph, "Split"), 1);
  for (const char* w : {"wq", "wk", "wv"}) EXPECT_FALSE(merged.graph.IsInitializer(w)) << w;
  EXPECT_TRUE(merged.graph.IsInitializer("wy"));
  const std::vector<Tensor> in = {RandomTensor({2, 3, 4}, 5), RandomTensor({4, 6}, 6)};
  auto want = RunModel(CloneModel(m), in, OptimizationLevel::kNone);
  auto got = RunModel(std::move(merged), in, OptimizationLevel::kAll);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) ExpectTensorNear((*got)[i], (*want)[i], 1e-5, 1e-6);
}

TEST(SiblingMatMulMerge, KeepsWeightsOthersStillRead) {
  Model m = Projections();
  m.graph.AddNode("Relu", {"wq"}, {"r"}, "relu");
  m.graph.outputs.push_back(m.graph.outputs[0]);
  m.graph.outputs.back().name = "r";
  auto fired = SiblingMatMulMerge().Run(m.graph);
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_TRUE(m.graph.IsInitializer("wq"));
  EXPECT_FALSE(m.graph.IsInitializer("wk"));
}

TEST(SiblingMatMulMerge, LeavesSingleProjectionsAlone) {
  ModelBuilder b;
  b.Input("x", {1, 4});
  b.Init("w", RandomTensor({4, 3}, 1));
  b.Add("MatMul", {"x", "w"}, {"y"});
  b.Output("y");
  Model m = b.Build();
  auto fired = SiblingMatMulMerge().Run(m.graph);
  ASSERT_TRUE(fired.ok());
  EXPECT_EQ(*fired, 0);
  EXPECT_EQ(CountOps(m.graph, "MatMul"), 1);
}

}  // namespace
}  // namespace inferd
