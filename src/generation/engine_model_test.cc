// End to end: GenerationEngine on the real runner over the generation models' reference prompts gives PyTorch's greedy tokens, concurrently, one at a
// time, and under a KV budget small enough to force preemptions.
//
// Models: $INFERD_GEN_MODELS_DIR, default <build>/models/gen; skips without them unless
// INFERD_GEN_MODELS_REQUIRED is set (as model_runner_test.cc).
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "common/mutex.h"
#include "generation/engine.h"
#include "generation/test_util.h"

namespace inferd::gen {
namespace {

namespace fs = std::filesystem;

class Result {
 public:
  void OnEvent(const GenerationEvent& e) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    tokens_.insert(tokens_.end(), e.tokens.begin(), e.tokens.end());
    if (e.finished) {
      finished_ = true;
      reason_ = e.finish_reason;
      done_.NotifyAll();
    }
  }
  std::vector<int32_t> Tokens() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (!finished_) done_.Wait(&mu_);
    EXPECT_EQ(reason_, "length");
    return tokens_;
  }

 private:
  Mutex mu_;
  CondVar done_;
  std::vector<int32_t> tokens_ GUARDED_BY(mu_);
  bool finished_ GUARDED_BY(mu_) = false;
  std::string reason_ GUARDED_BY(mu_);
};

struct Reference {
  std::vector<std::vector<int32_t>> prompts, greedy;
};

Reference ReadReference(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  rapidjson::Document d;
  d.Parse(ss.str().c_str());
  Reference ref;
  for (const auto& p : d["prompts"].GetArray()) {
    ref.prompts.emplace_back();
    for (const auto& v : p.GetArray()) ref.prompts.back().push_back(v.GetInt());
  }
  for (const auto& g : d["greedy"].GetArray()) {
    ref.greedy.emplace_back();
    for (const auto& v : g.GetArray()) ref.greedy.back().push_back(v.GetInt());
  }
  return ref;
}

// Greedy outputs of every reference prompt; `concurrent`: all submitted at once.
std::vector<std::vector<int32_t>> Generate(const fs::path& dir, size_t kv_bytes, bool concurrent,
                                           int64_t* preemptions) {
  RunnerOptions ro;
  ro.kv_cache_bytes = kv_bytes;
  auto runner = CreateDecoderRunner(dir, ro);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  auto tok = Tokenizer::Load(dir / "tokenizer.model");
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  auto engine = GenerationEngine::Create(std::move(runner).value(), std::move(tok).value(), {},
                                         &RealClock::Get());
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  const Reference ref = ReadReference(dir / "reference.json");
  std::vector<Result> results(ref.prompts.size());
  std::vector<std::vector<int32_t>> out(ref.prompts.size());
  for (size_t i = 0; i < ref.prompts.size(); ++i) {
    SamplingParams p;
    p.max_tokens = static_cast<int>(ref.greedy[i].size());
    p.temperature = 0;
    p.ignore_eos = true;
    Result* r = &results[i];
    EXPECT_TRUE((*engine)
                    ->Submit({"r" + std::to_string(i), ref.prompts[i], p},
                             [r](const GenerationEvent& e) { r->OnEvent(e); })
                    .ok());
    if (!concurrent) out[i] = results[i].Tokens();
  }
  for (size_t i = 0; i < ref.prompts.size(); ++i) out[i] = results[i].Tokens();
  const EngineStats stats = (*engine)->Stats();
  EXPECT_EQ(stats.kv_blocks_used, 0);
  *preemptions = stats.preemptions;
  return out;
}

class EngineModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineModelTest, GreedyMatchesPyTorchConcurrentlySeriallyAndUnderPreemption) {
  const fs::path dir = GenModelsDir() / GetParam();
  if (!fs::exists(dir / "model.onnx")) {
    // The ctest `generation_runner_models` builds only the random test models; the trained
    // tiny-llama (minutes of training, `make gen-models`) is checked whenever it is present.
    const bool built_by_ctest = std::string_view(GetParam()).starts_with("test-");
    if (built_by_ctest && std::getenv("INFERD_GEN_MODELS_REQUIRED")) {
      FAIL() << "missing model " << GetParam();
    }
    GTEST_SKIP() << GetParam() << " not built (make gen-models) in " << GenModelsDir();
  }
  const Reference ref = ReadReference(dir / "reference.json");
  int64_t preemptions = 0;
  EXPECT_EQ(Generate(dir, 64 << 20, true, &preemptions), ref.greedy);
  EXPECT_EQ(Generate(dir, 64 << 20, false, &preemptions), ref.greedy);
  // A pool of about two sequences' worth of blocks for all prompts at once.
  auto config = LoadDecoderConfig(dir / "config.json");
  ASSERT_TRUE(config.ok());
  size_t longest = 0;
  for (size_t i = 0; i < ref.prompts.size(); ++i) {
    longest = std::max(longest, ref.prompts[i].size() + ref.greedy[i].size());
  }
  const size_t per_token = 2ull * config->num_layers * config->num_kv_heads * config->head_dim * 4;
  const size_t blocks = 2 * ((longest + 15) / 16);
  EXPECT_EQ(Generate(dir, blocks * 16 * per_token, true, &preemptions), ref.greedy);
  EXPECT_GT(preemptions, 0);
}

INSTANTIATE_TEST_SUITE_P(Generation, EngineModelTest,
                         ::testing::Values("test-llama", "test-gpt2", "test-moe", "tiny-llama"));

}  // namespace
}  // namespace inferd::gen
