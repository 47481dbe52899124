// Weight-only INT8/INT4 of a mixture-of-experts folder (quantize/nbits_weights.h on test-moe):
// every ai.inferd.MoE node becomes ai.inferd.MoENBits with nothing of the experts left in float,
// the runner loads it and counts the router load as for the float model, and bad experts or
// corrupt quantized ones fail with the reason. (Its logits against PyTorch's: nbits_runner_test.cc,
// instance MoE/NBitsDecoder.)
//
// Models: $INFERD_GEN_MODELS_DIR (as model_runner_test.cc); skips without test-moe unless
// INFERD_GEN_MODELS_REQUIRED is set.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>

#include "generation/model_runner.h"
#include "generation/test_util.h"
#include "graph/onnx_io.h"
#include "quantize/nbits_weights.h"

namespace inferd::gen {
namespace {

namespace fs = std::filesystem;

constexpr char kModel[] = "test-moe";

fs::path TempDir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("inferd_moe_nbits_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d.parent_path());
  return d;
}

fs::path Quantized(int bits, bool asym, quantize::QuantizeReport* report) {
  quantize::NBitsOptions o;
  o.bits = bits;
  o.group_size = bits == 8 ? 64 : 32;
  o.asymmetric = asym;
  const fs::path out = TempDir(std::to_string(bits) + (asym ? "a" : "s"));
  Status st = quantize::QuantizeDecoderFolder(GenModelsDir() / kModel, out, o, report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

int Count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node->op_type == op;
  return n;
}

TEST(MoeNBitsRunner, EveryExpertIsQuantizedAndTheRouterStaysFloat) {
  REQUIRE_GEN_MODEL(kModel);
  for (int bits : {8, 4}) {
    for (bool asym : {false, true}) {
      quantize::QuantizeReport report;
      const fs::path dir = Quantized(bits, asym, &report);
      auto model = LoadOnnxModel(dir / "model.onnx");
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      const Graph& g = model->graph;
      EXPECT_EQ(Count(g, "MoE"), 0) << bits;
      ASSERT_EQ(Count(g, "MoENBits"), 2) << bits;
      for (const auto& n : g.nodes) {
        if (n->op_type != "MoENBits") continue;
        EXPECT_EQ(n->GetInt("bits", 0), bits);
        EXPECT_EQ(n->GetInt("block_size", 0), bits == 8 ? 64 : 32);
        EXPECT_EQ(n->GetInt("top_k", 0), 2);  // MoE's attributes kept
        ASSERT_EQ(n->inputs.size(), asym ? 11u : 8u);
        const Tensor& router = g.initializers.at(n->inputs[1]);
        EXPECT_EQ(router.dtype(), DataType::kFloat32);
        EXPECT_EQ(router.shape(), (Shape{128, 8}));
        const Tensor& gate = g.initializers.at(n->inputs[2]);
        EXPECT_EQ(gate.shape(), (Shape{8, 88, 128 * bits / 8}));  // [E, I, packed H]
        const Tensor& down = g.initializers.at(n->inputs[6]);
        EXPECT_EQ(down.shape(), (Shape{8, 128, 96 * bits / 8}));  // I = 88 padded to 96
      }
      for (const auto& [name, t] : g.initializers) {  // no float expert weights left behind
        if (t.dtype() != DataType::kFloat32 || t.rank() != 3) continue;
        EXPECT_NE(name.find("_scale"), std::string::npos) << name << " " << t.DebugString();
      }
      int moe_layers = 0;
      for (const auto& l : report.layers) {
        if (l.op_type.rfind("MoE ", 0) != 0) continue;
        ++moe_layers;
        // Random uniform-ish weights: ~40 dB at 8 bits, ~19 dB at 4 (quantize reports them).
        EXPECT_GT(l.weight_sqnr_db, bits == 8 ? 35.0 : 15.0) << l.node << " " << l.op_type;
      }
      EXPECT_EQ(moe_layers, 6) << "gate, up and down of 2 layers";
      EXPECT_LT(report.bytes_after, report.bytes_before * (bits == 8 ? 0.35 : 0.22));
    }
  }
}

TEST(MoeNBitsRunner, TheRunnerCountsTheRouterLoadOfQuantizedExperts) {
  REQUIRE_GEN_MODEL(kModel);
  quantize::QuantizeReport report;
  RunnerOptions o;
  o.kv_cache_bytes = 2 << 20;
  o.num_threads = 2;
  auto runner = CreateDecoderRunner(Quantized(4, false, &report), o);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  const std::vector<int32_t> a = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51}, b = {1, 7, 8};
  const std::vector<int32_t> ta = {0}, tb = {1};
  SequenceChunk chunks[2] = {{1, a, 0, ta, true}, {2, b, 0, tb, true}};
  Tensor logits;
  ASSERT_TRUE((*runner)->Step(chunks, &logits).ok());
  const auto load = (*runner)->ExpertTokens();
  ASSERT_EQ(load.size(), 2u);
  for (const auto& layer : load) {
    EXPECT_EQ(std::accumulate(layer.begin(), layer.end(), int64_t{0}), 32);  // 16 tokens x 2
  }
  for (int64_t i = 0; i < logits.NumElements(); ++i)
    ASSERT_TRUE(std::isfinite(logits.data<float>()[i]));
}

// A quantized folder edited after the fact: the load fails naming the node and what is wrong.
TEST(MoeNBitsRunner, CorruptQuantizedExpertsFailTheLoad) {
  REQUIRE_GEN_MODEL(kModel);
  quantize::QuantizeReport report;
  const fs::path dir = Quantized(4, false, &report);
  auto expect_fails = [&](void (*edit)(Model&), const std::string& reason) {
    auto model = LoadOnnxModel(dir / "model.onnx");
    ASSERT_TRUE(model.ok());
    edit(*model);
    const fs::path bad = TempDir("bad");
    fs::create_directories(bad);
    fs::copy_file(dir / "config.json", bad / "config.json");
    ASSERT_TRUE(SaveOnnxModel(*model, bad / "model.onnx").ok());
    RunnerOptions o;
    o.kv_cache_bytes = 1 << 20;
    auto r = CreateDecoderRunner(bad, o);
    ASSERT_FALSE(r.ok()) << "expected: " << reason;
    EXPECT_NE(r.status().message().find(reason), std::string::npos) << r.status().ToString();
  };
  expect_fails(
      [](Model& m) {
        for (auto& n : m.graph.nodes) {
          if (n->op_type != "MoENBits") continue;
          Tensor& s = m.graph.initializers[n->inputs[3]];
          s = Tensor::Allocate(DataType::kFloat32, {s.dim(0), s.dim(1), s.dim(2) - 1});
          break;
        }
      },
      "gate_scales must be float32 [8, 88, 4] (4 bits, block_size 32)");
  expect_fails(
      [](Model& m) {
        for (auto& n : m.graph.nodes) {
          if (n->op_type == "MoENBits") n->attributes["bits"].i = 2;
        }
      },
      "bits must be 4 or 8, got 2");
  expect_fails(
      [](Model& m) {
        for (auto& n : m.graph.nodes) {
          if (n->op_type == "MoENBits") n->attributes["block_size"].i = 64;
        }
      },
      "gate_scales must be float32 [8, 88, 2] (4 bits, block_size 64)");
}

Model LoadTestMoe() {
  auto model = LoadOnnxModel(GenModelsDir() / kModel / "model.onnx");
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(*model) : Model{};
}

Node* FirstMoe(Model& m) {
  for (auto& n : m.graph.nodes) {
    if (n->op_type == "MoE") return n.get();
  }
  return nullptr;
}

TEST(MoeNBitsRunner, ExpertsThatCannotBeQuantizedFailWithTheReason) {
  REQUIRE_GEN_MODEL(kModel);
  quantize::QuantizeReport report;
  {
    Model m = LoadTestMoe();
    Node* n = FirstMoe(m);
    ASSERT_NE(n, nullptr);
    Tensor& up = m.graph.initializers[n->inputs[3]];
    Tensor copy = up.Clone();
    copy.data<float>()[100] = std::numeric_limits<float>::quiet_NaN();
    up = copy;
    Status st = quantize::QuantizeWeightsNBits(m, quantize::NBitsOptions{}, &report);
    EXPECT_NE(st.message().find("weight '" + n->inputs[3] + "' has a non-finite value"),
              std::string::npos)
        << st.ToString();
    EXPECT_EQ(Count(m.graph, "MoENBits"), 0) << "nothing is rewritten on an error";
  }
  {
    Model m = LoadTestMoe();
    Node* n = FirstMoe(m);
    ASSERT_NE(n, nullptr);
    m.graph.initializers[n->inputs[4]] = Tensor::Allocate(DataType::kFloat32, {8, 88, 127});
    Status st = quantize::QuantizeWeightsNBits(m, quantize::NBitsOptions{}, &report);
    EXPECT_NE(st.message().find("down [8, 88, 127] are not [E, H, I], [E, H, I], [E, I, H]"),
              std::string::npos)
        << st.ToString();
  }
  {  // --exclude keeps a MoE node in float
    Model m = LoadTestMoe();
    Node* n = FirstMoe(m);
    ASSERT_NE(n, nullptr);
    quantize::NBitsOptions o;
    o.exclude = {n->name};
    quantize::QuantizeReport r;
    ASSERT_TRUE(quantize::QuantizeWeightsNBits(m, o, &r).ok());
    EXPECT_EQ(Count(m.graph, "MoE"), 1);
    EXPECT_EQ(Count(m.graph, "MoENBits"), 1);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped[0].find("(excluded)"), std::string::npos);
  }
}

}  // namespace
}  // namespace inferd::gen
