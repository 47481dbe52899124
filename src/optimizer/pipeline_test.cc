// Levels, the report, the graph editor's output-name rules, and the ONNX round trip of an
// optimized model (onnx checker, same outputs), including `inferd optimize`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "graph/onnx_io.h"
#include "kernels/cpu/cpu_provider.h"
#include "optimizer/graph_edit.h"
#include "optimizer/test_graphs.h"

namespace inferd::testing {
namespace {

namespace fs = std::filesystem;

TEST(OptimizationLevel, Parses) {
  EXPECT_EQ(ParseOptimizationLevel("none").value(), OptimizationLevel::kNone);
  EXPECT_EQ(ParseOptimizationLevel("Basic").value(), OptimizationLevel::kBasic);
  EXPECT_EQ(ParseOptimizationLevel("extended").value(), OptimizationLevel::kExtended);
  EXPECT_EQ(ParseOptimizationLevel("ALL").value(), OptimizationLevel::kAll);
  EXPECT_EQ(ParseOptimizationLevel("2").value(), OptimizationLevel::kExtended);
  auto bad = ParseOptimizationLevel("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_STREQ(OptimizationLevelName(OptimizationLevel::kAll), "all");
}

// x → Conv → BN → Identity → Relu → y, plus a foldable constant branch.
ModelBuilder SmallCnn() {
  ModelBuilder b(13);
  b.Input("x", {1, 3, 6, 6});
  b.Init("W", RandomFloat({4, 3, 3, 3}, -1, 1, 1));
  b.Init("scale", RandomFloat({4}, 0.5, 2, 2));
  b.Init("bias", RandomFloat({4}, -1, 1, 3));
  b.Init("mean", RandomFloat({4}, -1, 1, 4));
  b.Init("var", RandomFloat({4}, 0.5, 2, 5));
  b.Add("Conv", {"x", "W"}, {"c"}, {{"pads", AttrInts({1, 1, 1, 1})}}, "conv1");
  b.Add("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"}, {}, "bn1");
  b.Add("Identity", {"bn"}, {"id"});
  b.Add("Relu", {"id"}, {"y"}, {}, "relu1");
  b.Output("y", {1, 4, 6, 6}, true);
  for (const char* v : {"c", "bn", "id"}) b.ValueShape(v, {1, 4, 6, 6});
  return b;
}

TEST(Pipeline, NoneLeavesTheGraphAlone) {
  OptimizationReport report;
  Model m = Optimized(SmallCnn().model(), &report, OptimizationLevel::kNone);
  EXPECT_EQ(m.graph.nodes.size(), 4u);
  EXPECT_TRUE(report.passes.empty());
}

TEST(Pipeline, ReportsEveryPassInOrder) {
  OptimizationReport report;
  Model m = Optimized(SmallCnn().model(), &report);
  ASSERT_EQ(report.passes.size(), 8u);  // incl. QdqFusion
  EXPECT_EQ(report.passes.front().pass, "ConstantFolding");
  EXPECT_EQ(report.passes.back().pass, "DeadNodeElimination");
  EXPECT_EQ(Fired(report, "ConvBnFusion"), 1);
  EXPECT_EQ(Fired(report, "NoOpElimination"), 1);
  EXPECT_EQ(report.nodes_before, 4u);
  EXPECT_EQ(report.nodes_after, 2u);
  EXPECT_NE(report.ToString().find("ConvBnFusion: 1"), std::string::npos);
  // The extended level runs at least the basic passes.
  OptimizationReport ext;
  Optimized(SmallCnn().model(), &ext, OptimizationLevel::kExtended);
  EXPECT_GE(ext.passes.size(), report.passes.size());
}

TEST(GraphEditor, BypassKeepsGraphOutputNames) {
  ModelBuilder b;
  b.Input("x", {2});
  b.Add("Relu", {"x"}, {"r"});
  b.Add("Identity", {"r"}, {"y"});
  b.Add("Neg", {"r"}, {"z"});
  b.Output("y").Output("z");
  Model m = b.Build();
  GraphEditor ed(m.graph);
  Node* id = m.graph.nodes[1].get();
  EXPECT_TRUE(ed.BypassNode(id, "r", "y"));
  ASSERT_TRUE(ed.Commit().ok());
  ASSERT_EQ(m.graph.nodes.size(), 2u);
  EXPECT_EQ(m.graph.nodes[0]->outputs[0], "y");  // Relu now produces the output
  EXPECT_EQ(m.graph.nodes[1]->inputs[0], "y");   // and Neg reads it
  EXPECT_EQ(ed.UniqueValueName("y"), "y_1");
  EXPECT_EQ(ed.UniqueValueName("fresh"), "fresh");
}

TEST(GraphEditor, RenamesReachIntoSubgraphs) {
  ModelBuilder b;
  b.Input("x", {2});
  b.Input("cond", {}, DataType::kBool);
  b.Add("Relu", {"x"}, {"r"});
  b.Add("Identity", {"r"}, {"i"});
  auto branch = std::make_shared<Graph>();
  branch->name = "then";
  branch->AddNode("Neg", {"i"}, {"out"});
  ValueInfo vi;
  vi.name = "out";
  branch->outputs.push_back(vi);
  auto else_branch = std::make_shared<Graph>();
  else_branch->name = "else";
  else_branch->AddNode("Abs", {"i"}, {"out"});
  else_branch->outputs.push_back(vi);
  Attribute then_attr, else_attr;
  then_attr.type = else_attr.type = Attribute::Type::kGraph;
  then_attr.g = branch;
  else_attr.g = else_branch;
  b.Add("If", {"cond"}, {"y"}, {{"then_branch", then_attr}, {"else_branch", else_attr}});
  b.Output("y");
  Model m = b.Build();
  OptimizationReport report;
  ASSERT_TRUE(Optimize(m, OptimizationLevel::kBasic, CpuProvider(), &report).ok());
  EXPECT_EQ(Fired(report, "NoOpElimination"), 1);
  EXPECT_EQ(branch->nodes[0]->inputs[0], "r");
  EXPECT_EQ(else_branch->nodes[0]->inputs[0], "r");
  Tensor cond = Tensor::Scalar<bool>(true);
  Tensor x = RandomFloat({2});
  auto out = RunModel(std::move(m), {x, cond}, OptimizationLevel::kNone);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], -std::max(0.f, x.data<float>()[0]));
}

// Saves the optimized model, checks it with the Python onnx checker (if python3-onnx is there),
// loads it back and compares its outputs with the original's.
TEST(Pipeline, OptimizedModelRoundTripsThroughOnnx) {
  fs::path dir = fs::path(INFERD_BINARY_DIR) / "optimizer_test";
  fs::create_directories(dir);
  Model original = SmallCnn().Build();
  Model opt = Optimized(original);
  fs::path path = dir / "small_cnn_opt.onnx";
  ASSERT_TRUE(SaveOnnxModel(opt, path).ok());
  if (std::system("/usr/bin/python3 -c 'import onnx' 2>/dev/null") == 0) {
    std::string cmd =
        "/usr/bin/python3 -c \"import onnx, sys; onnx.checker.check_model("
        "onnx.load(sys.argv[1]), full_check=True)\" " +
        path.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  auto loaded = LoadOnnxModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Tensor x = RandomFloat({1, 3, 6, 6}, -1, 1, 9);
  auto want = RunModel(std::move(original), {x}, OptimizationLevel::kNone);
  auto got = RunModel(std::move(loaded).value(), {x}, OptimizationLevel::kNone);
  ASSERT_TRUE(want.ok() && got.ok());
  ExpectTensorNear((*got)[0], (*want)[0], 1e-4, 1e-5);
}

// `inferd optimize` end to end when the binary has been built (it is not a dependency of this
// test binary): output written, report printed, bad input rejected with one line and exit 1.
TEST(Pipeline, OptimizeCommand) {
  fs::path inferd = fs::path(INFERD_BINARY_DIR) / "inferd";
  if (!fs::exists(inferd)) GTEST_SKIP() << "build the inferd target to run this test";
  fs::path dir = fs::path(INFERD_BINARY_DIR) / "optimizer_test";
  fs::create_directories(dir);
  fs::path in = dir / "cli_in.onnx", out = dir / "cli_out.onnx", log = dir / "cli.log";
  fs::remove(out);
  ASSERT_TRUE(SaveOnnxModel(SmallCnn().Build(), in).ok());
  auto run = [&](const std::string& args) {
    std::string cmd = inferd.string() + " optimize " + args + " >" + log.string() + " 2>&1";
    int rc = std::system(cmd.c_str());
    std::ifstream f(log);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return std::make_pair(WEXITSTATUS(rc), text);
  };
  auto [rc, text] = run(in.string() + " -o " + out.string() + " --level basic --report");
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("ConvBnFusion: 1"), std::string::npos) << text;
  EXPECT_TRUE(fs::exists(out));
  auto reloaded = LoadOnnxModel(out);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_EQ(reloaded->graph.nodes.size(), 2u);

  auto [rc2, text2] = run(in.string() + " -o " + out.string() + " --level turbo");
  EXPECT_EQ(rc2, 1) << text2;
  EXPECT_NE(text2.find("unknown optimization level"), std::string::npos) << text2;
  auto [rc3, text3] = run((dir / "missing.onnx").string() + " -o " + out.string());
  EXPECT_EQ(rc3, 1) << text3;
  EXPECT_EQ(std::count(text3.begin(), text3.end(), '\n'), 1) << text3;
}

}  // namespace
}  // namespace inferd::testing
