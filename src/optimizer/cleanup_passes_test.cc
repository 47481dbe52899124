// Constant folding, dead-node elimination, no-op elimination and CSE on small graphs.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_provider.h"
#include "optimizer/common_subexpression_elimination.h"
#include "optimizer/constant_folding.h"
#include "optimizer/dead_node_elimination.h"
#include "optimizer/noop_elimination.h"
#include "optimizer/test_graphs.h"

namespace inferd::testing {
namespace {

Tensor Ints(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v, {(int64_t)v.size()}); }

TEST(ConstantFolding, FoldsConstantsAndWeightTransforms) {
  ModelBuilder b;
  b.Input("x", {3, 2});
  b.Add("Constant", {}, {"w"}, {{"value", AttrTensor(RandomFloat({2, 3}, -1, 1, 1))}});
  b.Add("Transpose", {"w"}, {"wt"});
  b.Add("Add", {"x", "wt"}, {"y"});
  b.Output("y");
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConstantFolding"), 2);
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_EQ(opt.graph.nodes[0]->op_type, "Add");
  EXPECT_TRUE(opt.graph.IsInitializer("wt"));  // folded values keep their names
  EXPECT_FALSE(opt.graph.IsInitializer("w"));  // and their dead inputs go
  ExpectSameOutputs(b.model(), {RandomFloat({3, 2}, -1, 1, 2)});
}

TEST(ConstantFolding, FoldsShapeSubgraphWhenDimsAreKnown) {
  ModelBuilder b;
  b.Input("x", {2, 3, 4});
  b.Add("Shape", {"x"}, {"shape"});
  b.Init("zero", Tensor::Scalar<int64_t>(0));
  b.Add("Gather", {"shape", "zero"}, {"batch"}, {{"axis", AttrInt(0)}});
  b.Init("axes", Ints({0}));
  b.Add("Unsqueeze", {"batch", "axes"}, {"batch1"});
  b.Init("minus_one", Ints({-1}));
  b.Add("Concat", {"batch1", "minus_one"}, {"target"}, {{"axis", AttrInt(0)}});
  b.Add("Reshape", {"x", "target"}, {"y"});
  b.Output("y");
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConstantFolding"), 4);
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_EQ(opt.graph.nodes[0]->op_type, "Reshape");
  EXPECT_EQ(opt.graph.initializers.at("target").ToInt64Vector().value(),
            (std::vector<int64_t>{2, -1}));
  ExpectSameOutputs(b.model(), {RandomFloat({2, 3, 4}, -1, 1, 3)});
}

TEST(ConstantFolding, ShapeWithStartEndAndSymbolicDims) {
  ModelBuilder b;
  b.Input("x", {2, 3, 4});
  b.Add("Shape", {"x"}, {"s"}, {{"start", AttrInt(-2)}});
  b.Add("Cast", {"s"}, {"y"}, {{"to", AttrInt(1)}});
  b.Output("y");
  Model opt = Optimized(b.model());
  ASSERT_EQ(opt.graph.nodes.size(), 1u);  // Cast produces the graph output: it stays
  EXPECT_EQ(opt.graph.initializers.at("s").ToInt64Vector().value(), (std::vector<int64_t>{3, 4}));

  // An unknown dim: nothing to fold.
  b.model().graph.inputs[0].shape->at(0) = Dim{-1, "batch"};
  OptimizationReport report;
  Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConstantFolding"), 0);
}

TEST(ConstantFolding, SkipsGraphOutputsShadowedInitializersAndHugeOutputs) {
  ModelBuilder b;
  b.Input("c", {2});
  b.Init("c", Tensor::FromVector<float>({1, 2}));
  b.Add("Neg", {"c"}, {"n"});  // "c" may be fed: not a constant
  b.Add("Constant", {}, {"k"}, {{"value", AttrTensor(Tensor::FromVector<float>({3, 4}))}});
  b.Add("Add", {"n", "k"}, {"y"});
  b.Add("Identity", {"k"}, {"z"});  // all inputs constant, but it is a graph output
  b.Output("y").Output("z");
  Model m = b.Build();
  auto fired = ConstantFolding(m.opsets, CpuProvider()).Run(m.graph);
  ASSERT_TRUE(fired.ok());
  EXPECT_EQ(*fired, 1);  // only the Constant
  EXPECT_EQ(CountOps(m.graph, "Neg"), 1);
  EXPECT_EQ(CountOps(m.graph, "Identity"), 1);

  ModelBuilder big;
  big.Init("shape", Ints({1000}));
  big.Add("ConstantOfShape", {"shape"}, {"zeros"});
  big.Input("x", {1000});
  big.Add("Add", {"x", "zeros"}, {"y"});
  big.Output("y");
  Model m2 = big.Build();
  auto fired2 =
      ConstantFolding(m2.opsets, CpuProvider(), /*max_output_bytes=*/1024).Run(m2.graph);
  ASSERT_TRUE(fired2.ok());
  EXPECT_EQ(*fired2, 0);
}

TEST(ConstantFolding, LeavesFailingNodesForTheRuntimeToReport) {
  ModelBuilder b;
  b.Init("a", RandomFloat({2, 3}));
  b.Init("bad_shape", Ints({7, 7}));
  b.Add("Reshape", {"a", "bad_shape"}, {"r"});
  b.Input("x", {7, 7});
  b.Add("Add", {"x", "r"}, {"y"});
  b.Output("y");
  Model opt = Optimized(b.model());
  EXPECT_EQ(CountOps(opt.graph, "Reshape"), 1);
  auto run = RunModel(b.Build(), {RandomFloat({7, 7})}, OptimizationLevel::kBasic);
  EXPECT_FALSE(run.ok());
}

TEST(DeadNodeElimination, RemovesUnusedNodesAndInitializers) {
  ModelBuilder b;
  b.Input("x", {4});
  b.Init("unused_w", RandomFloat({4}));
  b.Add("Relu", {"x"}, {"r"});
  b.Add("Neg", {"r"}, {"dead1"});
  b.Add("Abs", {"dead1"}, {"dead2"});
  b.Add("Sigmoid", {"x"}, {"y"});
  b.Output("y");
  b.ValueShape("dead2", {4});
  Model m = b.Build();
  auto fired = DeadNodeElimination().Run(m.graph);
  ASSERT_TRUE(fired.ok());
  EXPECT_EQ(*fired, 4);  // three nodes and one initializer
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  EXPECT_EQ(m.graph.nodes[0]->op_type, "Sigmoid");
  EXPECT_TRUE(m.graph.initializers.empty());
  EXPECT_TRUE(m.graph.value_info.empty());
}

TEST(NoOpElimination, RemovesNoOpsAndKeepsOutputNames) {
  ModelBuilder b;
  b.Input("x", {2, 3});
  b.Init("same_shape", Ints({0, -1}));
  b.Init("expand_shape", Ints({1, 3}));
  b.Init("ones", Ints({1, 1}));
  b.Add("Relu", {"x"}, {"r"});
  b.Add("Identity", {"r"}, {"i"});
  b.Add("Dropout", {"i"}, {"d", "mask"});
  b.Add("Transpose", {"d"}, {"t"}, {{"perm", AttrInts({0, 1})}});
  b.Add("Cast", {"t"}, {"c"}, {{"to", AttrInt(1)}});
  b.Add("Reshape", {"c", "same_shape"}, {"re"});
  b.Add("Expand", {"re", "expand_shape"}, {"e"});
  b.Add("Tile", {"e", "ones"}, {"ti"});
  b.Add("Identity", {"ti"}, {"y"});
  b.Output("y");
  for (const char* v : {"r", "i", "d", "t", "c", "re", "e", "ti"}) b.ValueShape(v, {2, 3});
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "NoOpElimination"), 8);
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_EQ(opt.graph.nodes[0]->op_type, "Relu");
  EXPECT_EQ(opt.graph.nodes[0]->outputs[0], "y");
  ExpectSameOutputs(b.model(), {RandomFloat({2, 3}, -1, 1, 4)});
}

TEST(NoOpElimination, KeepsWhatIsNotANoOp) {
  ModelBuilder b;
  b.Input("x", {2, 3});
  b.Init("other_shape", Ints({3, 2}));
  b.Add("Identity", {"x"}, {"y"});  // graph input straight to graph output: must stay
  b.Add("Reshape", {"x", "other_shape"}, {"r"});
  b.Add("Transpose", {"x"}, {"t"});  // default perm reverses
  b.Add("Cast", {"x"}, {"c"}, {{"to", AttrInt(11)}});
  b.Add("Dropout", {"x"}, {"d", "mask"});  // mask is read
  b.Output("y").Output("r").Output("t").Output("c").Output("d").Output("mask");
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "NoOpElimination"), 0);
  EXPECT_EQ(opt.graph.nodes.size(), 5u);
}

TEST(CommonSubexpressionElimination, MergesIdenticalNodes) {
  ModelBuilder b;
  b.Input("x", {8});
  b.Add("Relu", {"x"}, {"r1"});
  b.Add("Relu", {"x"}, {"r2"});
  b.Add("Neg", {"r1"}, {"n1"});
  b.Add("Neg", {"r2"}, {"n2"});  // identical once r2 is r1
  b.Add("LeakyRelu", {"x"}, {"l1"}, {{"alpha", AttrFloat(0.1f)}});
  b.Add("LeakyRelu", {"x"}, {"l2"}, {{"alpha", AttrFloat(0.2f)}});  // different attribute
  b.Add("Sum", {"n1", "n2", "l1", "l2"}, {"y"});
  b.Output("y");
  Model m = b.Build();
  auto fired = CommonSubexpressionElimination().Run(m.graph);
  ASSERT_TRUE(fired.ok());
  EXPECT_EQ(*fired, 2);
  EXPECT_EQ(CountOps(m.graph, "Relu"), 1);
  EXPECT_EQ(CountOps(m.graph, "Neg"), 1);
  EXPECT_EQ(CountOps(m.graph, "LeakyRelu"), 2);
  ExpectSameOutputs(b.model(), {RandomFloat({8}, -1, 1, 5)});
}

TEST(CommonSubexpressionElimination, KeepsDuplicatesThatAreGraphOutputs) {
  ModelBuilder b;
  b.Input("x", {8});
  b.Add("Relu", {"x"}, {"y1"});
  b.Add("Relu", {"x"}, {"y2"});
  b.Output("y1").Output("y2");
  Model m = b.Build();
  auto fired = CommonSubexpressionElimination().Run(m.graph);
  ASSERT_TRUE(fired.ok());
  EXPECT_EQ(*fired, 0);
}

}  // namespace
}  // namespace inferd::testing
