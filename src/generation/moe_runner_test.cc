// The mixture-of-experts test model (test-moe: Mixtral-style, 8 experts, top-2, one ai.inferd.MoE
// node per layer) through the runner and the engine beyond what DecoderModel / EngineModelTest
// check for every model (logits and greedy tokens vs PyTorch, 16 concurrent streams vs one at a
// time): the router load the runner counts, and the load errors of bad MoE models.
//
// Models: $INFERD_GEN_MODELS_DIR (as model_runner_test.cc); skips without test-moe unless
// INFERD_GEN_MODELS_REQUIRED is set.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "common/mutex.h"
#include "generation/engine.h"
#include "generation/model_runner.h"
#include "generation/test_util.h"
#include "graph/onnx_io.h"

namespace inferd::gen {
namespace {

namespace fs = std::filesystem;

constexpr char kModel[] = "test-moe";

std::unique_ptr<ModelRunner> OpenRunner(const fs::path& dir) {
  RunnerOptions o;
  o.kv_cache_bytes = 2 << 20;
  o.num_threads = 1;
  auto r = CreateDecoderRunner(dir, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

std::vector<int64_t> LayerSums(const std::vector<std::vector<int64_t>>& load) {
  std::vector<int64_t> sums;
  for (const auto& l : load) sums.push_back(std::accumulate(l.begin(), l.end(), int64_t{0}));
  return sums;
}

TEST(MoeRunner, CountsTheTokensRoutedToEachExpertPerLayer) {
  REQUIRE_GEN_MODEL(kModel);
  auto runner = OpenRunner(GenModelsDir() / kModel);
  ASSERT_TRUE(runner);
  ASSERT_EQ(runner->config().num_experts, 8);
  ASSERT_EQ(runner->config().experts_per_token, 2);
  std::vector<std::vector<int64_t>> load = runner->ExpertTokens();
  ASSERT_EQ(load.size(), 2u);  // two layers, nothing run yet
  EXPECT_EQ(LayerSums(load), (std::vector<int64_t>{0, 0}));
  // A prefill of 23 tokens and a second sequence's 9, then a decode step of both.
  const std::vector<int32_t> a = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
                                  51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61};
  const std::vector<int32_t> b = {1, 7, 8, 9, 10, 11, 12, 13, 14};
  const std::vector<int32_t> ta = {0, 1}, tb = {2};
  SequenceChunk chunks[2] = {{1, a, 0, ta, true}, {2, b, 0, tb, true}};
  Tensor logits;
  ASSERT_TRUE(runner->Step(chunks, &logits).ok());
  EXPECT_EQ(LayerSums(runner->ExpertTokens()), (std::vector<int64_t>{64, 64}));  // 32 tokens x 2
  const std::vector<int32_t> na = {77}, nb = {78};
  SequenceChunk decode[2] = {{1, na, 23, ta, true}, {2, nb, 9, tb, true}};
  ASSERT_TRUE(runner->Step(decode, &logits).ok());
  load = runner->ExpertTokens();
  EXPECT_EQ(LayerSums(load), (std::vector<int64_t>{68, 68}));
  int used = 0;
  for (int64_t n : load[0]) used += n > 0;
  EXPECT_GT(used, 2) << "34 tokens all routed to the same two experts: the router looks broken";
}

TEST(MoeRunner, ADenseModelHasNoExpertLoad) {
  REQUIRE_GEN_MODEL("test-llama");
  auto runner = OpenRunner(GenModelsDir() / "test-llama");
  ASSERT_TRUE(runner);
  EXPECT_EQ(runner->config().num_experts, 0);
  EXPECT_TRUE(runner->ExpertTokens().empty());
}

// The engine reports the runner's load in its stats (what /metrics renders).
TEST(MoeRunner, EngineStatsCarryTheExpertLoad) {
  REQUIRE_GEN_MODEL(kModel);
  const fs::path dir = GenModelsDir() / kModel;
  auto tok = Tokenizer::Load(dir / "tokenizer.model");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto engine = GenerationEngine::Create(OpenRunner(dir), std::move(tok).value(), {},
                                         &RealClock::Get());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  Mutex mu;
  CondVar cv;
  bool done = false;
  SamplingParams p;
  p.max_tokens = 5;
  p.temperature = 0;
  p.ignore_eos = true;
  ASSERT_TRUE((*engine)
                  ->Submit({"r", {1, 5, 6, 7}, p},
                           [&](const GenerationEvent& e) {
                             if (!e.finished) return;
                             MutexLock l(&mu);
                             done = true;
                             cv.NotifyAll();
                           })
                  .ok());
  {
    MutexLock l(&mu);
    while (!done) cv.Wait(&mu);
  }
  // 4 prompt tokens, then 4 decode steps (the 5th token needs no step): 8 tokens x top-2.
  EXPECT_EQ(LayerSums((*engine)->Stats().expert_tokens), (std::vector<int64_t>{16, 16}));
}

// A copy of test-moe with config.json edited (`from` replaced by `to`) and/or the graph's MoE
// nodes changed by `edit`.
fs::path EditedCopy(const std::string& name, const std::string& from, const std::string& to,
                    void (*edit)(Model&) = nullptr) {
  const fs::path src = GenModelsDir() / kModel;
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::create_directories(dir);
  std::ifstream in(src / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  if (!from.empty()) {
    const size_t at = config.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) config.replace(at, from.size(), to);
  }
  std::ofstream(dir / "config.json") << config;
  auto model = LoadOnnxModel(src / "model.onnx");
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (model.ok() && edit) edit(*model);
  if (model.ok()) {
    EXPECT_TRUE(SaveOnnxModel(*model, dir / "model.onnx").ok());
  }
  return dir;
}

void ExpectLoadFails(const fs::path& dir, const std::string& reason) {
  auto r = CreateDecoderRunner(dir, RunnerOptions{});
  ASSERT_FALSE(r.ok()) << "expected: " << reason;
  EXPECT_NE(r.status().message().find(reason), std::string::npos) << r.status().ToString();
}

TEST(MoeRunner, BadMixtureOfExpertsModelsFailTheLoadWithTheReason) {
  REQUIRE_GEN_MODEL(kModel);
  ExpectLoadFails(EditedCopy("moe_topk_config", "\"num_experts_per_tok\": 2",
                             "\"num_experts_per_tok\": 9"),
                  "num_experts_per_tok 9 outside 1..num_local_experts (8)");
  ExpectLoadFails(EditedCopy("moe_no_experts", "\"num_local_experts\": 8", "\"num_local_exp\": 8"),
                  "has 2 ai.inferd.MoE layers but config.json has no num_local_experts");
  ExpectLoadFails(EditedCopy("moe_experts_differ", "\"num_local_experts\": 8",
                             "\"num_local_experts\": 4"),
                  "MoE layer 0 has 8 experts, config.json's num_local_experts is 4");
  ExpectLoadFails(EditedCopy("moe_topk_graph", "", "",
                             [](Model& m) {
                               for (auto& n : m.graph.nodes) {
                                 if (n->op_type == "MoE") n->attributes["top_k"].i = 9;
                               }
                             }),
                  "top_k 9 outside 1..8");
  ExpectLoadFails(EditedCopy("moe_down_shape", "", "",
                             [](Model& m) {
                               for (auto& n : m.graph.nodes) {
                                 if (n->op_type != "MoE") continue;
                                 Tensor& down = m.graph.initializers[n->inputs[4]];
                                 down = Tensor::Allocate(DataType::kFloat32,
                                                         {down.dim(0), down.dim(1) + 1, down.dim(2)});
                                 break;
                               }
                             }),
                  "down must be float32 [8, 88, 128]");
}

}  // namespace
}  // namespace inferd::gen
