// Weight-only INT8/INT4 decoder folders (quantize/nbits_weights.h) through the model runner:
// they load, their logits stay close to PyTorch's FP32 reference, the Q/K/V and gate/up merge of
// MatMulNBits changes nothing, and corrupt or unsupported folders fail with the reason.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "generation/model_runner.h"
#include "generation/test_util.h"
#include "graph/onnx_io.h"
#include "quantize/nbits_weights.h"

namespace inferd::gen {
namespace nbits_runner_test {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("inferd_nbits_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d.parent_path());
  return d;
}

fs::path Quantized(const std::string& model, int bits, int64_t group, bool asym) {
  quantize::NBitsOptions o;
  o.bits = bits;
  o.group_size = group;
  o.asymmetric = asym;
  const fs::path out = TempDir(model + "-" + std::to_string(bits) + "-" + std::to_string(group) +
                               (asym ? "a" : "s"));
  quantize::QuantizeReport report;
  Status st = quantize::QuantizeDecoderFolder(GenModelsDir() / model, out, o, &report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

std::unique_ptr<ModelRunner> Open(const fs::path& dir, bool merge = true) {
  RunnerOptions o;
  o.kv_cache_bytes = 4 << 20;
  o.block_size = 16;
  o.num_threads = 2;
  o.merge_projections = merge;
  auto r = CreateDecoderRunner(dir, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

struct Reference {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> logits;
};

Reference ReadReference(const fs::path& file) {
  std::ifstream f(file);
  std::stringstream s;
  s << f.rdbuf();
  rapidjson::Document doc;
  doc.Parse(s.str().c_str());
  Reference ref;
  for (rapidjson::SizeType p = 0; p < doc["prompts"].Size() && p < 8; ++p) {
    ref.prompts.emplace_back();
    for (const auto& t : doc["prompts"][p].GetArray()) ref.prompts.back().push_back(t.GetInt());
    ref.logits.emplace_back();
    for (const auto& v : doc["logits_first"][p].GetArray()) ref.logits.back().push_back(v.GetFloat());
  }
  return ref;
}

// The prompt in one step (prefill), or token by token (decode steps): the last token's logits.
Tensor Logits(ModelRunner& r, const std::vector<int32_t>& prompt, bool token_by_token) {
  const std::vector<int32_t> table = {0, 1, 2, 3};
  Tensor logits;
  if (!token_by_token) {
    SequenceChunk c{1, prompt, 0, table, true};
    EXPECT_TRUE(r.Step({&c, 1}, &logits).ok());
    return logits;
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    SequenceChunk c{1, std::span<const int32_t>(prompt).subspan(i, 1), static_cast<int64_t>(i),
                    table, true};
    EXPECT_TRUE(r.Step({&c, 1}, &logits).ok());
  }
  return logits;
}

double SqnrDb(const float* got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += std::pow(double(got[i]) - want[i], 2);
    norm += std::pow(double(want[i]), 2);
  }
  return 10 * std::log10(norm / std::max(err, 1e-30));
}

class NBitsDecoder : public ::testing::TestWithParam<std::string> {};

// Both paths of the kernel (prefill: dequantized panels; decode: the integer matrix-vector
// product) against PyTorch FP32. Bounds measured on these models with margin: INT8 > 30 dB,
// INT4 > 12 dB (the random-weight test models; the trained tiny-llama is far above).
TEST_P(NBitsDecoder, LogitsStayCloseToFloat) {
  REQUIRE_GEN_MODEL(GetParam());
  const Reference ref = ReadReference(GenModelsDir() / GetParam() / "reference.json");
  ASSERT_FALSE(ref.prompts.empty());
  for (int bits : {8, 4}) {
    for (bool asym : {false, true}) {
      auto r = Open(Quantized(GetParam(), bits, bits == 8 ? 128 : 32, asym));
      ASSERT_NE(r, nullptr);
      for (size_t p = 0; p < ref.prompts.size(); p += 3) {
        for (bool decode : {false, true}) {
          const double db = SqnrDb(Logits(*r, ref.prompts[p], decode).data<float>(), ref.logits[p]);
          EXPECT_GT(db, bits == 8 ? 30.0 : 12.0)
              << bits << " bits " << (asym ? "asym" : "sym") << (decode ? " decode" : " prefill")
              << " prompt " << p;
        }
      }
    }
  }
}

// Merging the Q/K/V and gate/up MatMulNBits stacks their rows: every output of the merged product
// is the same computation. (The runner's SwiGLU fusion comes with the merge, and its sigmoid
// rounds differently from the Sigmoid op's, so the logits agree to float rounding, not bits.)
TEST_P(NBitsDecoder, MergedProjectionsGiveTheSameLogits) {
  REQUIRE_GEN_MODEL(GetParam());
  const Reference ref = ReadReference(GenModelsDir() / GetParam() / "reference.json");
  const fs::path dir = Quantized(GetParam(), 4, 64, true);
  auto merged = Open(dir, true), plain = Open(dir, false);
  ASSERT_TRUE(merged && plain);
  for (bool decode : {false, true}) {
    Tensor a = Logits(*merged, ref.prompts[0], decode), b = Logits(*plain, ref.prompts[0], decode);
    ASSERT_EQ(a.NumElements(), b.NumElements());
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-4 * (1 + std::fabs(b.data<float>()[i])))
          << i << (decode ? " decode" : " prefill");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Generation, NBitsDecoder,
                         ::testing::Values("test-llama", "test-gpt2", "tiny-llama"));
// test-moe: its experts become ai.inferd.MoENBits (moe_nbits_runner_test.cc), whose every row
// count takes the integer path, prefill included.
INSTANTIATE_TEST_SUITE_P(MoE, NBitsDecoder, ::testing::Values("test-moe"));

TEST(NBitsFolder, BadFoldersAndOptionsFailWithTheReason) {
  quantize::QuantizeReport report;
  quantize::NBitsOptions o;
  const fs::path empty = TempDir("empty");
  fs::create_directories(empty);
  Status st = quantize::QuantizeDecoderFolder(empty, TempDir("out"), o, &report);
  EXPECT_NE(st.message().find("not a decoder model folder"), std::string::npos) << st.ToString();
  o.group_size = 16;
  st = quantize::QuantizeDecoderFolder(empty, TempDir("out"), o, &report);
  EXPECT_NE(st.message().find("group size must be 32, 64 or 128"), std::string::npos);
  o.group_size = 32;
  o.bits = 3;
  st = quantize::QuantizeDecoderFolder(empty, TempDir("out"), o, &report);
  EXPECT_NE(st.message().find("4 or 8 bits"), std::string::npos) << st.ToString();
}

TEST(NBitsFolder, NonFiniteWeightsAreRefused) {
  REQUIRE_GEN_MODEL("test-llama");
  auto model = LoadOnnxModel(GenModelsDir() / "test-llama" / "model.onnx");
  ASSERT_TRUE(model.ok());
  for (auto& [name, t] : model->graph.initializers) {
    if (t.dtype() == DataType::kFloat32 && t.rank() == 2 && name.find("MatMul") != std::string::npos) {
      Tensor copy = Tensor::Allocate(DataType::kFloat32, t.shape());
      std::memcpy(copy.raw_data(), t.raw_data(), t.ByteSize());
      copy.data<float>()[3] = std::numeric_limits<float>::infinity();
      t = copy;
      break;
    }
  }
  quantize::QuantizeReport report;
  Status st = quantize::QuantizeWeightsNBits(*model, quantize::NBitsOptions{}, &report);
  EXPECT_NE(st.message().find("non-finite"), std::string::npos) << st.ToString();
}

// A quantized folder whose packed weights were cut short: the load fails naming the node and the
// mismatch, not a crash at the first step.
TEST(NBitsFolder, CorruptQuantizedModelFailsTheLoad) {
  REQUIRE_GEN_MODEL("test-llama");
  const fs::path dir = Quantized("test-llama", 4, 32, false);
  auto model = LoadOnnxModel(dir / "model.onnx");
  ASSERT_TRUE(model.ok());
  bool cut = false;
  for (auto& [name, t] : model->graph.initializers) {
    if (!cut && name.find("_q4_scale") != std::string::npos) {
      t = Tensor::Allocate(DataType::kFloat32, {t.dim(0), t.dim(1) - 1});
      cut = true;
    }
  }
  ASSERT_TRUE(cut);
  ASSERT_TRUE(SaveOnnxModel(*model, dir / "model.onnx").ok());
  RunnerOptions o;
  o.kv_cache_bytes = 1 << 20;
  auto r = CreateDecoderRunner(dir, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("do not match"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace nbits_runner_test
}  // namespace inferd::gen
