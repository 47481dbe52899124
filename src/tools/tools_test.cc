#include <gtest/gtest.h>

#include <random>

#include "tools/bench_command.h"
#include "tools/inspect_command.h"
#include "tools/quantize_command.h"
#include "tools/tensor_util.h"

namespace inferd::tools {
namespace {

ValueInfo Info(const std::string& name, DataType dtype, std::vector<Dim> dims) {
  ValueInfo vi;
  vi.name = name;
  vi.dtype = dtype;
  vi.shape = std::move(dims);
  return vi;
}

TEST(ToolsTest, SanitizesAndDeduplicatesFileNames) {
  EXPECT_EQ(SanitizeFileName("logits"), "logits");
  EXPECT_EQ(SanitizeFileName("y/out:0"), "y_out_0");
  EXPECT_EQ(SanitizeFileName("../../etc/passwd"), ".._.._etc_passwd");
  EXPECT_EQ(SanitizeFileName(""), "output");
  EXPECT_EQ(SanitizeFileName(".."), "output");
  EXPECT_EQ(UniqueFileNames({"a/b", "a:b", "a_b"}),
            (std::vector<std::string>{"a_b", "a_b_1", "a_b_2"}));
}

TEST(ToolsTest, ParsesNamedPaths) {
  std::string name, path;
  ASSERT_TRUE(ParseNamedPath("x=in.npy", &name, &path).ok());
  EXPECT_EQ(name, "x");
  EXPECT_EQ(path, "in.npy");
  EXPECT_FALSE(ParseNamedPath("in.npy", &name, &path).ok());
  EXPECT_FALSE(ParseNamedPath("=in.npy", &name, &path).ok());
  EXPECT_FALSE(ParseNamedPath("x=", &name, &path).ok());
}

TEST(ToolsTest, RandomInputsUseBatchOneAndSmallIntegers) {
  std::mt19937_64 rng(1);
  Dim batch;
  batch.param = "batch";
  auto f = RandomInput(Info("x", DataType::kFloat32, {batch, Dim{3, ""}}), rng);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->shape(), (Shape{1, 3}));
  for (float v : f->values<float>()) EXPECT_TRUE(v >= -1.f && v < 1.f);

  auto ids = RandomInput(Info("ids", DataType::kInt64, {Dim{64, ""}}), rng, 5);
  ASSERT_TRUE(ids.ok());
  for (int64_t v : ids->values<int64_t>()) EXPECT_TRUE(v >= 0 && v < 5);

  auto half = RandomInput(Info("h", DataType::kFloat16, {}), rng);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->shape(), Shape{});

  ValueInfo no_rank;
  no_rank.name = "r";
  no_rank.dtype = DataType::kFloat32;
  EXPECT_EQ(RandomInput(no_rank, rng).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(RandomInput(Info("s", DataType::kString, {}), rng).ok());
}

TEST(ToolsTest, IntegerLimitFollowsGatherTables) {
  Graph g;
  g.initializers["table"] = Tensor::Allocate(DataType::kFloat32, {30, 8});
  g.AddNode("Gather", {"table", "ids"}, {"emb"});
  EXPECT_EQ(IntegerInputLimit(g, "ids"), 30);
  EXPECT_EQ(IntegerInputLimit(g, "other", 7), 7);
}

TEST(ToolsTest, StatsSkipNaN) {
  Tensor t = Tensor::FromVector<float>({1.f, NAN, 3.f});
  TensorStats s = ComputeStats(t);
  EXPECT_EQ(s.min, 1.0);
  EXPECT_EQ(s.max, 3.0);
  EXPECT_EQ(s.mean, 2.0);
  EXPECT_EQ(s.nan_count, 1);
  EXPECT_NE(SummaryLine("y", t).find("float32[3]"), std::string::npos);
}

TEST(ToolsTest, AnalyzeCountsFlopsParametersAndUnsupportedOps) {
  Model m;
  m.opsets[""] = 17;
  m.opsets["com.example"] = 1;
  Graph& g = m.graph;
  g.inputs.push_back(Info("x", DataType::kFloat32, {Dim{1, ""}, Dim{3, ""}, Dim{8, ""}, Dim{8, ""}}));
  g.initializers["w"] = Tensor::Allocate(DataType::kFloat32, {4, 3, 3, 3});
  g.initializers["b"] = Tensor::Allocate(DataType::kFloat32, {4});
  g.value_info["c"] = Info("c", DataType::kFloat32, {Dim{1, ""}, Dim{4, ""}, Dim{8, ""}, Dim{8, ""}});
  g.value_info["r"] = Info("r", DataType::kFloat32, {Dim{1, ""}, Dim{4, ""}, Dim{8, ""}, Dim{8, ""}});
  g.AddNode("Conv", {"x", "w", "b"}, {"c"});
  g.AddNode("Relu", {"c"}, {"r"});
  Node* odd = g.AddNode("Frobnicate", {"r"}, {"y"});
  odd->domain = "com.example";
  g.outputs.push_back(Info("y", DataType::kFloat32, {}));

  ModelReport r = AnalyzeModel(m);
  EXPECT_EQ(r.num_nodes, 3);
  EXPECT_EQ(r.op_counts["Conv"], 1);
  EXPECT_EQ(r.op_counts["com.example::Frobnicate"], 1);
  EXPECT_EQ(r.num_parameters, 4 * 3 * 3 * 3 + 4);
  // Conv: 2 · (1·4·8·8 outputs) · (3·3·3 weights each); Relu: 1 per output element.
  EXPECT_DOUBLE_EQ(r.flops, 2.0 * 256 * 27 + 256);
  ASSERT_EQ(r.unsupported_ops.size(), 1u);
  EXPECT_NE(r.unsupported_ops[0].find("Frobnicate"), std::string::npos);
}

TEST(ToolsTest, RooflineHoldsEachBoundAgainstItsPeak) {
  cpu::MachinePeaks peaks;
  peaks.fp32_gflops = 200;
  peaks.int8_gops = 400;
  peaks.mem_read_gbps = 20;
  // The BERT-base attention: 50,331,648 FLOPs in 14 ms = 3.595 GFLOP/s, 1.8% of 200.
  RooflinePoint a = Roofline(50331648, 0, 14, CostBound::kCompute, false, peaks);
  EXPECT_STREQ(a.unit, "GFLOP/s");
  EXPECT_STREQ(a.peak, "FP32");
  EXPECT_NEAR(a.rate, 3.5951, 1e-4);
  EXPECT_NEAR(a.percent, 1.7976, 1e-4);
  RooflinePoint q = Roofline(2e9, 0, 10, CostBound::kCompute, true, peaks);  // 200 GOP/s
  EXPECT_STREQ(q.peak, "INT8");
  EXPECT_DOUBLE_EQ(q.percent, 50);
  RooflinePoint m = Roofline(0, 1e8, 10, CostBound::kMemory, false, peaks);  // 10 GB/s
  EXPECT_STREQ(m.unit, "GB/s");
  EXPECT_DOUBLE_EQ(m.rate, 10);
  EXPECT_DOUBLE_EQ(m.percent, 50);
  EXPECT_STREQ(Roofline(1, 1, 1, CostBound::kNone, false, peaks).unit, "");
  EXPECT_STREQ(Roofline(1, 1, 0, CostBound::kCompute, false, peaks).unit, "");  // no time
  EXPECT_DOUBLE_EQ(Roofline(1e9, 0, 1, CostBound::kCompute, false, {}).percent, 0);  // no peak
}

TEST(ToolsTest, Bf16NoteNamesTheIsa) {
  cpu::CpuInfo c;
  c.dnnl_isa = "avx2";
  const std::string note = Bf16FallbackNote(c);
  EXPECT_NE(note.find("no native BF16 (oneDNN ISA avx2"), std::string::npos) << note;
  EXPECT_NE(note.find("in FP32"), std::string::npos) << note;
  // Native bf16 measured slower: the note carries the measured reason.
  const std::string measured = Bf16MeasuredNote(cpu::DecideBf16(true, "", 0.64, 0.7));
  EXPECT_NE(measured.find("convolutions in FP32 (bf16 measured 0.64x FP32)"), std::string::npos)
      << measured;
  EXPECT_NE(measured.find("half the size"), std::string::npos) << measured;
}

}  // namespace
}  // namespace inferd::tools
