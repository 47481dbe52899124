// GenerationEngine with speculative decoding over fake runners (test_util.h): a fake draft that
// agrees with the target most of the time, and prompt lookup. Greedy output must be the
// non-speculative reference token for token, also batched and under preemption; rejected drafts
// must leave no blocks and no stale KV behind (FakeRunner checks every slot it reads).
#include <gtest/gtest.h>

#include "common/mutex.h"
#include "generation/engine.h"
#include "generation/test_util.h"
#include "testing/fake_clock.h"

namespace inferd::gen {
namespace speculative_engine_test {
namespace {

using testing::FakeConfig;
using testing::FakeRunner;
using testing::ReferenceGreedy;

constexpr int kVocab = 400;
using Result = testing::Collector;

std::vector<int32_t> Prompt(int n, int32_t seed) {
  return testing::RandomPrompt(n, seed, kVocab);
}
SamplingParams Greedy(int max_tokens) { return testing::GreedyParams(max_tokens); }

struct SpecSetup {
  EngineOptions options;
  int num_blocks = 512, block_size = 4, max_context = 160;
  int disagree = 3;  // the fake draft differs from the target on ~1/3 of its contexts
};

class SpeculativeEngineTest : public ::testing::Test {
 protected:
  std::unique_ptr<GenerationEngine> Make(SpecSetup s) {
    auto runner = std::make_unique<FakeRunner>(FakeConfig(kVocab, s.max_context), s.block_size,
                                               s.num_blocks);
    runner_ = runner.get();
    std::unique_ptr<FakeRunner> draft;
    if (s.options.speculative.method == DraftMethod::kModel) {
      draft = std::make_unique<FakeRunner>(FakeConfig(kVocab, s.max_context), s.block_size,
                                           s.num_blocks, s.disagree);
      draft_ = draft.get();
    }
    auto tok = Tokenizer::Load(testing::TestTokenizerPath());
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    auto engine = GenerationEngine::Create(std::move(runner), std::move(tok).value(), s.options,
                                           &clock_, std::move(draft));
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    return std::move(engine).value();
  }
  static SpecSetup WithDraft(int k = 4) {
    SpecSetup s;
    s.options.speculative.method = DraftMethod::kModel;
    s.options.speculative.num_speculative_tokens = k;
    return s;
  }
  // Steps whose chunks include a verification (all_logits).
  int VerifySteps() const {
    int n = 0;
    for (const auto& step : runner_->steps) {
      for (const auto& c : step.chunks) {
        if (c.all_logits) {
          ++n;
          break;
        }
      }
    }
    return n;
  }

  FakeClock clock_;
  FakeRunner* runner_ = nullptr;  // owned by the engine
  FakeRunner* draft_ = nullptr;
};

TEST_F(SpeculativeEngineTest, GreedyWithADraftModelEqualsTheReference) {
  for (int k : {1, 3, 8}) {
    auto engine = Make(WithDraft(k));
    Result r;
    const std::vector<int32_t> prompt = Prompt(13, k);
    ASSERT_TRUE(engine->Submit({"a", prompt, Greedy(40)}, r.Callback()).ok());
    EXPECT_EQ(r.Tokens(), ReferenceGreedy(prompt, 40, kVocab)) << "k " << k;
    EXPECT_EQ(r.Final().completion_tokens, 40);
    EXPECT_EQ(r.Final().finish_reason, "length");
    const EngineStats s = engine->Stats();
    EXPECT_GT(s.draft_tokens, 0);
    EXPECT_GT(s.accepted_tokens, 0) << "a mostly agreeing draft had nothing kept";
    EXPECT_LT(s.accepted_tokens, s.draft_tokens) << "the fake draft disagrees sometimes";
    EXPECT_EQ(s.generated_tokens, 40);
    EXPECT_EQ(s.kv_blocks_used, 0) << "blocks left after the request";
    EXPECT_TRUE(runner_->error.empty()) << runner_->error;
    EXPECT_TRUE(draft_->error.empty()) << draft_->error;
    // Fewer target steps than tokens: speculation paid off.
    EXPECT_LT(static_cast<int>(runner_->steps.size()), 40);
    EXPECT_GT(VerifySteps(), 0);
  }
}

TEST_F(SpeculativeEngineTest, ConcurrentGreedyRequestsAndPreemptionStayExact) {
  SpecSetup s = WithDraft(4);
  s.options.speculative.max_batch = 8;
  s.num_blocks = 40;  // 160 tokens for 6 requests of up to 60: preemption
  s.options.enable_prefix_caching = false;
  auto engine = Make(s);
  std::vector<Result> r(6);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(Prompt(5 + 3 * i, 100 + i));
    ASSERT_TRUE(
        engine->Submit({"r" + std::to_string(i), prompts[i], Greedy(36)}, r[i].Callback()).ok());
  }
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(r[i].Tokens(), ReferenceGreedy(prompts[i], 36, kVocab)) << "request " << i;
  }
  const EngineStats st = engine->Stats();
  EXPECT_GT(st.preemptions, 0) << "the pool was meant to run short";
  EXPECT_GT(st.accepted_tokens, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_TRUE(runner_->error.empty()) << runner_->error;
  EXPECT_TRUE(draft_->error.empty()) << draft_->error;
}

TEST_F(SpeculativeEngineTest, LargeBatchesSwitchSpeculationOff) {
  SpecSetup s = WithDraft(4);
  s.options.speculative.max_batch = 2;
  auto engine = Make(s);
  std::vector<Result> r(6);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(Prompt(7, 200 + i));
    ASSERT_TRUE(
        engine->Submit({"r" + std::to_string(i), prompts[i], Greedy(20 + 2 * i)}, r[i].Callback())
            .ok());
  }
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(r[i].Tokens(), ReferenceGreedy(prompts[i], 20 + 2 * i, kVocab)) << i;
  }
  for (const auto& step : runner_->steps) {
    int decodes = 0, verifies = 0;
    for (const auto& c : step.chunks) {
      decodes += c.need_logits && (c.num_tokens == 1 || c.all_logits);
      verifies += c.all_logits;
    }
    if (verifies > 0) {
      EXPECT_LE(decodes, 2) << "speculated in a step of " << decodes;
    }
  }
  EXPECT_GT(VerifySteps(), 0) << "speculation resumes once the batch is small";
}

// max_batch counts every sequence the engine holds: a decode with requests still waiting (or
// prefilling) is not speculated, as the batch is about to grow; alone, it is.
TEST_F(SpeculativeEngineTest, NoSpeculationWhileOtherRequestsWait) {
  SpecSetup s = WithDraft(4);
  s.options.speculative.max_batch = 1;
  s.options.max_num_seqs = 1;  // the second request waits until the first is done
  auto engine = Make(s);
  Mutex mu;
  CondVar cv;
  bool submitted = false;
  // The first step (the first request's prefill) waits for the second request, so every decode
  // of the first one runs with the second waiting.
  runner_->on_step = [&](int call) {
    if (call == 0) {
      MutexLock l(&mu);
      while (!submitted) cv.Wait(&mu);
    }
    return Status::Ok();
  };
  Result a, b;
  const std::vector<int32_t> pa = Prompt(6, 300), pb = Prompt(6, 301);
  ASSERT_TRUE(engine->Submit({"a", pa, Greedy(24)}, a.Callback()).ok());
  ASSERT_TRUE(engine->Submit({"b", pb, Greedy(24)}, b.Callback()).ok());
  {
    MutexLock l(&mu);
    submitted = true;
    cv.NotifyAll();
  }
  EXPECT_EQ(a.Tokens(), ReferenceGreedy(pa, 24, kVocab));
  EXPECT_EQ(b.Tokens(), ReferenceGreedy(pb, 24, kVocab));
  ASSERT_FALSE(runner_->steps.empty());
  const int64_t first = runner_->steps[0].chunks[0].seq_id;
  int first_verifies = 0, second_verifies = 0;
  for (const auto& step : runner_->steps) {
    for (const auto& c : step.chunks) {
      if (c.all_logits) ++(c.seq_id == first ? first_verifies : second_verifies);
    }
  }
  EXPECT_EQ(first_verifies, 0) << "speculated while another request waited";
  EXPECT_GT(second_verifies, 0) << "the last request, alone, did not speculate";
  EXPECT_EQ(engine->Stats().kv_blocks_used, 0);
  EXPECT_TRUE(runner_->error.empty()) << runner_->error;
}

TEST_F(SpeculativeEngineTest, DraftsRespectTheTokenBudgetAndMaxTokens) {
  SpecSetup s = WithDraft(8);
  s.options.max_num_batched_tokens = 3;  // one decode + 2 drafts at most
  auto engine = Make(s);
  Result r;
  const std::vector<int32_t> prompt = Prompt(2, 5);
  ASSERT_TRUE(engine->Submit({"a", prompt, Greedy(11)}, r.Callback()).ok());
  EXPECT_EQ(r.Tokens(), ReferenceGreedy(prompt, 11, kVocab));
  EXPECT_EQ(r.Final().completion_tokens, 11);
  for (const auto& step : runner_->steps) {
    int tokens = 0;
    for (const auto& c : step.chunks) tokens += c.num_tokens;
    EXPECT_LE(tokens, 3);
  }
}

TEST_F(SpeculativeEngineTest, PromptLookupDraftsFromRepeatedText) {
  SpecSetup s;
  s.options.speculative.method = DraftMethod::kNgram;
  s.options.speculative.num_speculative_tokens = 4;
  auto engine = Make(s);
  runner_->window = 2;  // logits follow the last 2 tokens: repeated text repeats its continuation
  // The reference continuation of a prompt, repeated in the prompt: the lookup proposes it.
  const std::vector<int32_t> head = Prompt(6, 31);
  const std::vector<int32_t> cont = ReferenceGreedy(head, 30, kVocab, 2);
  std::vector<int32_t> prompt = head;
  prompt.insert(prompt.end(), cont.begin(), cont.end());
  prompt.insert(prompt.end(), head.begin(), head.end());
  Result r;
  ASSERT_TRUE(engine->Submit({"a", prompt, Greedy(24)}, r.Callback()).ok());
  EXPECT_EQ(r.Tokens(), ReferenceGreedy(prompt, 24, kVocab, 2));
  EXPECT_EQ(r.Tokens(), std::vector<int32_t>(cont.begin(), cont.begin() + 24));
  const EngineStats st = engine->Stats();
  EXPECT_GT(st.draft_tokens, 0);
  EXPECT_EQ(st.accepted_tokens, st.draft_tokens) << "the continuation is in the prompt";
  EXPECT_LT(static_cast<int>(runner_->steps.size()), 12) << "24 tokens in few steps";
  EXPECT_TRUE(runner_->error.empty()) << runner_->error;
}

TEST_F(SpeculativeEngineTest, PromptLookupFirstThenTheDraftModel) {
  SpecSetup s = WithDraft(4);
  s.options.speculative.prompt_lookup = true;
  auto engine = Make(s);
  runner_->window = 2;
  draft_->window = 2;
  const std::vector<int32_t> head = Prompt(6, 41);
  const std::vector<int32_t> cont = ReferenceGreedy(head, 12, kVocab, 2);
  std::vector<int32_t> prompt = head;  // the first 12 tokens are in the prompt, the rest not
  prompt.insert(prompt.end(), cont.begin(), cont.end());
  prompt.push_back(7);
  prompt.insert(prompt.end(), head.begin(), head.end());
  Result r;
  ASSERT_TRUE(engine->Submit({"a", prompt, Greedy(40)}, r.Callback()).ok());
  EXPECT_EQ(r.Tokens(), ReferenceGreedy(prompt, 40, kVocab, 2));
  EXPECT_GT(engine->Stats().accepted_tokens, 0);
  EXPECT_GT(draft_->steps.size(), 0u) << "the draft model ran where the lookup had nothing";
  EXPECT_TRUE(runner_->error.empty()) << runner_->error;
  EXPECT_TRUE(draft_->error.empty()) << draft_->error;
}

TEST_F(SpeculativeEngineTest, SamplingSpeculatesAndCompletes) {
  for (DraftMethod m : {DraftMethod::kModel, DraftMethod::kNgram}) {
    SpecSetup s = WithDraft(4);
    s.options.speculative.method = m;
    auto engine = Make(s);
    SamplingParams p;
    p.max_tokens = 30;
    p.temperature = 0.7f;
    p.top_k = 20;
    p.seed = 5;
    p.ignore_eos = true;
    p.logprobs = 2;
    p.frequency_penalty = 0.3f;
    Result r;
    ASSERT_TRUE(engine->Submit({"a", Prompt(9, 3), p}, r.Callback()).ok());
    EXPECT_EQ(r.Tokens().size(), 30u);
    EXPECT_EQ(r.Final().completion_tokens, 30);
    EXPECT_EQ(engine->Stats().kv_blocks_used, 0);
    EXPECT_TRUE(runner_->error.empty()) << runner_->error;
    if (m == DraftMethod::kModel) {
      EXPECT_GT(engine->Stats().draft_tokens, 0);
    }
  }
}

TEST(SpeculativeEngineCreateTest, RejectsBadDraftsAndOptions) {
  auto tok = [] { return Tokenizer::Load(testing::TestTokenizerPath()).value(); };
  auto runner = [](int vocab = kVocab, int blocks = 64) {
    return std::make_unique<FakeRunner>(FakeConfig(vocab, 128), 4, blocks);
  };
  FakeClock clock;
  auto create = [&](SpeculativeOptions so, std::unique_ptr<ModelRunner> draft) {
    EngineOptions o;
    o.speculative = so;
    return GenerationEngine::Create(runner(), tok(), o, &clock, std::move(draft)).status();
  };
  SpeculativeOptions model;
  model.method = DraftMethod::kModel;
  EXPECT_NE(create(model, nullptr).message().find("no draft"), std::string::npos);
  EXPECT_NE(create(model, runner(kVocab + 1)).message().find("vocab_size"), std::string::npos);
  EXPECT_NE(create(model, runner(kVocab, 32)).message().find("cannot mirror"), std::string::npos);
  SpeculativeOptions bad = model;
  bad.num_speculative_tokens = 17;
  EXPECT_NE(create(bad, runner()).message().find("num_speculative_tokens"), std::string::npos);
  EXPECT_FALSE(create({}, runner()).ok());  // a draft without speculation
  SpeculativeOptions ngram;
  ngram.method = DraftMethod::kNgram;
  EXPECT_TRUE(create(ngram, nullptr).ok());
  EXPECT_TRUE(create(model, runner()).ok());
}

}  // namespace
}  // namespace speculative_engine_test
}  // namespace inferd::gen
