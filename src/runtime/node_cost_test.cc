// EstimateNodeCost against hand-computed FLOP and byte counts.
#include "runtime/node_cost.h"

#include <gtest/gtest.h>

#include <vector>

namespace inferd {
namespace {

Node MakeNode(const std::string& op, const std::string& domain = "") {
  Node n;
  n.name = "n";
  n.op_type = op;
  n.domain = domain;
  return n;
}

TensorDims F32(Shape s) { return {DataType::kFloat32, std::move(s), true}; }

TEST(NodeCostTest, MatMulIsTwoMnk) {
  // BERT-base's QKV projection at batch 1, seq 128: [1,128,768] x [768,768].
  std::vector<TensorDims> in = {F32({1, 128, 768}), F32({768, 768})};
  std::vector<TensorDims> out = {F32({1, 128, 768})};
  NodeCost c = EstimateNodeCost(MakeNode("MatMul"), in, out);
  EXPECT_EQ(c.bound, CostBound::kCompute);
  EXPECT_FALSE(c.int8);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 128 * 768 * 768);  // 150,994,944
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * (128 * 768 * 2 + 768 * 768));
}

TEST(NodeCostTest, FusedMatMulCountsOnlyTheProduct) {
  std::vector<TensorDims> in = {F32({2, 4, 8}), F32({8, 16}), F32({16}), F32({2, 4, 16})};
  std::vector<TensorDims> out = {F32({2, 4, 16})};
  NodeCost c = EstimateNodeCost(MakeNode("FusedMatMul", "ai.inferd"), in, out);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 4 * 16 * 8);  // 2048
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * (64 + 128 + 16 + 128 + 128));
}

TEST(NodeCostTest, GemmReadsKFromTransA) {
  Node g = MakeNode("Gemm");
  std::vector<TensorDims> in = {F32({3, 5}), F32({3, 7})};  // A transposed: K = 3, M = 5
  std::vector<TensorDims> out = {F32({5, 7})};
  Attribute t;
  t.type = Attribute::Type::kInt;
  t.i = 1;
  g.attributes["transA"] = t;
  EXPECT_DOUBLE_EQ(EstimateNodeCost(g, in, out).flops, 2.0 * 5 * 7 * 3);
  EXPECT_DOUBLE_EQ(EstimateNodeCost(MakeNode("Gemm"), std::vector<TensorDims>{F32({5, 3}),
                                                                              F32({3, 7})},
                                    out)
                       .flops,
                   2.0 * 5 * 7 * 3);
}

TEST(NodeCostTest, ConvUsesWeightShapeForGroups) {
  // ResNet-50's stem: X [1,3,224,224], W [64,3,7,7], Y [1,64,112,112]: 2·64·112·112·3·49.
  std::vector<TensorDims> in = {F32({1, 3, 224, 224}), F32({64, 3, 7, 7}), F32({64})};
  std::vector<TensorDims> out = {F32({1, 64, 112, 112})};
  EXPECT_DOUBLE_EQ(EstimateNodeCost(MakeNode("Conv"), in, out).flops, 236027904.0);
  // Depthwise 3x3 on 32 channels (group 32, W [32,1,3,3]), Y [2,32,10,10]: 2·2·32·100·9.
  std::vector<TensorDims> dw_in = {F32({2, 32, 10, 10}), F32({32, 1, 3, 3})};
  std::vector<TensorDims> dw_out = {F32({2, 32, 10, 10})};
  EXPECT_DOUBLE_EQ(EstimateNodeCost(MakeNode("Conv"), dw_in, dw_out).flops, 115200.0);
}

TEST(NodeCostTest, BlockedConvIgnoresPaddedChannelsAndAddsTheDepthwiseStep) {
  // Cout 12 padded to 16 in Y's shape: the count uses W's 12.
  std::vector<TensorDims> in = {F32({1, 16, 8, 8}), F32({12, 16, 1, 1})};
  std::vector<TensorDims> out = {F32({1, 16, 8, 8})};
  Node b = MakeNode("BlockedConv", "ai.inferd");
  EXPECT_DOUBLE_EQ(EstimateNodeCost(b, in, out).flops, 2.0 * 12 * 64 * 16);
  // + depthwise [12,1,3,3] at stride 2: Y [1,16,4,4] → 2·12·16·9 more.
  std::vector<TensorDims> fused = {F32({1, 16, 8, 8}), F32({12, 16, 1, 1}), F32({12}),
                                   TensorDims{DataType::kFloat32, {}, false}, F32({12, 1, 3, 3}),
                                   F32({12})};
  std::vector<TensorDims> fused_out = {F32({1, 16, 4, 4})};
  EXPECT_DOUBLE_EQ(EstimateNodeCost(b, fused, fused_out).flops,
                   2.0 * 12 * 64 * 16 + 2.0 * 12 * 16 * 9);
}

TEST(NodeCostTest, Int8OpsAreMarked) {
  std::vector<TensorDims> in = {{DataType::kUInt8, {1, 4, 6, 6}, true},
                                F32({}),
                                {DataType::kUInt8, {}, true},
                                {DataType::kInt8, {8, 4, 3, 3}, true}};
  std::vector<TensorDims> out = {{DataType::kUInt8, {1, 8, 4, 4}, true}};
  NodeCost c = EstimateNodeCost(MakeNode("QLinearConv"), in, out);
  EXPECT_TRUE(c.int8);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 8 * 16 * 4 * 9);
  // The int8 chains' NHWC form (y_channels_last): Y [1, 4, 4, 8] is the same 16 positions x 8
  // channels; read as NCHW it would count 4 x 8 positions of 4 channels.
  Node nhwc = MakeNode("QLinearConv", "ai.inferd");
  Attribute cl;
  cl.type = Attribute::Type::kInt;
  cl.i = 1;
  nhwc.attributes["x_channels_last"] = cl;
  nhwc.attributes["y_channels_last"] = cl;
  std::vector<TensorDims> nhwc_out = {{DataType::kUInt8, {1, 4, 4, 8}, true}};
  EXPECT_DOUBLE_EQ(EstimateNodeCost(nhwc, in, nhwc_out).flops, 2.0 * 8 * 16 * 4 * 9);
  std::vector<TensorDims> mm = {{DataType::kUInt8, {4, 8}, true}, {DataType::kInt8, {8, 2}, true}};
  std::vector<TensorDims> mm_out = {{DataType::kInt32, {4, 2}, true}};
  NodeCost m = EstimateNodeCost(MakeNode("MatMulInteger"), mm, mm_out);
  EXPECT_TRUE(m.int8);
  EXPECT_DOUBLE_EQ(m.flops, 2.0 * 4 * 2 * 8);
  EXPECT_DOUBLE_EQ(m.bytes, 32 + 16 + 32);
}

TEST(NodeCostTest, AttentionIsFourBhssd) {
  // BERT-base: B 1, S 128, H 12, D 64 → 4·1·12·128·128·64 = 50,331,648 (the issue's ~50 MFLOP).
  std::vector<TensorDims> in = {F32({1, 128, 768}), F32({1, 128, 768}), F32({1, 128, 768}),
                                F32({1, 1, 1, 128})};
  std::vector<TensorDims> out = {F32({1, 128, 768})};
  NodeCost c = EstimateNodeCost(MakeNode("Attention", "ai.inferd"), in, out);
  EXPECT_EQ(c.bound, CostBound::kCompute);
  EXPECT_DOUBLE_EQ(c.flops, 4.0 * 12 * 128 * 128 * 64);
  // Cross-attention with Dv != D: 2·B·Sq·Skv·(H·D + H·Dv).
  std::vector<TensorDims> x = {F32({2, 3, 8}), F32({2, 5, 8}), F32({2, 5, 4})};
  EXPECT_DOUBLE_EQ(EstimateNodeCost(MakeNode("Attention", "ai.inferd"), x,
                                    std::vector<TensorDims>{F32({2, 3, 4})})
                       .flops,
                   2.0 * 2 * 3 * 5 * (8 + 4));
}

TEST(NodeCostTest, ElementwiseOpsAreMemoryBound) {
  std::vector<TensorDims> in = {F32({2, 3}), F32({3})};
  std::vector<TensorDims> out = {F32({2, 3})};
  NodeCost c = EstimateNodeCost(MakeNode("Add"), in, out);
  EXPECT_EQ(c.bound, CostBound::kMemory);
  EXPECT_DOUBLE_EQ(c.flops, 0);
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * (6 + 3 + 6));
  // Strings carry no byte count; a node with no traffic has no figure.
  std::vector<TensorDims> s = {{DataType::kString, {4}, true}};
  EXPECT_EQ(EstimateNodeCost(MakeNode("Identity"), s, s).bound, CostBound::kNone);
}

TEST(NodeCostTest, GatherCountsTheRowsItReads) {
  // An embedding [30522, 768] read at 128 ids: 2 · 128·768·4 bytes + the int64 ids.
  std::vector<TensorDims> in = {F32({30522, 768}), {DataType::kInt64, {1, 128}, true}};
  std::vector<TensorDims> out = {F32({1, 128, 768})};
  EXPECT_DOUBLE_EQ(EstimateNodeCost(MakeNode("Gather"), in, out).bytes,
                   2.0 * 128 * 768 * 4 + 128 * 8);
}

TEST(NodeCostTest, BadShapesAndControlFlowDoNotCrash) {
  std::vector<TensorDims> scalar = {F32({}), F32({})};
  std::vector<TensorDims> out = {F32({})};
  // A rank-0 MatMul input cannot give K: memory-bound figure instead.
  EXPECT_EQ(EstimateNodeCost(MakeNode("MatMul"), scalar, out).bound, CostBound::kMemory);
  EXPECT_EQ(EstimateNodeCost(MakeNode("Conv"), std::vector<TensorDims>{F32({1, 2, 3, 3})}, out)
                .bound,
            CostBound::kMemory);
  EXPECT_EQ(EstimateNodeCost(MakeNode("Attention", "ai.inferd"), scalar, out).bound,
            CostBound::kMemory);
  EXPECT_EQ(EstimateNodeCost(MakeNode("Loop"), scalar, out).bound, CostBound::kNone);
  EXPECT_EQ(EstimateNodeCost(MakeNode("MatMul"), {}, {}).bound, CostBound::kNone);
  EXPECT_STREQ(CostBoundName(CostBound::kCompute), "compute");
}

}  // namespace
}  // namespace inferd
