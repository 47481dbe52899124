// Quantization toolkit tests: parameters, calibration methods, and INT8/FP16 on a small CNN
// (FP32 vs quantized outputs, the engine's int8 fusion, bad inputs).
#include "quantize/quantizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "common/npy.h"
#include "kernels/cpu/cpu_provider.h"
#include "optimizer/pipeline.h"
#include "quantize/calibration.h"
#include "quantize/int4_weights.h"
#include "quantize/model_util.h"
#include "session/session.h"
#include "session/test_util.h"

namespace inferd::quantize {
namespace {

namespace fs = std::filesystem;
using inferd::testing::RandomFloat;

TEST(QuantParamsTest, AsymmetricUInt8CoversRangeAndZero) {
  QuantParams p = AsymmetricUInt8(-1.f, 3.f);
  EXPECT_NEAR(p.scale, 4.f / 255.f, 1e-7);
  EXPECT_EQ(p.zero_point, 64);
  p = AsymmetricUInt8(2.f, 5.f);  // widened to include 0
  EXPECT_EQ(p.zero_point, 0);
  EXPECT_NEAR(p.scale, 5.f / 255.f, 1e-7);
  p = AsymmetricUInt8(0.f, 0.f);  // degenerate: valid parameters
  EXPECT_GT(p.scale, 0.f);
}

TEST(CalibrationTest, EntropyKeepsTheRangeOfANarrowDistributionFarFromZero) {
  // Like ResNet-50's pooled features: every value in [0.4, 0.6] of the range. KL alone clips at
  // about half the range (into the values); the expected-error check keeps the full range.
  std::vector<double> hist(RangeCalibrator::kBins, 0.0);
  std::mt19937 rng(2);
  std::normal_distribution<double> d(1024, 60);
  for (int i = 0; i < 100000; ++i) hist[std::clamp(static_cast<int>(d(rng)), 0, 2047)] += 1;
  hist[2047] += 1;
  const int bin = EntropyThresholdBin(hist, 256);
  EXPECT_GE(bin, 1300);
  EXPECT_LE(ExpectedQuantizationError(hist, bin, 255), ExpectedQuantizationError(hist, 700, 255));
}

TEST(QuantParamsTest, SymmetricWeightsPerChannel) {
  Tensor w = Tensor::FromVector<float>({1.f, -0.5f, 0.25f, 10.f, -20.f, 5.f}, {2, 3});
  std::vector<float> scales;
  Tensor q = QuantizeWeightsSymmetric(w, 0, true, &scales);
  ASSERT_EQ(scales.size(), 2u);
  EXPECT_NEAR(scales[0], 1.f / 127, 1e-7);
  EXPECT_NEAR(scales[1], 20.f / 127, 1e-6);
  EXPECT_EQ(q.data<int8_t>()[0], 127);
  EXPECT_EQ(q.data<int8_t>()[4], -127);
  q = QuantizeWeightsSymmetric(w, 0, false, &scales);
  ASSERT_EQ(scales.size(), 1u);
  EXPECT_EQ(q.data<int8_t>()[0], 6);  // 1 / (20/127) = 6.35
}

TEST(QuantParamsTest, SevenBitWeightsStayWithinSixtyThree) {
  Tensor w = Tensor::FromVector<float>({1.f, -0.5f, 0.25f, 10.f, -20.f, 5.f}, {2, 3});
  std::vector<float> scales;
  Tensor q = QuantizeWeightsSymmetric(w, 0, true, &scales, WeightMaxLevel(7));
  ASSERT_EQ(scales.size(), 2u);
  EXPECT_NEAR(scales[1], 20.f / 63, 1e-6);
  EXPECT_EQ(q.data<int8_t>()[0], 63);
  EXPECT_EQ(q.data<int8_t>()[4], -63);
  EXPECT_EQ(q.data<int8_t>()[5], 16);  // 5 / (20/63) = 15.75
}

TEST(CalibrationTest, EntropyClipsOutliers) {
  std::vector<double> hist(RangeCalibrator::kBins, 0.0);
  std::mt19937 rng(1);
  std::normal_distribution<double> d(0, 100);
  for (int i = 0; i < 100000; ++i) hist[std::min(2047, static_cast<int>(std::fabs(d(rng))))] += 1;
  hist[2047] += 1;  // one far outlier
  int bin = EntropyThresholdBin(hist, 128);
  EXPECT_LT(bin, 1000);
  EXPECT_GT(bin, 200);
}

TEST(CalibrationTest, ParseNames) {
  EXPECT_TRUE(ParseCalibrationMethod("entropy").ok());
  EXPECT_FALSE(ParseCalibrationMethod("kl").ok());
  EXPECT_FALSE(ParsePrecision("int2").ok());
  EXPECT_EQ(*ParsePrecision("bf16"), Precision::kBf16);
}

Attribute Ints(std::vector<int64_t> v) { return inferd::testing::AttrInts(std::move(v)); }

// input [N, 3, 8, 8] → Conv(8) → Relu → Conv(16, stride 2) → Relu → GlobalAveragePool → Flatten
// → Gemm(10) → logits.
Model SmallCnn() {
  Model m;
  m.opsets[""] = 13;
  m.graph.name = "small_cnn";
  Graph& g = m.graph;
  ValueInfo in;
  in.name = "input";
  in.dtype = DataType::kFloat32;
  in.shape = std::vector<Dim>{{-1, "batch"}, {3, ""}, {8, ""}, {8, ""}};
  g.inputs.push_back(in);
  ValueInfo out;
  out.name = "logits";
  out.dtype = DataType::kFloat32;
  out.shape = std::vector<Dim>{{-1, "batch"}, {10, ""}};
  g.outputs.push_back(out);
  g.initializers["w1"] = RandomFloat({8, 3, 3, 3}, -0.5f, 0.5f, 1);
  g.initializers["b1"] = RandomFloat({8}, -0.1f, 0.1f, 2);
  g.initializers["w2"] = RandomFloat({16, 8, 3, 3}, -0.3f, 0.3f, 3);
  g.initializers["b2"] = RandomFloat({16}, -0.1f, 0.1f, 4);
  g.initializers["w3"] = RandomFloat({10, 16}, -1.f, 1.f, 5);
  g.initializers["b3"] = RandomFloat({10}, -0.1f, 0.1f, 6);
  Node* c1 = g.AddNode("Conv", {"input", "w1", "b1"}, {"c1"}, "conv1");
  c1->attributes["pads"] = Ints({1, 1, 1, 1});
  g.AddNode("Relu", {"c1"}, {"r1"}, "relu1");
  Node* c2 = g.AddNode("Conv", {"r1", "w2", "b2"}, {"c2"}, "conv2");
  c2->attributes["pads"] = Ints({1, 1, 1, 1});
  c2->attributes["strides"] = Ints({2, 2});
  g.AddNode("Relu", {"c2"}, {"r2"}, "relu2");
  g.AddNode("GlobalAveragePool", {"r2"}, {"p"}, "pool");
  g.AddNode("Flatten", {"p"}, {"f"}, "flatten");
  Node* fc = g.AddNode("Gemm", {"f", "w3", "b3"}, {"logits"}, "fc");
  fc->attributes["transB"] = inferd::testing::AttrInt(1);
  return m;
}

class QuantizeModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("inferd_quantize_test_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "cal");
    ASSERT_TRUE(SaveNpy(RandomFloat({64, 3, 8, 8}, -1.f, 1.f, 7), dir_ / "cal" / "a.npy").ok());
    ASSERT_TRUE(SaveNpy(RandomFloat({36, 3, 8, 8}, -1.f, 1.f, 8), dir_ / "cal" / "b.npy").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  static Tensor Run(Model m, const Tensor& x, OptimizationLevel level) {
    SessionOptions o;
    o.num_threads = 2;
    o.optimization_level = level;
    auto s = Session::Create(std::move(m), o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return Tensor();
    std::vector<Tensor> outs;
    Status st = (*s)->Run({x}, &outs);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return st.ok() ? outs[0] : Tensor();
  }

  fs::path dir_;
};

TEST_F(QuantizeModelTest, Int8QdqAgreesWithFp32AndFusesToInt8Ops) {
  for (auto method :
       {CalibrationMethod::kMinMax, CalibrationMethod::kPercentile, CalibrationMethod::kEntropy}) {
    Model m = SmallCnn();
    QuantizeOptions o;
    o.calibration_dir = dir_ / "cal";
    o.method = method;
    o.num_threads = 2;
    o.report = true;
    QuantizeReport report;
    Status st = QuantizeModel(m, o, &report);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(report.calibration_samples, 100);
    ASSERT_EQ(report.layers.size(), 3u);
    for (const auto& l : report.layers) EXPECT_GT(l.weight_sqnr_db, 30) << l.node;
    ASSERT_EQ(report.output_sqnr_db.size(), 1u);
    EXPECT_GT(report.output_sqnr_db[0].second, 25) << static_cast<int>(method) << report.ToString();
    EXPECT_NE(report.ToString().find("conv2"), std::string::npos);
    // The written graph is standard QDQ.
    int q = 0, dq = 0;
    for (const auto& n : m.graph.nodes) {
      q += n->op_type == "QuantizeLinear";
      dq += n->op_type == "DequantizeLinear";
    }
    EXPECT_EQ(q, 4);  // input, r1, r2, f (logits stay float)
    EXPECT_GE(dq, 3 + 3 + 3);
    // The engine runs it with int8 convolutions and agrees with FP32.
    Tensor x = RandomFloat({5, 3, 8, 8}, -1.f, 1.f, 99);
    Tensor ref = Run(SmallCnn(), x, OptimizationLevel::kBasic);
    Tensor got = Run(CloneModel(m), x, OptimizationLevel::kBasic);
    ASSERT_TRUE(got.defined());
    EXPECT_GT(Sqnr(ref, got), 25.0);
    Model fused = CloneModel(m);
    ASSERT_TRUE(Optimize(fused, OptimizationLevel::kBasic, CpuProvider()).ok());
    int qconv = 0;
    for (const auto& n : fused.graph.nodes) qconv += n->op_type == "QLinearConv";
    EXPECT_EQ(qconv, 2);
  }
}

// 7-bit weights (what the fast int8 kernels need on CPUs without VNNI) stay within [-63, 63],
// still agree with FP32, and are what weight_bits 0 picks on such a CPU; other values are refused.
TEST_F(QuantizeModelTest, WeightBitsSevenAndAuto) {
  for (int bits : {7, 8, 0}) {
    Model m = SmallCnn();
    QuantizeOptions o;
    o.calibration_dir = dir_ / "cal";
    o.num_threads = 2;
    o.weight_bits = bits;
    QuantizeReport report;
    ASSERT_TRUE(QuantizeModel(m, o, &report).ok());
    const int expect = bits != 0 ? bits : (CpuInt8NeedsSevenBitWeights() ? 7 : 8);
    EXPECT_EQ(report.weight_bits, expect);
    int max_abs = 0;
    for (const auto& [name, t] : m.graph.initializers) {
      if (t.dtype() != DataType::kInt8 || name.find("_quantized") == std::string::npos) continue;
      for (int64_t i = 0; i < t.NumElements(); ++i) {
        max_abs = std::max(max_abs, std::abs(static_cast<int>(t.data<int8_t>()[i])));
      }
    }
    EXPECT_EQ(max_abs, WeightMaxLevel(expect)) << bits;
    Tensor x = RandomFloat({5, 3, 8, 8}, -1.f, 1.f, 99);
    Tensor ref = Run(SmallCnn(), x, OptimizationLevel::kBasic);
    Tensor got = Run(CloneModel(m), x, OptimizationLevel::kAll);
    ASSERT_TRUE(got.defined());
    EXPECT_GT(Sqnr(ref, got), 22.0) << bits;
  }
  Model m = SmallCnn();
  QuantizeOptions o;
  o.calibration_dir = dir_ / "cal";
  o.weight_bits = 6;
  QuantizeReport report;
  Status st = QuantizeModel(m, o, &report);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("weight bits must be 7 or 8"), std::string::npos) << st.ToString();
}

TEST_F(QuantizeModelTest, AccuracyTargetReturnsLayersToFp32) {
  Model m = SmallCnn();
  QuantizeOptions o;
  o.calibration_dir = dir_ / "cal";
  o.num_threads = 2;
  QuantizeReport full;
  ASSERT_TRUE(QuantizeModel(m, o, &full).ok());
  EXPECT_TRUE(full.output_sqnr_db.empty());  // no report asked, no target
  // A target just above what full INT8 reaches: some layers go back to FP32 and it is met.
  o.report = true;
  m = SmallCnn();
  ASSERT_TRUE(QuantizeModel(m, o, &full).ok());
  const double all_int8 = full.output_sqnr_db[0].second;
  m = SmallCnn();
  o.accuracy_target = all_int8 + 2;
  QuantizeReport mixed;
  ASSERT_TRUE(QuantizeModel(m, o, &mixed).ok());
  EXPECT_FALSE(mixed.kept_float.empty());
  EXPECT_LT(mixed.layers.size(), 3u);
  EXPECT_EQ(mixed.layers.size() + mixed.kept_float.size(), 3u);
  if (mixed.layers.size() > 1) {
    EXPECT_GE(mixed.output_sqnr_db[0].second, o.accuracy_target);
  }
  // Out of reach: one layer stays quantized and the report says the target was not reached.
  m = SmallCnn();
  o.accuracy_target = 500;
  ASSERT_TRUE(QuantizeModel(m, o, &mixed).ok());
  EXPECT_EQ(mixed.layers.size(), 1u);
  EXPECT_NE(mixed.ToString().find("not reached"), std::string::npos) << mixed.ToString();
  o.accuracy_metric = "bogus";
  m = SmallCnn();
  EXPECT_EQ(QuantizeModel(m, o, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST_F(QuantizeModelTest, ExcludeAndPerTensor) {
  Model m = SmallCnn();
  QuantizeOptions o;
  o.calibration_dir = dir_ / "cal";
  o.exclude = {"conv2"};
  o.per_channel = false;
  o.samples = 20;
  QuantizeReport report;
  ASSERT_TRUE(QuantizeModel(m, o, &report).ok());
  EXPECT_EQ(report.layers.size(), 2u);
  EXPECT_EQ(report.calibration_samples, 20);
  ASSERT_EQ(report.skipped.size(), 1u);
  for (const auto& n : m.graph.nodes) {
    if (n->name == "conv2") {
      EXPECT_EQ(n->inputs[1], "w2");
    }
  }
}

// x[N, 5, 32] → MatMul(32x64) → Relu → MatMul(64x48) → Gemm-like Add; and a 2-D Gemm(transB).
Model SmallMlp() {
  Model m;
  m.opsets[""] = 13;
  m.graph.name = "small_mlp";
  Graph& g = m.graph;
  ValueInfo in;
  in.name = "x";
  in.dtype = DataType::kFloat32;
  g.inputs.push_back(in);
  ValueInfo out;
  out.name = "y";
  out.dtype = DataType::kFloat32;
  g.outputs.push_back(out);
  g.initializers["w1"] = RandomFloat({32, 64}, -0.3f, 0.3f, 1);
  g.initializers["w2"] = RandomFloat({64, 48}, -0.3f, 0.3f, 2);
  g.initializers["w3"] = RandomFloat({16, 48}, -0.3f, 0.3f, 3);
  g.initializers["b3"] = RandomFloat({16}, -0.1f, 0.1f, 4);
  g.initializers["shape"] = Tensor::FromVector<int64_t>({-1, 48});
  g.AddNode("MatMul", {"x", "w1"}, {"h1"}, "fc1");
  g.AddNode("Relu", {"h1"}, {"r1"}, "relu1");
  g.AddNode("MatMul", {"r1", "w2"}, {"h2"}, "fc2");
  g.AddNode("Reshape", {"h2", "shape"}, {"h2r"}, "flat");
  Node* fc = g.AddNode("Gemm", {"h2r", "w3", "b3"}, {"y"}, "fc3");
  fc->attributes["transB"] = inferd::testing::AttrInt(1);
  return m;
}

TEST_F(QuantizeModelTest, DynamicInt8MatMulAndGemm) {
  Tensor x = RandomFloat({3, 5, 32}, -1.f, 1.f, 11);
  Tensor ref = Run(SmallMlp(), x, OptimizationLevel::kBasic);
  Model m = SmallMlp();
  QuantizeOptions o;
  o.dynamic = true;
  QuantizeReport report;
  Status st = QuantizeModel(m, o, &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.layers.size(), 3u);
  int dql = 0, mmi = 0;
  for (const auto& n : m.graph.nodes) {
    dql += n->op_type == "DynamicQuantizeLinear";
    mmi += n->op_type == "MatMulInteger";
    EXPECT_NE(n->op_type, "MatMul");
  }
  EXPECT_EQ(dql, 3);
  EXPECT_EQ(mmi, 3);
  EXPECT_EQ(m.graph.initializers.count("w1"), 0u);  // float weights dropped
  Tensor got = Run(std::move(m), x, OptimizationLevel::kBasic);
  ASSERT_TRUE(got.defined());
  EXPECT_GT(Sqnr(ref, got), 30.0);
  // Nothing to quantize: a clear error.
  Model conv_only = SmallCnn();
  conv_only.graph.nodes.pop_back();  // drop the Gemm
  conv_only.graph.outputs[0].name = "f";
  EXPECT_EQ(QuantizeModel(conv_only, o, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST_F(QuantizeModelTest, Fp16AndBf16WeightsKeepOutputsClose) {
  Tensor x = RandomFloat({2, 3, 8, 8}, -1.f, 1.f, 5);
  Tensor ref = Run(SmallCnn(), x, OptimizationLevel::kBasic);
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    Model m = SmallCnn();
    QuantizeOptions o;
    o.precision = p;
    QuantizeReport report;
    ASSERT_TRUE(QuantizeModel(m, o, &report).ok());
    EXPECT_LT(report.bytes_after, report.bytes_before * 6 / 10);
    // bf16 asks inferd to compute in bf16 (optimizer/bf16_compute.h); fp16 keeps FP32 compute.
    EXPECT_EQ(m.metadata.count("inferd.compute_precision"), p == Precision::kBf16 ? 1u : 0u);
    Tensor got = Run(std::move(m), x, OptimizationLevel::kBasic);
    ASSERT_TRUE(got.defined());
    EXPECT_GT(Sqnr(ref, got), p == Precision::kFp16 ? 50.0 : 30.0);
  }
}

TEST_F(QuantizeModelTest, BadCalibrationDataFails) {
  QuantizeOptions o;
  Model m = SmallCnn();
  EXPECT_EQ(QuantizeModel(m, o, nullptr).code(), StatusCode::kInvalidArgument);  // no folder
  m = SmallCnn();
  o.calibration_dir = dir_ / "missing";
  EXPECT_EQ(QuantizeModel(m, o, nullptr).code(), StatusCode::kInvalidArgument);
  fs::create_directories(dir_ / "empty");
  m = SmallCnn();
  o.calibration_dir = dir_ / "empty";
  EXPECT_EQ(QuantizeModel(m, o, nullptr).code(), StatusCode::kInvalidArgument);
  fs::create_directories(dir_ / "wrong");
  ASSERT_TRUE(SaveNpy(RandomFloat({4, 3, 5, 5}), dir_ / "wrong" / "a.npy").ok());
  m = SmallCnn();
  o.calibration_dir = dir_ / "wrong";
  Status st = QuantizeModel(m, o, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("a.npy"), std::string::npos) << st.message();
  fs::create_directories(dir_ / "ints");
  ASSERT_TRUE(
      SaveNpy(Tensor::Allocate(DataType::kInt64, {4, 3, 8, 8}), dir_ / "ints" / "a.npy").ok());
  m = SmallCnn();
  o.calibration_dir = dir_ / "ints";
  EXPECT_EQ(QuantizeModel(m, o, nullptr).code(), StatusCode::kInvalidArgument);
  m = SmallCnn();
  o.precision = Precision::kInt4;
  o.int4_block_size = 48;  // not 32/64/128
  EXPECT_EQ(QuantizeModel(m, o, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(Int4Test, PackRoundTrip) {
  Tensor w = RandomFloat({3, 70}, -1.f, 1.f, 3);  // 70: a partial last block and an odd count
  Tensor packed, scales;
  PackInt4(w, 32, &packed, &scales);
  EXPECT_EQ(packed.shape(), (Shape{3, 35}));
  EXPECT_EQ(scales.shape(), (Shape{3, 3}));
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t i = 0; i < 70; ++i) {
      uint8_t b = packed.data<uint8_t>()[r * 35 + i / 2];
      int nib = (i & 1) ? (b >> 4) : (b & 15);
      float s = scales.data<float>()[r * 3 + i / 32];
      EXPECT_NEAR((nib - 8) * s, w.data<float>()[r * 70 + i], s / 2 + 1e-6);
    }
  }
}

TEST_F(QuantizeModelTest, Int4WeightsMatMulGemmGather) {
  // SmallMlp plus an embedding Gather in front.
  Model m = SmallMlp();
  Graph& g = m.graph;
  g.inputs[0].name = "ids";
  g.inputs[0].dtype = DataType::kInt64;
  g.initializers["table"] = RandomFloat({50, 32}, -1.f, 1.f, 12);
  auto gather = std::make_unique<Node>();
  gather->op_type = "Gather";
  gather->name = "embed";
  gather->inputs = {"table", "ids"};
  gather->outputs = {"x"};
  g.nodes.insert(g.nodes.begin(), std::move(gather));
  Tensor ids = Tensor::Allocate(DataType::kInt64, {3, 5});
  for (int64_t i = 0; i < 15; ++i) ids.data<int64_t>()[i] = (i * 7) % 50;
  Model fp32 = CloneModel(m);
  Tensor ref = Run(std::move(fp32), ids, OptimizationLevel::kBasic);
  QuantizeOptions o;
  o.precision = Precision::kInt4;
  QuantizeReport report;
  Status st = QuantizeModel(m, o, &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.layers.size(), 4u);  // embed, fc1, fc2, fc3
  int int4_ops = 0;
  for (const auto& n : m.graph.nodes) {
    // The nbits kernels (MatMulNBits for the Gemms, GatherNBits for the table), 4 bits.
    if (n->domain != "ai.inferd") continue;
    ++int4_ops;
    EXPECT_TRUE(n->op_type == "MatMulNBits" || n->op_type == "GatherNBits") << n->op_type;
    EXPECT_EQ(n->GetInt("bits", 0), 4);
  }
  EXPECT_EQ(int4_ops, 4);
  EXPECT_LT(report.bytes_after, report.bytes_before / 4);
  for (const auto& l : report.layers) EXPECT_GT(l.weight_sqnr_db, 15) << l.node;
  Tensor got = Run(std::move(m), ids, OptimizationLevel::kBasic);
  ASSERT_TRUE(got.defined());
  EXPECT_GT(Sqnr(ref, got), 12.0);
}

}  // namespace
}  // namespace inferd::quantize
