// If / Loop / Scan on small hand-built graphs, including values captured from the outer graph.
#include <gtest/gtest.h>

#include "session/test_util.h"

namespace inferd {
namespace {

using testing::ExpectTensorNear;

ValueInfo Vi(const std::string& name, DataType t = DataType::kUndefined) {
  ValueInfo vi;
  vi.name = name;
  vi.dtype = t;
  return vi;
}

Attribute GraphAttr(std::shared_ptr<Graph> g) {
  Attribute a;
  a.type = Attribute::Type::kGraph;
  a.g = std::move(g);
  return a;
}

StatusOr<std::vector<Tensor>> RunModel(Model model, const std::vector<Tensor>& feeds) {
  SessionOptions opts;
  opts.num_threads = 1;
  ASSIGN_OR_RETURN(auto session, Session::Create(std::move(model), opts));
  std::vector<Tensor> outs;
  RETURN_IF_ERROR(session->Run(feeds, &outs));
  return outs;
}

// out = cond ? (x + y) : (x * y), where x is a graph input captured by both branches and y an
// outer-graph intermediate.
Model IfModel() {
  Model m;
  m.opsets[""] = 17;
  Graph& g = m.graph;
  g.name = "main";
  g.inputs = {Vi("cond", DataType::kBool), Vi("x", DataType::kFloat32)};
  g.outputs = {Vi("out")};
  g.AddNode("Identity", {"x"}, {"y"});
  auto then_g = std::make_shared<Graph>();
  then_g->name = "then";
  then_g->AddNode("Add", {"x", "y"}, {"t_out"});
  then_g->outputs = {Vi("t_out")};
  auto else_g = std::make_shared<Graph>();
  else_g->name = "else";
  else_g->AddNode("Mul", {"x", "y"}, {"e_out"});
  else_g->outputs = {Vi("e_out")};
  Node* n = g.AddNode("If", {"cond"}, {"out"}, "if");
  n->attributes["then_branch"] = GraphAttr(then_g);
  n->attributes["else_branch"] = GraphAttr(else_g);
  return m;
}

TEST(IfTest, PicksBranchAndCapturesOuterValues) {
  Tensor x = Tensor::FromVector<float>({1, 2, 3});
  auto r = RunModel(IfModel(), {Tensor::Scalar<bool>(true), x});
  if (!r.ok() && r.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << r.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({2, 4, 6}));
  r = RunModel(IfModel(), {Tensor::Scalar<bool>(false), x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({1, 4, 9}));
}

TEST(IfTest, OutputIsOuterValueDirectly) {
  Model m;
  m.opsets[""] = 13;
  Graph& g = m.graph;
  g.inputs = {Vi("cond", DataType::kBool), Vi("a", DataType::kFloat32), Vi("b", DataType::kFloat32)};
  g.outputs = {Vi("out")};
  auto then_g = std::make_shared<Graph>();
  then_g->outputs = {Vi("a")};
  auto else_g = std::make_shared<Graph>();
  else_g->outputs = {Vi("b")};
  Node* n = g.AddNode("If", {"cond"}, {"out"});
  n->attributes["then_branch"] = GraphAttr(then_g);
  n->attributes["else_branch"] = GraphAttr(else_g);
  Tensor a = Tensor::FromVector<float>({1, 2}), b = Tensor::FromVector<float>({5, 6, 7});
  auto r = RunModel(std::move(m), {Tensor::Scalar<bool>(false), a, b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], b);
}

TEST(IfTest, BadConditionFails) {
  Tensor cond = Tensor::FromVector<bool>({true, false});
  auto r = RunModel(IfModel(), {cond, Tensor::FromVector<float>({1})});
  EXPECT_FALSE(r.ok());
}

TEST(IfTest, MissingBranchFailsAtCreation) {
  Model m;
  m.opsets[""] = 13;
  m.graph.inputs = {Vi("cond", DataType::kBool)};
  m.graph.outputs = {Vi("out")};
  m.graph.AddNode("If", {"cond"}, {"out"});
  EXPECT_FALSE(Session::Create(std::move(m)).ok());
}

// Loop: sum = sum + i * step for i in [0, M) while cond; scan output collects sum each iteration.
// `step` and `limit` are captured from the outer graph; the body's condition is i < limit.
Model LoopModel(bool with_m, bool with_cond) {
  Model m;
  m.opsets[""] = 13;
  Graph& g = m.graph;
  g.inputs = {Vi("M", DataType::kInt64), Vi("cond", DataType::kBool),
              Vi("sum0", DataType::kFloat32), Vi("step", DataType::kFloat32),
              Vi("limit", DataType::kFloat32)};
  g.outputs = {Vi("sum_final"), Vi("sums")};
  auto body = std::make_shared<Graph>();
  body->name = "body";
  body->inputs = {Vi("i", DataType::kInt64), Vi("c_in", DataType::kBool),
                  Vi("sum", DataType::kFloat32)};
  Node* cast = body->AddNode("Cast", {"i"}, {"i_f"});
  cast->attributes["to"] = testing::AttrInt(static_cast<int64_t>(DataType::kFloat32));
  body->AddNode("Mul", {"i_f", "step"}, {"inc"});
  body->AddNode("Add", {"sum", "inc"}, {"sum_next"});
  body->AddNode("Less", {"i_f", "limit"}, {"c_out"});
  body->AddNode("Identity", {"sum_next"}, {"scan_sum"});
  body->outputs = {Vi("c_out", DataType::kBool), Vi("sum_next", DataType::kFloat32),
                   Vi("scan_sum", DataType::kFloat32)};
  Node* n = g.AddNode("Loop", {with_m ? "M" : "", with_cond ? "cond" : "", "sum0"},
                      {"sum_final", "sums"});
  n->attributes["body"] = GraphAttr(body);
  return m;
}

StatusOr<std::vector<Tensor>> RunLoop(bool with_m, bool with_cond, int64_t trips, bool cond,
                                      float limit) {
  return RunModel(LoopModel(with_m, with_cond),
                  {Tensor::Scalar<int64_t>(trips), Tensor::Scalar<bool>(cond),
                   Tensor::FromVector<float>({0.f, 10.f}), Tensor::Scalar<float>(1.f),
                   Tensor::Scalar<float>(limit)});
}

TEST(LoopTest, TripCountWithScanOutputs) {
  auto r = RunLoop(true, true, 4, true, 1000.f);
  if (!r.ok() && r.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << r.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // sums after i = 0..3: 0, 1, 3, 6.
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({6, 16}));
  ExpectTensorNear((*r)[1], Tensor::FromVector<float>({0, 10, 1, 11, 3, 13, 6, 16}, {4, 2}));
}

TEST(LoopTest, ZeroTripCount) {
  auto r = RunLoop(true, true, 0, true, 1000.f);
  if (!r.ok() && r.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << r.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({0, 10}));
  EXPECT_EQ((*r)[1].shape(), Shape({0}));
}

TEST(LoopTest, FalseInitialConditionRunsZeroTimes) {
  auto r = RunLoop(true, true, 5, false, 1000.f);
  if (!r.ok() && r.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << r.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({0, 10}));
}

TEST(LoopTest, NonScalarBodyConditionFails) {
  // The body's condition output has two elements: an error, not a crash.
  auto bad = RunModel(LoopModel(false, true),
                      {Tensor::Scalar<int64_t>(3), Tensor::Scalar<bool>(true),
                       Tensor::FromVector<float>({0.f, 10.f}), Tensor::Scalar<float>(1.f),
                       Tensor::FromVector<float>({5.f, 6.f})});
  EXPECT_FALSE(bad.ok());
}

TEST(LoopTest, ConditionOnlyLoop) {
  // Scalar state, no M: runs while i < 4, i.e. i = 0..4; sums 0, 1, 3, 6, 10.
  auto r = RunModel(LoopModel(false, true),
                    {Tensor::Scalar<int64_t>(0), Tensor::Scalar<bool>(true),
                     Tensor::Scalar<float>(0.f), Tensor::Scalar<float>(1.f),
                     Tensor::Scalar<float>(4.f)});
  if (!r.ok() && r.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << r.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::Scalar<float>(10.f));
  ExpectTensorNear((*r)[1], Tensor::FromVector<float>({0, 1, 3, 6, 10}));
}

// Scan: running sum over rows of X (state [C]), scan output = state after each step.
Model ScanModel(std::vector<int64_t> in_axes, std::vector<int64_t> in_dirs,
                std::vector<int64_t> out_axes, std::vector<int64_t> out_dirs) {
  Model m;
  m.opsets[""] = 11;
  Graph& g = m.graph;
  g.inputs = {Vi("s0", DataType::kFloat32), Vi("X", DataType::kFloat32),
              Vi("bias", DataType::kFloat32)};
  g.outputs = {Vi("s_final"), Vi("ys")};
  auto body = std::make_shared<Graph>();
  body->inputs = {Vi("s", DataType::kFloat32), Vi("x", DataType::kFloat32)};
  body->AddNode("Add", {"s", "x"}, {"t"});
  body->AddNode("Add", {"t", "bias"}, {"s_next"});  // bias captured from outside
  body->AddNode("Identity", {"s_next"}, {"y"});
  body->outputs = {Vi("s_next"), Vi("y")};
  Node* n = g.AddNode("Scan", {"s0", "X"}, {"s_final", "ys"});
  n->attributes["body"] = GraphAttr(body);
  n->attributes["num_scan_inputs"] = testing::AttrInt(1);
  if (!in_axes.empty()) n->attributes["scan_input_axes"] = testing::AttrInts(in_axes);
  if (!in_dirs.empty()) n->attributes["scan_input_directions"] = testing::AttrInts(in_dirs);
  if (!out_axes.empty()) n->attributes["scan_output_axes"] = testing::AttrInts(out_axes);
  if (!out_dirs.empty()) n->attributes["scan_output_directions"] = testing::AttrInts(out_dirs);
  return m;
}

TEST(ScanTest, ForwardRunningSum) {
  Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  auto r = RunModel(ScanModel({}, {}, {}, {}),
                    {Tensor::FromVector<float>({0, 0}), x, Tensor::Scalar<float>(0.f)});
  if (!r.ok() && r.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << r.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({9, 12}));
  ExpectTensorNear((*r)[1], Tensor::FromVector<float>({1, 2, 4, 6, 9, 12}, {3, 2}));
}

TEST(ScanTest, AxesDirectionsAndCapturedBias) {
  // Scan over axis 1 of a [2, 3] input, in reverse; outputs stacked along axis 1, reversed.
  Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto r = RunModel(ScanModel({1}, {1}, {1}, {1}),
                    {Tensor::FromVector<float>({0, 0}), x, Tensor::Scalar<float>(1.f)});
  if (!r.ok() && r.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << r.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Steps take columns 2, 1, 0: states [4,7], [7,13], [9,18]. Output axis 1, reversed: step k goes
  // to column 2-k.
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({9, 18}));
  ExpectTensorNear((*r)[1], Tensor::FromVector<float>({9, 7, 4, 18, 13, 7}, {2, 3}));
}

TEST(ScanTest, Opset8BatchedWithSequenceLengths) {
  Model m = ScanModel({}, {}, {}, {});
  m.opsets[""] = 8;
  m.graph.inputs.insert(m.graph.inputs.begin(), Vi("lens", DataType::kInt64));
  m.graph.nodes.back()->inputs.insert(m.graph.nodes.back()->inputs.begin(), "lens");
  Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, /**/ 1, 1, 2, 2, 9, 9}, {2, 3, 2});
  auto r = RunModel(std::move(m), {Tensor::FromVector<int64_t>({3, 2}),
                                   Tensor::FromVector<float>({0, 0, 0, 0}, {2, 2}), x,
                                   Tensor::Scalar<float>(0.f)});
  if (!r.ok() && r.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << r.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({9, 12, 3, 3}, {2, 2}));
  ExpectTensorNear((*r)[1], Tensor::FromVector<float>({1, 2, 4, 6, 9, 12, 1, 1, 3, 3, 0, 0}, {2, 3, 2}));
}

TEST(ScanTest, MismatchedBodyFails) {
  Model m = ScanModel({}, {}, {}, {});
  m.graph.nodes.back()->attributes["num_scan_inputs"] = testing::AttrInt(5);
  EXPECT_FALSE(Session::Create(std::move(m)).ok());
  Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  auto r = RunModel(ScanModel({3}, {}, {}, {}),
                    {Tensor::FromVector<float>({0, 0}), x, Tensor::Scalar<float>(0.f)});
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace inferd
