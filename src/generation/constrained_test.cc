// Constrained output in generation: the sampler's token mask, the tokenizer's token bytes, masks
// over the real tiny-llama tokenizer, and guided_regex through the engine with continuous batching.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "common/mutex.h"
#include "constrained/json_schema.h"
#include "constrained/token_index.h"
#include "generation/engine.h"
#include "generation/sampler.h"
#include "generation/test_util.h"
#include "generation/tokenizer.h"
#include "testing/fake_clock.h"

namespace inferd::gen {
namespace {

namespace fs = std::filesystem;
using constrained::Dfa;
using constrained::TokenIndex;

std::vector<uint64_t> MaskOf(int vocab, const std::vector<int32_t>& allowed) {
  std::vector<uint64_t> m((vocab + 63) / 64, 0);
  for (int32_t t : allowed) m[t / 64] |= uint64_t{1} << (t % 64);
  return m;
}

TEST(SamplerMaskTest, OnlyAllowedTokensAreEverChosen) {
  const int vocab = 300;
  const std::vector<int32_t> allowed = {3, 64, 65, 200, 299};
  const std::vector<uint64_t> mask = MaskOf(vocab, allowed);
  for (float temperature : {0.0f, 0.7f, 1.5f}) {
    for (auto [top_k, top_p] :
         {std::pair{0, 1.0f}, std::pair{2, 1.0f}, std::pair{0, 0.5f}, std::pair{50, 0.9f}}) {
      SamplerOptions o;
      o.temperature = temperature;
      o.top_k = top_k;
      o.top_p = top_p;
      o.presence_penalty = 0.5f;
      Sampler s(o, 42);
      for (int i = 0; i < 300; ++i) {
        std::vector<float> logits = testing::FakeLogits(std::vector<int32_t>{i}, vocab);
        const int32_t t = s.Sample(logits, mask).token;
        EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), t) != allowed.end())
            << t << " at temperature " << temperature << " top_k " << top_k;
      }
    }
  }
}

TEST(SamplerMaskTest, GreedyTakesTheBestAllowedTokenAndLogprobsStayRaw) {
  std::vector<float> logits(130, 0.0f);
  logits[7] = 5;    // the best, but masked
  logits[100] = 2;  // the best allowed
  logits[128] = 1;
  SamplerOptions o;
  o.temperature = 0;
  o.logprobs = 1;
  Sampler s(o, 1);
  const SampleResult r = s.Sample(logits, MaskOf(130, {100, 128, 3}));
  EXPECT_EQ(r.token, 100);
  ASSERT_EQ(r.top.size(), 1u);
  EXPECT_EQ(r.top[0].first, 7);  // logprobs describe the model, not the mask
}

TEST(TokenizerBytesTest, TokenBytesConcatenateToTheText) {
  auto tok = Tokenizer::Load(testing::TestTokenizerPath());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  for (const std::string text :
       {"Hello world, said she.", "{\"a\": [1, 2.5]}", "caf\xc3\xa9 \xe2\x82\xac"}) {
    std::string bytes;
    for (int32_t id : (*tok)->Encode(text)) {
      auto b = (*tok)->TokenBytes(id);
      ASSERT_TRUE(b.has_value()) << id;
      bytes += *b;
    }
    EXPECT_EQ(bytes, " " + text);  // the dummy prefix: a space before the first word
  }
  EXPECT_FALSE((*tok)->TokenBytes((*tok)->eos_id()).has_value());
  EXPECT_FALSE((*tok)->TokenBytes(-1).has_value());
  EXPECT_FALSE((*tok)->TokenBytes((*tok)->vocab_size()).has_value());
}

fs::path ModelTokenizer(const std::string& model) {
  const char* env = std::getenv("INFERD_GEN_MODELS_DIR");
  const fs::path dir =
      env != nullptr ? fs::path(env) : fs::path(INFERD_BINARY_DIR) / "models" / "gen";
  return dir / model / "tokenizer.model";
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

constexpr const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "mood": {"enum": ["happy", "sad", "proud"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
    "married": {"type": "boolean"}
  },
  "required": ["name", "age", "mood"]
})";

// With the generation models' real sentencepiece vocabularies (tiny-llama: the trained model's
// 2,048 pieces; llama-110m: 32,000; both with byte fallback): every state's mask equals walking
// each token through the DFA, and random walks that follow the masks end in JSON that parses and
// has the required fields. Prints what the masks cost (docs/generation.md quotes it).
class ConstrainedRealTokenizerTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Models, ConstrainedRealTokenizerTest,
                         ::testing::Values("tiny-llama", "llama-110m"));

TEST_P(ConstrainedRealTokenizerTest, MasksMatchBruteForceAndWalksGiveValidJson) {
  const fs::path path = ModelTokenizer(GetParam());
  if (!fs::exists(path)) GTEST_SKIP() << path << " not built (make gen-models)";
  auto tok = Tokenizer::Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto vocab = ConstraintVocabulary(**tok, (*tok)->vocab_size(), (*tok)->eos_id());
  auto regex = constrained::JsonSchemaTextToRegex(kPersonSchema);
  ASSERT_TRUE(regex.ok()) << regex.status().ToString();
  constrained::TokenIndexOptions options;
  options.precompute = true;
  auto start = std::chrono::steady_clock::now();
  auto lazy = TokenIndex::Create(*regex, vocab);  // the DFA and the start state's mask only
  const double lazy_ms = MillisSince(start);
  start = std::chrono::steady_clock::now();
  auto index = TokenIndex::Create(*regex, vocab, options);
  const double ms = MillisSince(start);
  ASSERT_TRUE(lazy.ok() && index.ok()) << index.status().ToString();
  const TokenIndex& ix = **index;
  std::printf(
      "%s schema: %d DFA states, %d byte classes; over %d tokens: DFA + first mask "
      "%.1f ms, all masks %.1f ms\n",
      GetParam().c_str(), ix.dfa().num_states(), ix.dfa().num_classes(), vocab->size(), lazy_ms,
      ms);
  start = std::chrono::steady_clock::now();
  auto object = TokenIndex::Create(constrained::JsonObjectRegex(), vocab, options);
  ASSERT_TRUE(object.ok());
  std::printf("%s json_object: %d DFA states; all masks %.1f ms\n", GetParam().c_str(),
              (*object)->dfa().num_states(), MillisSince(start));
  for (int32_t s = 0; s < ix.dfa().num_states(); ++s) {
    auto mask = ix.Allowed(s);
    for (int32_t t = 0; t < vocab->size(); ++t) {
      const bool expect =
          t == vocab->eos_id()
              ? ix.accepting(s)
              : !vocab->bytes(t).empty() && ix.dfa().Walk(s, vocab->bytes(t)) != Dfa::kDead;
      ASSERT_EQ(((mask[t / 64] >> (t % 64)) & 1) != 0, expect) << "state " << s << " token " << t;
    }
  }
  std::mt19937 rng(11);
  for (int walk = 0; walk < 200; ++walk) {
    int32_t state = ix.start();
    std::vector<int32_t> ids;
    while (true) {
      std::vector<int32_t> allowed;
      auto mask = ix.Allowed(state);
      for (int32_t t = 0; t < vocab->size(); ++t) {
        if ((mask[t / 64] >> (t % 64)) & 1) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty());
      // Prefer EOS when it is allowed (half the time), so walks end.
      const bool eos_ok = ix.accepting(state);
      const int32_t t = eos_ok && rng() % 2 ? vocab->eos_id() : allowed[rng() % allowed.size()];
      if (t == vocab->eos_id()) break;
      ids.push_back(t);
      state = ix.Next(state, t);
      ASSERT_NE(state, Dfa::kDead);
    }
    // Decoded as the engine's IncrementalDecoder does mid-text (after a prompt).
    const std::vector<int32_t> prompt = (*tok)->Encode("Answer:");
    IncrementalDecoder decoder(**tok, prompt);
    std::string text;
    for (int32_t id : ids) text += decoder.Add(id);
    text += decoder.Flush();
    rapidjson::Document doc;
    doc.Parse(text.c_str(), text.size());
    ASSERT_FALSE(doc.HasParseError()) << text;
    ASSERT_TRUE(doc.IsObject()) << text;
    EXPECT_TRUE(doc.HasMember("name") && doc["name"].IsString()) << text;
    EXPECT_TRUE(doc.HasMember("age") && doc["age"].IsInt64()) << text;
    EXPECT_TRUE(doc.HasMember("mood") && doc["mood"].IsString()) << text;
  }
}

// ---- guided_regex through the engine (fake runner: deterministic random logits) ----

constexpr int kVocab = 400;
using testing::Collector;

class ConstrainedEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto runner = std::make_unique<testing::FakeRunner>(testing::FakeConfig(kVocab, 256), 4, 1024);
    auto tok = Tokenizer::Load(testing::TestTokenizerPath());
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    auto engine = GenerationEngine::Create(std::move(runner), std::move(tok).value(), {}, &clock_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
  }

  GenerationRequest Request(const std::string& id, std::optional<std::string> regex,
                            float temperature, uint64_t seed) {
    GenerationRequest r;
    r.id = id;
    r.prompt = engine_->tokenizer().Encode("The answer is");
    r.params.max_tokens = 200;
    r.params.temperature = temperature;
    r.params.seed = seed;
    r.params.guided_regex = std::move(regex);
    return r;
  }

  FakeClock clock_;
  std::unique_ptr<GenerationEngine> engine_;
};

TEST_F(ConstrainedEngineTest, ConcurrentConstrainedAndFreeRequestsEachFollowTheirOwnPattern) {
  auto schema = constrained::JsonSchemaTextToRegex(R"({"type":"object","properties":{
      "id":{"type":"integer"},"ok":{"type":"boolean"},"w":{"type":"string","maxLength":5}},
      "required":["id","ok","w"]})");
  ASSERT_TRUE(schema.ok());
  const std::vector<std::optional<std::string>> patterns = {
      "(yes|no)", "[0-9]{3}-[a-z]{2}", *schema, std::nullopt, "\\{\"n\":(0|[1-9][0-9]?)\\}"};
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<int> pattern_of;
  for (int i = 0; i < 20; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    pattern_of.push_back(i % static_cast<int>(patterns.size()));
    const float temperature = i % 2 == 0 ? 0.0f : 1.0f;
    ASSERT_TRUE(engine_
                    ->Submit(Request("r" + std::to_string(i), patterns[pattern_of[i]], temperature,
                                     100 + i),
                             collectors.back()->Callback())
                    .ok());
  }
  for (int i = 0; i < 20; ++i) {
    const std::optional<std::string>& p = patterns[pattern_of[i]];
    const std::string text = collectors[i]->Text();
    const GenerationEvent last = collectors[i]->Final();
    if (!p) continue;  // unconstrained: random tokens
    EXPECT_EQ(last.finish_reason, "stop") << i << ": " << text;
    auto dfa = Dfa::FromRegex(*p);
    ASSERT_TRUE(dfa.ok());
    EXPECT_TRUE(dfa->Matches(text))
        << "request " << i << " pattern " << *p << " gave '" << text << "'";
  }
}

TEST_F(ConstrainedEngineTest, GreedyConstrainedOutputIsReproducible) {
  Collector a, b;
  ASSERT_TRUE(engine_->Submit(Request("a", "[a-z]{4,8}", 0, 1), a.Callback()).ok());
  ASSERT_TRUE(engine_->Submit(Request("b", "[a-z]{4,8}", 0, 2), b.Callback()).ok());
  EXPECT_EQ(a.Text(), b.Text());
  EXPECT_GE(a.Text().size(), 4u);
}

TEST_F(ConstrainedEngineTest, BadPatternsAreRejectedAtSubmit) {
  Collector c;
  for (const char* bad : {"(unclosed", "a{2,1}", "(?=look)", "[^\\s\\S]"}) {
    const Status s = engine_->Submit(Request("bad", bad, 0, 1), c.Callback());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("constrained output"), std::string::npos) << s.message();
  }
}

TEST_F(ConstrainedEngineTest, MaxTokensCanCutAMatchShort) {
  GenerationRequest r = Request("short", "[a-z]{30}", 0, 1);
  r.params.max_tokens = 2;
  Collector c;
  ASSERT_TRUE(engine_->Submit(std::move(r), c.Callback()).ok());
  EXPECT_EQ(c.Final().finish_reason, "length");
}

}  // namespace
}  // namespace inferd::gen
