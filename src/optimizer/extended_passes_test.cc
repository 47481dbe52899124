// Extended-level fusions (ai.inferd ops): each fires where it should, not where it must not, and
// the fused graph computes the same outputs as the unoptimized one.
#include <gtest/gtest.h>

#include <cmath>

#include "optimizer/test_graphs.h"

namespace inferd::testing {
namespace extended_passes_test {
namespace {

constexpr OptimizationLevel kExt = OptimizationLevel::kExtended;

Tensor Scalar(float v) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, {});
  t.data<float>()[0] = v;
  return t;
}

Tensor Ints(std::vector<int64_t> v) {
  Tensor t = Tensor::Allocate(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

int CountDomainOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node->op_type == op && node->domain == "ai.inferd";
  return n;
}

// x[1, 4, 6, 6] → two Convs (4 → 4 channels, pads 1) → Add → Relu.
ModelBuilder ResidualModel() {
  ModelBuilder b;
  b.Input("x", {1, 4, 6, 6});
  b.Init("W1", RandomFloat({4, 4, 3, 3}, -1, 1, 1)).Init("B1", RandomFloat({4}, -1, 1, 2));
  b.Init("W2", RandomFloat({4, 4, 1, 1}, -1, 1, 3));
  b.Add("Conv", {"x", "W1", "B1"}, {"c1"}, {{"pads", AttrInts({1, 1, 1, 1})}}, "conv1");
  b.Add("Conv", {"x", "W2"}, {"c2"}, {}, "shortcut");
  b.ValueShape("c1", {1, 4, 6, 6}).ValueShape("c2", {1, 4, 6, 6});
  b.Add("Add", {"c1", "c2"}, {"sum"});
  b.Add("Relu", {"sum"}, {"y"});
  b.Output("y");
  return b;
}

TEST(ResidualAddFusion, ConvAddReluBecomesOneConv) {
  ModelBuilder b = ResidualModel();
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "ResidualAddFusion"), 1);
  EXPECT_EQ(Fired(report, "ActivationFusion"), 1);
  EXPECT_EQ(CountOps(opt.graph, "Add"), 0);
  EXPECT_EQ(CountOps(opt.graph, "Relu"), 0);
  EXPECT_EQ(CountDomainOps(opt.graph, "Conv"), 1);
  EXPECT_EQ(opt.opsets.count("ai.inferd"), 1u);
  ExpectSameOutputs(b.model(), {RandomFloat({1, 4, 6, 6}, -1, 1, 4)}, kExt);
}

TEST(ResidualAddFusion, NotAcrossGraphOutputsOrBroadcasts) {
  ModelBuilder b = ResidualModel();
  b.Output("c1");
  b.Output("c2");
  OptimizationReport report;
  Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "ResidualAddFusion"), 0);
  ExpectSameOutputs(b.model(), {RandomFloat({1, 4, 6, 6}, -1, 1, 5)}, kExt);
  // Shapes that differ (the Add broadcasts): no fusion.
  ModelBuilder c;
  c.Input("x", {1, 4, 6, 6}).Input("z", {1, 1, 6, 6});
  c.Init("W", RandomFloat({4, 4, 1, 1}, -1, 1, 6));
  c.Add("Conv", {"x", "W"}, {"c"});
  c.ValueShape("c", {1, 4, 6, 6});
  c.Add("Add", {"c", "z"}, {"y"});
  c.Output("y");
  Optimized(c.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "ResidualAddFusion"), 0);
}

TEST(ActivationFusion, ConvGemmMatMulActivations) {
  struct Case {
    std::string op;
    std::map<std::string, Attribute> attrs;
    bool clip_inputs;
  };
  for (const Case& act : std::vector<Case>{{"Relu", {}, false},
                                           {"LeakyRelu", {{"alpha", AttrFloat(0.2f)}}, false},
                                           {"Sigmoid", {}, false},
                                           {"Tanh", {}, false},
                                           {"HardSwish", {}, false},
                                           {"HardSigmoid", {}, false},
                                           {"Clip", {}, true}}) {
    SCOPED_TRACE(act.op);
    ModelBuilder b;
    b.Input("x", {1, 3, 5, 5}).Input("a", {4, 6}).Input("m", {2, 3, 6});
    b.Init("W", RandomFloat({4, 3, 3, 3}, -1, 1, 7)).Init("G", RandomFloat({6, 5}, -1, 1, 8));
    b.Init("lo", Scalar(0.f)).Init("hi", Scalar(0.5f));
    b.Add("Conv", {"x", "W"}, {"c"});
    b.Add("Gemm", {"a", "G"}, {"g"});
    b.Add("MatMul", {"m", "G"}, {"mm"});
    b.ValueShape("c", {1, 4, 3, 3}).ValueShape("g", {4, 5}).ValueShape("mm", {2, 3, 5});
    const std::vector<std::pair<std::string, std::string>> io = {
        {"c", "y0"}, {"g", "y1"}, {"mm", "y2"}};
    for (const auto& [v, y] : io) {
      std::vector<std::string> in = {v};
      if (act.clip_inputs) in = {v, "lo", "hi"};
      b.Add(act.op, in, {y}, act.attrs);
      b.Output(y);
    }
    OptimizationReport report;
    Model opt = Optimized(b.model(), &report, kExt);
    EXPECT_EQ(Fired(report, "ActivationFusion"), 3);
    EXPECT_EQ(CountOps(opt.graph, act.op), 0);
    ExpectSameOutputs(b.model(),
                      {RandomFloat({1, 3, 5, 5}, -1, 1, 9), RandomFloat({4, 6}, -1, 1, 10),
                       RandomFloat({2, 3, 6}, -1, 1, 11)},
                      kExt, 1e-4, 1e-5);
  }
}

TEST(ActivationFusion, NotWhenTheOutputHasAnotherReader) {
  ModelBuilder b;
  b.Input("x", {1, 3, 5, 5});
  b.Init("W", RandomFloat({4, 3, 3, 3}, -1, 1, 12));
  b.Add("Conv", {"x", "W"}, {"c"});
  b.Add("Relu", {"c"}, {"y"});
  b.Add("Sigmoid", {"c"}, {"z"});
  b.Output("y").Output("z");
  OptimizationReport report;
  Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "ActivationFusion"), 0);
}

// GELU decomposed in the orders exporters use; `order` 0: (x·0.5)·(1+erf), 1: x·((1+erf)·0.5),
// 2: (x·(1+erf))·0.5, 3: tanh form with Pow, 4: tanh form with x·x·x.
ModelBuilder GeluModel(int order, float sqrt2 = std::sqrt(2.f)) {
  ModelBuilder b;
  b.Input("x", {2, 16});
  b.Init("sqrt2", Scalar(sqrt2)).Init("one", Scalar(1.f)).Init("half", Scalar(0.5f));
  std::string e;
  if (order <= 2) {
    b.Add("Div", {"x", "sqrt2"}, {"d"});
    b.Add("Erf", {"d"}, {"e"});
  } else {
    b.Init("three", Scalar(3.f)).Init("c", Scalar(0.044715f));
    b.Init("k", Scalar(std::sqrt(2.f / static_cast<float>(M_PI))));
    if (order == 3) {
      b.Add("Pow", {"x", "three"}, {"x3"});
    } else {
      b.Add("Mul", {"x", "x"}, {"x2"});
      b.Add("Mul", {"x", "x2"}, {"x3"});
    }
    b.Add("Mul", {"c", "x3"}, {"cx3"});
    b.Add("Add", {"x", "cx3"}, {"inner"});
    b.Add("Mul", {"inner", "k"}, {"arg"});
    b.Add("Tanh", {"arg"}, {"e"});
  }
  b.Add("Add", {"one", "e"}, {"p"});
  if (order == 0 || order >= 3) {
    b.Add("Mul", {"x", "half"}, {"xh"});
    b.Add("Mul", {"xh", "p"}, {"y"});
  } else if (order == 1) {
    b.Add("Mul", {"p", "half"}, {"ph"});
    b.Add("Mul", {"x", "ph"}, {"y"});
  } else {
    b.Add("Mul", {"x", "p"}, {"xp"});
    b.Add("Mul", {"xp", "half"}, {"y"});
  }
  b.Output("y");
  return b;
}

TEST(GeluFusion, AllOrderingsAndTheTanhForm) {
  for (int order = 0; order <= 4; ++order) {
    SCOPED_TRACE(order);
    ModelBuilder b = GeluModel(order);
    OptimizationReport report;
    Model opt = Optimized(b.model(), &report, kExt);
    EXPECT_EQ(Fired(report, "GeluFusion"), 1);
    ASSERT_EQ(opt.graph.nodes.size(), 1u);
    EXPECT_EQ(opt.graph.nodes[0]->op_type, "Gelu");
    ExpectSameOutputs(b.model(), {RandomFloat({2, 16}, -4, 4, 13)}, kExt, 1e-4, 1e-5);
  }
}

TEST(GeluFusion, NotWithWrongConstantsOrSharedIntermediates) {
  OptimizationReport report;
  Optimized(GeluModel(0, 1.5f).model(), &report, kExt);
  EXPECT_EQ(Fired(report, "GeluFusion"), 0);
  ModelBuilder b = GeluModel(0);
  b.Output("e");  // the erf is also a graph output
  Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "GeluFusion"), 0);
}

ModelBuilder LayerNormModel(int64_t opset, bool mul_square) {
  ModelBuilder b(opset);
  b.Input("x", {3, 8});
  b.Init("two", Scalar(2.f)).Init("eps", Scalar(1e-5f));
  b.Init("gamma", RandomFloat({8}, 0.5, 2, 14)).Init("beta", RandomFloat({8}, -1, 1, 15));
  b.Add("ReduceMean", {"x"}, {"m"}, {{"axes", AttrInts({-1})}});
  b.Add("Sub", {"x", "m"}, {"d"});
  if (mul_square) {
    b.Add("Mul", {"d", "d"}, {"sq"});
  } else {
    b.Add("Pow", {"d", "two"}, {"sq"});
  }
  b.Add("ReduceMean", {"sq"}, {"v"}, {{"axes", AttrInts({-1})}});
  b.Add("Add", {"v", "eps"}, {"ve"});
  b.Add("Sqrt", {"ve"}, {"s"});
  b.Add("Div", {"d", "s"}, {"n"});
  b.Add("Mul", {"n", "gamma"}, {"g"});
  b.Add("Add", {"g", "beta"}, {"y"});
  b.Output("y");
  return b;
}

TEST(LayerNormFusion, StandardOpAt17AndInferdBelow) {
  for (int64_t opset : {17, 13}) {
    for (bool mul_square : {false, true}) {
      SCOPED_TRACE(opset);
      ModelBuilder b = LayerNormModel(opset, mul_square);
      OptimizationReport report;
      Model opt = Optimized(b.model(), &report, kExt);
      EXPECT_EQ(Fired(report, "LayerNormFusion"), 1);
      ASSERT_EQ(opt.graph.nodes.size(), 1u);
      EXPECT_EQ(opt.graph.nodes[0]->op_type, "LayerNormalization");
      EXPECT_EQ(opt.graph.nodes[0]->domain, opset >= 17 ? "" : "ai.inferd");
      ExpectSameOutputs(b.model(), {RandomFloat({3, 8}, -2, 2, 16)}, kExt, 1e-4, 1e-5);
    }
  }
}

TEST(LayerNormFusion, NotOverAnotherAxis) {
  ModelBuilder b = LayerNormModel(17, false);
  b.model().graph.nodes[0]->attributes["axes"] = AttrInts({0});
  OptimizationReport report;
  Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "LayerNormFusion"), 0);
}

// BERT-style attention over q, k, v [2, 5, 8] with 2 heads of 4 and a [2, 1, 1, 5] mask.
ModelBuilder AttentionModel(bool key_two_steps) {
  ModelBuilder b;
  b.Input("q", {2, 5, 8}).Input("k", {2, 5, 8}).Input("v", {2, 5, 8}).Input("mask", {2, 1, 1, 5});
  b.Init("split", Ints({2, 5, 2, 4})).Init("merge", Ints({0, 0, 8})).Init("c", Scalar(2.f));
  b.Add("Reshape", {"q", "split"}, {"qr"});
  b.Add("Reshape", {"k", "split"}, {"kr"});
  b.Add("Reshape", {"v", "split"}, {"vr"});
  b.Add("Transpose", {"qr"}, {"qh"}, {{"perm", AttrInts({0, 2, 1, 3})}});
  b.Add("Transpose", {"vr"}, {"vh"}, {{"perm", AttrInts({0, 2, 1, 3})}});
  if (key_two_steps) {
    b.Add("Transpose", {"kr"}, {"kh"}, {{"perm", AttrInts({0, 2, 1, 3})}});
    b.Add("Transpose", {"kh"}, {"kt"}, {{"perm", AttrInts({0, 1, 3, 2})}});
  } else {
    b.Add("Transpose", {"kr"}, {"kt"}, {{"perm", AttrInts({0, 2, 3, 1})}});
  }
  b.Add("MatMul", {"qh", "kt"}, {"s"});
  b.Add("Div", {"s", "c"}, {"ss"});
  b.Add("Add", {"ss", "mask"}, {"sm_in"});
  b.Add("Softmax", {"sm_in"}, {"p"}, {{"axis", AttrInt(-1)}});
  b.Add("MatMul", {"p", "vh"}, {"ctx"});
  b.Add("Transpose", {"ctx"}, {"ctx_t"}, {{"perm", AttrInts({0, 2, 1, 3})}});
  b.Add("Reshape", {"ctx_t", "merge"}, {"y"});
  b.Output("y");
  return b;
}

std::vector<Tensor> AttentionInputs() {
  Tensor mask = RandomFloat({2, 1, 1, 5}, 0, 1, 20);
  for (int64_t i = 0; i < mask.NumElements(); ++i) {
    mask.data<float>()[i] = mask.data<float>()[i] < 0.3f ? -10000.f : 0.f;
  }
  return {RandomFloat({2, 5, 8}, -1, 1, 17), RandomFloat({2, 5, 8}, -1, 1, 18),
          RandomFloat({2, 5, 8}, -1, 1, 19), mask};
}

TEST(AttentionFusion, FusesBothKeyLayouts) {
  for (bool two_steps : {false, true}) {
    // TransposeReshapeFolding would merge the two key Transposes first; check both forms.
    ModelBuilder b = AttentionModel(two_steps);
    OptimizationReport report;
    Model opt = Optimized(b.model(), &report, kExt);
    EXPECT_EQ(Fired(report, "AttentionFusion"), 1);
    ASSERT_EQ(opt.graph.nodes.size(), 1u);
    EXPECT_EQ(opt.graph.nodes[0]->op_type, "Attention");
    EXPECT_EQ(opt.graph.nodes[0]->GetInt("num_heads", 0), 2);
    EXPECT_FLOAT_EQ(opt.graph.nodes[0]->GetFloat("scale", 0), 0.5f);
    ExpectSameOutputs(b.model(), AttentionInputs(), kExt, 1e-4, 1e-5);
  }
}

TEST(AttentionFusion, NotWhenScoresAreReadElsewhere) {
  ModelBuilder b = AttentionModel(false);
  b.Output("p");
  OptimizationReport report;
  Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "AttentionFusion"), 0);
  ExpectSameOutputs(b.model(), AttentionInputs(), kExt, 1e-4, 1e-5);
}

TEST(AttentionKernel, RejectsInconsistentShapes) {
  ModelBuilder b;
  b.Input("q", {2, 5, 7}).Input("k", {2, 5, 7}).Input("v", {2, 5, 7});
  Node* n = b.Add("Attention", {"q", "k", "v"}, {"y"}, {{"num_heads", AttrInt(2)}});
  n->domain = "ai.inferd";
  b.Output("y");
  auto r = RunModel(b.Build(), {RandomFloat({2, 5, 7}), RandomFloat({2, 5, 7}),
                                RandomFloat({2, 5, 7})}, OptimizationLevel::kNone);
  EXPECT_FALSE(r.ok());
}

TEST(MatMulBiasFusion, BiasResidualAndActivation) {
  ModelBuilder b;
  b.Input("a", {2, 3, 8}).Input("r", {2, 3, 5});
  b.Init("B", RandomFloat({8, 5}, -1, 1, 21)).Init("bias", RandomFloat({5}, -1, 1, 22));
  b.Add("MatMul", {"a", "B"}, {"mm"}, {}, "fc");
  b.Add("Add", {"bias", "mm"}, {"biased"});
  b.Add("Add", {"r", "biased"}, {"res"});
  b.Add("Relu", {"res"}, {"y"});
  b.Output("y");
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "MatMulBiasFusion"), 1);
  EXPECT_EQ(Fired(report, "ResidualAddFusion"), 1);
  EXPECT_EQ(Fired(report, "ActivationFusion"), 1);
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_EQ(opt.graph.nodes[0]->op_type, "FusedMatMul");
  EXPECT_EQ(opt.graph.nodes[0]->name, "fc");
  ExpectSameOutputs(b.model(), {RandomFloat({2, 3, 8}, -1, 1, 23), RandomFloat({2, 3, 5}, -1, 1, 24)},
                    kExt, 1e-4, 1e-5);
}

TEST(MatMulBiasFusion, NotWhenTheBiasGrowsTheOutput) {
  ModelBuilder b;
  b.Input("a", {3, 2, 8});
  b.Init("B", RandomFloat({8, 5}, -1, 1, 25)).Init("bias", RandomFloat({2, 1, 1, 5}, -1, 1, 26));
  b.Add("MatMul", {"a", "B"}, {"mm"});
  b.Add("Add", {"mm", "bias"}, {"y"});
  b.Output("y");
  OptimizationReport report;
  Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "MatMulBiasFusion"), 0);
}

TEST(TransposeReshapeFolding, ChainsCollapse) {
  ModelBuilder b;
  b.Input("x", {2, 3, 4});
  b.Init("s1", Ints({6, 4})).Init("s2", Ints({4, 6}));
  b.Add("Transpose", {"x"}, {"t1"}, {{"perm", AttrInts({1, 0, 2})}});
  b.Add("Transpose", {"t1"}, {"t2"}, {{"perm", AttrInts({0, 2, 1})}});
  b.Add("Reshape", {"t2", "s1"}, {"r1"});
  b.Add("Reshape", {"r1", "s2"}, {"y"});
  b.Output("y");
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "TransposeReshapeFolding"), 2);
  EXPECT_EQ(opt.graph.nodes.size(), 2u);
  ExpectSameOutputs(b.model(), {RandomFloat({2, 3, 4}, -1, 1, 27)}, kExt);
}

// x[1, 3, 9, 9] → Conv(→ 20, stride 2) → Relu → Conv(→ 20) → + first conv → Relu → depthwise
// Conv → MaxPool → Conv: channel counts that are not multiples of 16, a residual read blocked,
// a pool boundary and a graph output.
ModelBuilder ConvChainModel() {
  ModelBuilder b;
  b.Input("x", {1, 3, 9, 9});
  b.Init("W1", RandomFloat({20, 3, 3, 3}, -1, 1, 30)).Init("B1", RandomFloat({20}, -1, 1, 31));
  b.Init("W2", RandomFloat({20, 20, 3, 3}, -0.3f, 0.3f, 32));
  b.Init("W3", RandomFloat({20, 1, 3, 3}, -1, 1, 33)).Init("W4", RandomFloat({8, 20, 1, 1}, -1, 1, 34));
  const auto pad = AttrInts({1, 1, 1, 1});
  b.Add("Conv", {"x", "W1", "B1"}, {"c1"}, {{"pads", pad}, {"strides", AttrInts({2, 2})}});
  b.Add("Relu", {"c1"}, {"r1"});
  b.Add("Conv", {"r1", "W2"}, {"c2"}, {{"pads", pad}});
  b.ValueShape("c1", {1, 20, 5, 5}).ValueShape("r1", {1, 20, 5, 5}).ValueShape("c2", {1, 20, 5, 5});
  b.Add("Add", {"c2", "r1"}, {"s"});
  b.Add("Relu", {"s"}, {"r2"});
  b.Add("Conv", {"r2", "W3"}, {"c3"}, {{"pads", pad}, {"group", AttrInt(20)}});
  b.Add("MaxPool", {"c3"}, {"p"}, {{"kernel_shape", AttrInts({2, 2})}});
  b.Add("Conv", {"p", "W4"}, {"y"});
  b.Output("y").Output("c3");
  return b;
}

TEST(LayoutPropagation, ConvChainsStayBlocked) {
  ModelBuilder b = ConvChainModel();
  OptimizationReport report;
  Model opt = Optimized(b.model(), &report, OptimizationLevel::kAll);
  // c1 (read by the Conv and, as Z, by the residual Conv) and r2 stay blocked: 3 Convs change;
  // c3 is a graph output and feeds a pool, y is a graph output.
  EXPECT_EQ(Fired(report, "LayoutPropagation"), 3);
  EXPECT_EQ(CountDomainOps(opt.graph, "BlockedConv"), 3);
  ExpectSameOutputs(b.model(), {RandomFloat({1, 3, 9, 9}, -1, 1, 35)}, OptimizationLevel::kAll,
                    1e-4, 1e-4);
  // The extended level leaves layouts alone.
  Optimized(b.model(), &report, kExt);
  EXPECT_EQ(Fired(report, "LayoutPropagation"), -1);
}


// x[1, C, S, S] → 1x1 Conv(→ E) → Clip(0, 6) → 3x3 depthwise Conv (stride s, pad 1) → Clip →
// 1x1 Conv(→ 16) → y: MobileNetV2's expand + depthwise + project.
ModelBuilder ExpandDepthwiseModel(int64_t c, int64_t e, int64_t size, int64_t stride,
                                  bool expand_is_output) {
  ModelBuilder b;
  const int64_t out = (size - 1) / stride + 1;
  b.Input("x", {1, c, size, size});
  b.Init("We", RandomFloat({e, c, 1, 1}, -1, 1, 40)).Init("Be", RandomFloat({e}, -1, 1, 41));
  b.Init("Wd", RandomFloat({e, 1, 3, 3}, -1, 1, 42)).Init("Bd", RandomFloat({e}, -1, 1, 43));
  b.Init("Wp", RandomFloat({16, e, 1, 1}, -0.3f, 0.3f, 44));
  b.Init("lo", Tensor::FromVector<float>({0.f}, {})).Init("hi", Tensor::FromVector<float>({6.f}, {}));
  b.Add("Conv", {"x", "We", "Be"}, {"e"});
  b.Add("Clip", {"e", "lo", "hi"}, {"e6"});
  b.Add("Conv", {"e6", "Wd", "Bd"}, {"d"},
        {{"pads", AttrInts({1, 1, 1, 1})}, {"strides", AttrInts({stride, stride})},
         {"group", AttrInt(e)}});
  b.Add("Clip", {"d", "lo", "hi"}, {"d6"});
  b.Add("Conv", {"d6", "Wp"}, {"y"});
  b.ValueShape("e", {1, e, size, size}).ValueShape("e6", {1, e, size, size});
  b.ValueShape("d", {1, e, out, out}).ValueShape("d6", {1, e, out, out});
  b.Output("y");
  if (expand_is_output) b.Output("e6");
  return b;
}

TEST(DepthwiseFusion, ExpandAndDepthwiseBecomeOneBlockedConv) {
  // MobileNetV2's 16 → 96 at 112x112, stride 2 and 24 → 144 at 56x56, stride 1 take oneDNN's
  // fused kernel; 40 channels (not a multiple of 16) at 12x12 / 13x13 its reference fusion, which
  // the kernel replaces by two primitives. All must match the unoptimized model.
  struct Case {
    int64_t c, e, size, stride;
  };
  for (Case k : {Case{16, 96, 112, 2}, Case{24, 144, 56, 1}, Case{8, 40, 12, 1}, Case{8, 40, 13, 2}}) {
    ModelBuilder b = ExpandDepthwiseModel(k.c, k.e, k.size, k.stride, false);
    OptimizationReport report;
    Model opt = Optimized(b.model(), &report, OptimizationLevel::kAll);
    EXPECT_EQ(Fired(report, "DepthwiseFusion"), 1) << k.size;
    EXPECT_EQ(CountDomainOps(opt.graph, "BlockedConv"), 2) << k.size;
    ExpectSameOutputs(b.model(), {RandomFloat({1, k.c, k.size, k.size}, -1, 1, 45)},
                      OptimizationLevel::kAll, 1e-4, 1e-4);
  }
}

TEST(DepthwiseFusion, NotWhenTheExpandedTensorIsAlsoRead) {
  ModelBuilder b = ExpandDepthwiseModel(8, 40, 12, 1, /*expand_is_output=*/true);
  OptimizationReport report;
  Optimized(b.model(), &report, OptimizationLevel::kAll);
  EXPECT_EQ(Fired(report, "DepthwiseFusion"), 0);
  ExpectSameOutputs(b.model(), {RandomFloat({1, 8, 12, 12}, -1, 1, 46)}, OptimizationLevel::kAll,
                    1e-4, 1e-4);
}

}  // namespace
}  // namespace extended_passes_test
}  // namespace inferd::testing
