// Conv+BatchNormalization, Conv+Mul/Add and MatMul+Add → Gemm: each fires where it should, not
// where it must not, and the optimized graph computes the same outputs.
#include <gtest/gtest.h>

#include <cmath>

#include "optimizer/test_graphs.h"

namespace inferd::testing {
namespace {

constexpr int64_t kM = 4;  // output channels

// x[1, 3, 6, 6] → Conv(W[4, 3, 3, 3], B[4], pads 1) → "conv_out".
ModelBuilder ConvModel(bool with_bias = true) {
  ModelBuilder b;
  b.Input("x", {1, 3, 6, 6});
  b.Init("W", RandomFloat({kM, 3, 3, 3}, -1, 1, 1));
  std::vector<std::string> in = {"x", "W"};
  if (with_bias) {
    b.Init("B", RandomFloat({kM}, -1, 1, 2));
    in.push_back("B");
  }
  b.Add("Conv", in, {"conv_out"}, {{"pads", AttrInts({1, 1, 1, 1})}}, "conv1");
  return b;
}

void AddBn(ModelBuilder& b, const std::string& in, const std::string& out) {
  b.Init("bn_scale", RandomFloat({kM}, 0.5, 2, 3));
  b.Init("bn_bias", RandomFloat({kM}, -1, 1, 4));
  b.Init("bn_mean", RandomFloat({kM}, -1, 1, 5));
  b.Init("bn_var", RandomFloat({kM}, 0.1, 2, 6));
  b.Add("BatchNormalization", {in, "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {out},
        {{"epsilon", AttrFloat(1e-3f)}}, "bn1");
}

// BatchNormalization by hand on an NCHW tensor, with the parameters AddBn uses.
Tensor ReferenceBn(const Tensor& x) {
  Tensor s = RandomFloat({kM}, 0.5, 2, 3), b = RandomFloat({kM}, -1, 1, 4),
         mean = RandomFloat({kM}, -1, 1, 5), var = RandomFloat({kM}, 0.1, 2, 6);
  Tensor y = x.Clone();
  const int64_t hw = x.dim(2) * x.dim(3);
  for (int64_t c = 0; c < kM; ++c) {
    for (int64_t i = 0; i < hw; ++i) {
      float& v = y.data<float>()[c * hw + i];
      v = (v - mean.data<float>()[c]) / std::sqrt(var.data<float>()[c] + 1e-3f) *
              s.data<float>()[c] +
          b.data<float>()[c];
    }
  }
  return y;
}

TEST(ConvBnFusion, FoldsAndMatchesReference) {
  for (bool with_bias : {true, false}) {
    ModelBuilder b = ConvModel(with_bias);
    AddBn(b, "conv_out", "bn_out");
    b.Add("Relu", {"bn_out"}, {"y"});
    b.Output("y");
    OptimizationReport report;
    Model opt = Optimized(b.model(), &report);
    EXPECT_EQ(Fired(report, "ConvBnFusion"), 1);
    EXPECT_EQ(CountOps(opt.graph, "BatchNormalization"), 0);
    ASSERT_EQ(CountOps(opt.graph, "Conv"), 1);
    // Names stay readable: the Conv produces the BN's output, weights say where they came from.
    EXPECT_EQ(opt.graph.nodes[0]->outputs[0], "bn_out");
    EXPECT_EQ(opt.graph.nodes[0]->inputs[1], "conv1/W_bn_folded");
    EXPECT_FALSE(opt.graph.IsInitializer("W"));  // the original weight is dead

    // Reference: the Conv alone (unoptimized), then BN and Relu by hand.
    ModelBuilder conv_only = ConvModel(with_bias);
    conv_only.Output("conv_out");
    Tensor x = RandomFloat({1, 3, 6, 6}, -1, 1, 7);
    auto conv_out = RunModel(conv_only.Build(), {x}, OptimizationLevel::kNone);
    ASSERT_TRUE(conv_out.ok()) << conv_out.status().ToString();
    Tensor want = ReferenceBn((*conv_out)[0]);
    for (int64_t i = 0; i < want.NumElements(); ++i) {
      want.data<float>()[i] = std::max(0.f, want.data<float>()[i]);
    }
    auto got = RunModel(std::move(opt), {x}, OptimizationLevel::kNone);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectTensorNear((*got)[0], want, 1e-4, 1e-5);
  }
}

TEST(ConvBnFusion, BnOutputAsGraphOutputKeepsItsName) {
  ModelBuilder b = ConvModel();
  AddBn(b, "conv_out", "y");
  b.Output("y");
  Model opt = Optimized(b.model());
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_EQ(opt.graph.nodes[0]->outputs[0], "y");
}

TEST(ConvBnFusion, NotWhenConvOutputHasSecondConsumer) {
  ModelBuilder b = ConvModel();
  AddBn(b, "conv_out", "bn_out");
  b.Add("Add", {"bn_out", "conv_out"}, {"y"});
  b.Output("y");
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConvBnFusion"), 0);
  EXPECT_EQ(CountOps(opt.graph, "BatchNormalization"), 1);
}

TEST(ConvBnFusion, NotAcrossAGraphOutput) {
  ModelBuilder b = ConvModel();
  AddBn(b, "conv_out", "y");
  b.Output("conv_out").Output("y");
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConvBnFusion"), 0);
  EXPECT_EQ(CountOps(opt.graph, "BatchNormalization"), 1);
}

TEST(ConvBnFusion, NotWithNonConstantParameters) {
  ModelBuilder b = ConvModel();
  AddBn(b, "conv_out", "y");
  b.Output("y");
  b.Input("bn_mean", {kM});  // shadows the initializer: the caller may feed another mean
  OptimizationReport report;
  Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConvBnFusion"), 0);
}

TEST(ConvMulAddFusion, FoldsPerChannelChain) {
  ModelBuilder b = ConvModel(/*with_bias=*/false);
  b.Init("scale", RandomFloat({kM, 1, 1}, 0.5, 2, 8));
  b.Init("shift", RandomFloat({1, kM, 1, 1}, -1, 1, 9));
  b.Init("two", Tensor::Scalar<float>(2.f));
  b.Add("Mul", {"scale", "conv_out"}, {"mul_out"});  // constant first: commutes
  b.Add("Add", {"mul_out", "shift"}, {"add_out"});
  b.Add("Mul", {"add_out", "two"}, {"y"});
  b.Output("y");
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConvMulAddFusion"), 3);
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_EQ(opt.graph.nodes[0]->outputs[0], "y");
  ExpectSameOutputs(b.model(), {RandomFloat({1, 3, 6, 6}, -1, 1, 10)});
}

TEST(ConvMulAddFusion, NotForNonBroadcastableConstant) {
  ModelBuilder b = ConvModel();
  // Varies along the width: not a per-channel constant.
  b.Init("c", RandomFloat({1, 1, 1, 6}, -1, 1, 11));
  b.Add("Add", {"conv_out", "c"}, {"y"});
  b.Output("y");
  // Grows the rank: the output shape changes, so it cannot fold either.
  OptimizationReport report;
  Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConvMulAddFusion"), 0);
  ExpectSameOutputs(b.model(), {RandomFloat({1, 3, 6, 6}, -1, 1, 12)});

  ModelBuilder b2 = ConvModel();
  b2.Init("c", RandomFloat({1, 1, kM, 1, 1}, -1, 1, 13));
  b2.Add("Mul", {"conv_out", "c"}, {"y"});
  b2.Output("y");
  Optimized(b2.model(), &report);
  EXPECT_EQ(Fired(report, "ConvMulAddFusion"), 0);
}

TEST(ConvMulAddFusion, NotWithNonConstantOperandOrSecondConsumer) {
  ModelBuilder b = ConvModel();
  b.Input("c", {1, kM, 1, 1});
  b.Add("Mul", {"conv_out", "c"}, {"y"});
  b.Output("y");
  OptimizationReport report;
  Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "ConvMulAddFusion"), 0);

  ModelBuilder b2 = ConvModel();
  b2.Init("c", RandomFloat({kM, 1, 1}, -1, 1, 14));
  b2.Add("Mul", {"conv_out", "c"}, {"m"});
  b2.Add("Add", {"m", "conv_out"}, {"y"});
  b2.Output("y");
  Optimized(b2.model(), &report);
  EXPECT_EQ(Fired(report, "ConvMulAddFusion"), 0);
}

ModelBuilder MatMulModel(Shape a_shape, Tensor bias) {
  ModelBuilder b;
  b.Input("a", a_shape);
  b.Init("w", RandomFloat({8, 5}, -1, 1, 15));
  b.Init("bias", std::move(bias));
  b.Add("MatMul", {"a", "w"}, {"mm"}, {}, "fc");
  b.Add("Add", {"mm", "bias"}, {"y"});
  b.Output("y");
  return b;
}

TEST(MatMulAddFusion, FusesIntoGemm) {
  for (Shape bias_shape : {Shape{5}, Shape{1, 5}, Shape{4, 5}, Shape{4, 1}, Shape{}}) {
    SCOPED_TRACE(ShapeToString(bias_shape));
    ModelBuilder b = MatMulModel({4, 8}, RandomFloat(bias_shape, -1, 1, 16));
    OptimizationReport report;
    Model opt = Optimized(b.model(), &report);
    EXPECT_EQ(Fired(report, "MatMulAddFusion"), 1);
    ASSERT_EQ(opt.graph.nodes.size(), 1u);
    EXPECT_EQ(opt.graph.nodes[0]->op_type, "Gemm");
    EXPECT_EQ(opt.graph.nodes[0]->name, "fc");
    EXPECT_EQ(opt.graph.nodes[0]->outputs[0], "y");
    ExpectSameOutputs(b.model(), {RandomFloat({4, 8}, -1, 1, 17)});
  }
}

TEST(MatMulAddFusion, NotWhereGemmDoesNotApply) {
  OptimizationReport report;
  // Batched MatMul: Gemm has no batch dims.
  Optimized(MatMulModel({2, 4, 8}, RandomFloat({5}, -1, 1, 18)).model(), &report);
  EXPECT_EQ(Fired(report, "MatMulAddFusion"), 0);
  // A bias that grows the output.
  Optimized(MatMulModel({4, 8}, RandomFloat({3, 4, 5}, -1, 1, 19)).model(), &report);
  EXPECT_EQ(Fired(report, "MatMulAddFusion"), 0);
  // A bias whose rows do not match M.
  Optimized(MatMulModel({4, 8}, RandomFloat({3, 5}, -1, 1, 20)).model(), &report);
  EXPECT_EQ(Fired(report, "MatMulAddFusion"), 0);
  // A non-constant bias.
  ModelBuilder b = MatMulModel({4, 8}, RandomFloat({5}, -1, 1, 21));
  b.Input("bias", {5});
  Optimized(b.model(), &report);
  EXPECT_EQ(Fired(report, "MatMulAddFusion"), 0);
  // The MatMul output is also a graph output.
  ModelBuilder b2 = MatMulModel({4, 8}, RandomFloat({5}, -1, 1, 22));
  b2.Output("mm");
  Optimized(b2.model(), &report);
  EXPECT_EQ(Fired(report, "MatMulAddFusion"), 0);
  ExpectSameOutputs(b2.model(), {RandomFloat({4, 8}, -1, 1, 23)});
}

}  // namespace
}  // namespace inferd::testing
