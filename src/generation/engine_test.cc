#include "generation/engine.h"

#include <gtest/gtest.h>

#include <chrono>

#include "common/mutex.h"
#include "generation/test_util.h"
#include "testing/fake_clock.h"

namespace inferd::gen {
namespace engine_test {
namespace {

using namespace std::chrono_literals;
using testing::FakeConfig;
using testing::FakeRunner;
using testing::ReferenceGreedy;

constexpr int kVocab = 400;
using testing::Collector;

std::vector<int32_t> Prompt(int n, int32_t seed) {
  return testing::RandomPrompt(n, seed, kVocab);
}
SamplingParams Greedy(int max_tokens) { return testing::GreedyParams(max_tokens); }

struct EngineSetup {
  EngineOptions options;
  int num_blocks = 512, block_size = 4, max_context = 128, eos = -1;
  std::function<Status(int)> on_step;
};

class EngineTest : public ::testing::Test {
 protected:
  std::unique_ptr<GenerationEngine> Make(const EngineSetup& s) {
    auto runner = std::make_unique<FakeRunner>(FakeConfig(kVocab, s.max_context, s.eos),
                                               s.block_size, s.num_blocks);
    runner->on_step = s.on_step;
    runner_ = runner.get();
    auto tok = Tokenizer::Load(testing::TestTokenizerPath());
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    auto engine =
        GenerationEngine::Create(std::move(runner), std::move(tok).value(), s.options, &clock_);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    return std::move(engine).value();
  }

  FakeClock clock_;
  FakeRunner* runner_ = nullptr;  // owned by the engine
};

TEST_F(EngineTest, SixteenConcurrentRequestsGiveTheSameGreedyTokensAsOneAtATime) {
  EngineSetup setup;
  setup.options.max_num_batched_tokens = 64;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) prompts.push_back(Prompt(3 + (i * 7) % 40, i));

  auto concurrent = Make(setup);
  FakeRunner* concurrent_runner = runner_;
  std::vector<Collector> c(16);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(
        concurrent->Submit({"r" + std::to_string(i), prompts[i], Greedy(24)}, c[i].Callback())
            .ok());
  }
  std::vector<std::vector<int32_t>> together;
  for (int i = 0; i < 16; ++i) together.push_back(c[i].Tokens());
  size_t widest = 0;
  for (const auto& step : concurrent_runner->steps) widest = std::max(widest, step.chunks.size());
  EXPECT_GT(widest, 8u) << "requests were not batched";
  EXPECT_TRUE(concurrent_runner->error.empty()) << concurrent_runner->error;

  auto serial = Make(setup);
  for (int i = 0; i < 16; ++i) {
    Collector one;
    ASSERT_TRUE(
        serial->Submit({"s" + std::to_string(i), prompts[i], Greedy(24)}, one.Callback()).ok());
    EXPECT_EQ(one.Tokens(), together[i]) << "request " << i;
    EXPECT_EQ(together[i], ReferenceGreedy(prompts[i], 24, kVocab)) << "request " << i;
    EXPECT_EQ(one.Final().finish_reason, "length");
    EXPECT_EQ(one.Final().completion_tokens, 24);
  }
}

TEST_F(EngineTest, SeededSamplingDoesNotDependOnTheBatch) {
  auto engine = Make({});
  SamplingParams p;
  p.max_tokens = 20;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.seed = 1234;
  p.ignore_eos = true;
  Collector alone;
  ASSERT_TRUE(engine->Submit({"alone", Prompt(9, 1), p}, alone.Callback()).ok());
  const std::vector<int32_t> expected = alone.Tokens();

  std::vector<Collector> others(15);
  Collector again;
  for (int i = 0; i < 15; ++i) {
    SamplingParams q = p;
    q.seed = i % 2 ? std::optional<uint64_t>(i) : std::nullopt;
    q.top_k = i;
    ASSERT_TRUE(
        engine->Submit({"o" + std::to_string(i), Prompt(5 + i, 100 + i), q}, others[i].Callback())
            .ok());
    if (i == 7) {
      ASSERT_TRUE(engine->Submit({"again", Prompt(9, 1), p}, again.Callback()).ok());
    }
  }
  EXPECT_EQ(again.Tokens(), expected);
  for (Collector& o : others) o.Wait();
  p.seed = 99;
  Collector other_seed;
  ASSERT_TRUE(engine->Submit({"other", Prompt(9, 1), p}, other_seed.Callback()).ok());
  EXPECT_NE(other_seed.Tokens(), expected);
}

TEST_F(EngineTest, ASmallPoolPreemptsAndStillCompletesEveryRequest) {
  EngineSetup setup;
  setup.num_blocks = 16;  // 64 tokens; each request needs 40
  auto engine = Make(setup);
  std::vector<Collector> c(8);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(
        engine->Submit({std::to_string(i), Prompt(20, i), Greedy(20)}, c[i].Callback()).ok());
  }
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(c[i].Tokens(), ReferenceGreedy(Prompt(20, i), 20, kVocab)) << i;
    EXPECT_EQ(c[i].Final().finish_reason, "length");
  }
  const EngineStats stats = engine->Stats();
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_EQ(stats.kv_blocks_used, 0);
  EXPECT_EQ(stats.kv_blocks_total, 16);
  EXPECT_EQ(stats.running + stats.waiting, 0);
  EXPECT_EQ(stats.generated_tokens, 160);
  EXPECT_EQ(stats.prompt_tokens, 160);
  EXPECT_TRUE(runner_->error.empty()) << runner_->error;
}

TEST_F(EngineTest, RejectsBadRequestsWithClearMessages) {
  EngineSetup setup;
  setup.num_blocks = 20;  // 80 tokens of cache, context 128
  auto engine = Make(setup);
  struct Case {
    std::string name;
    GenerationRequest request;
    std::string message;
  };
  auto with = [](std::function<void(GenerationRequest&)> f) {
    GenerationRequest r{"x", Prompt(10, 1), Greedy(8)};
    f(r);
    return r;
  };
  const std::vector<Case> cases = {
      {"long prompt", with([](auto& r) { r.prompt = Prompt(129, 1); }),
       "prompt is 129 tokens, longer than the model's context of 128"},
      {"empty prompt", with([](auto& r) { r.prompt.clear(); }), "prompt must not be empty"},
      {"bad token", with([](auto& r) { r.prompt[2] = kVocab; }), "outside the vocabulary"},
      {"max_tokens 0", with([](auto& r) { r.params.max_tokens = 0; }), "max_tokens must be >= 1"},
      {"max_tokens < 0", with([](auto& r) { r.params.max_tokens = -3; }),
       "max_tokens must be >= 1, got -3"},
      {"max_tokens > context", with([](auto& r) { r.params.max_tokens = 129; }),
       "max_tokens 129 exceeds the model's context of 128"},
      {"prompt + max_tokens", with([](auto& r) { r.params.max_tokens = 120; }),
       "130 were requested (10 in the prompt, 120 in max_tokens)"},
      {"temperature", with([](auto& r) { r.params.temperature = -0.5f; }),
       "temperature must be >= 0"},
      {"top_p 0", with([](auto& r) { r.params.top_p = 0; }), "top_p must be in (0, 1]"},
      {"top_p > 1", with([](auto& r) { r.params.top_p = 1.5f; }), "top_p must be in (0, 1]"},
      {"top_k", with([](auto& r) { r.params.top_k = -1; }), "top_k must be >= 0"},
      {"penalty", with([](auto& r) { r.params.presence_penalty = 3; }), "in [-2, 2]"},
      {"logprobs", with([](auto& r) { r.params.logprobs = -2; }), "logprobs must be -1"},
      {"empty stop", with([](auto& r) {
         r.params.stop = {"a", ""};
       }),
       "stop strings must not"},
      {"empty id", with([](auto& r) { r.id.clear(); }), "request id must not be empty"},
      {"cache too small", with([](auto& r) { r.params.max_tokens = 100; }),
       "needs 28 KV cache blocks"},
  };
  for (const Case& c : cases) {
    Status s = engine->Submit(c.request, [](const GenerationEvent&) { FAIL(); });
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.name << ": " << s.message();
  }
  // Nothing else disturbed: a good request still runs.
  Collector ok;
  ASSERT_TRUE(engine->Submit({"good", Prompt(10, 1), Greedy(8)}, ok.Callback()).ok());
  EXPECT_EQ(ok.Tokens(), ReferenceGreedy(Prompt(10, 1), 8, kVocab));
}

TEST_F(EngineTest, DuplicateIdIsRejectedWhileActive) {
  // The step hook blocks the first step until the duplicate was tried.
  Mutex mu;
  bool tried = false;
  CondVar cv;
  EngineSetup setup;
  setup.on_step = [&](int) {
    MutexLock l(&mu);
    while (!tried) cv.Wait(&mu);
    return Status::Ok();
  };
  auto engine = Make(setup);
  Collector first;
  ASSERT_TRUE(engine->Submit({"same", Prompt(4, 1), Greedy(2)}, first.Callback()).ok());
  Status dup = engine->Submit({"same", Prompt(4, 2), Greedy(2)}, [](const GenerationEvent&) {});
  EXPECT_EQ(dup.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.message().find("'same' is already running"), std::string::npos) << dup.message();
  {
    MutexLock l(&mu);
    tried = true;
    cv.NotifyAll();
  }
  first.Wait();
  Collector second;
  EXPECT_TRUE(engine->Submit({"same", Prompt(4, 2), Greedy(2)}, second.Callback()).ok());
  EXPECT_EQ(second.Final().finish_reason, "length");
}

TEST_F(EngineTest, CancelFreesBlocksWithinOneStep) {
  auto engine = Make({});
  Collector c;
  GenerationEngine* e = engine.get();
  auto cb = c.Callback();
  ASSERT_TRUE(e->Submit({"c", Prompt(30, 3), Greedy(50)}, [&, cb](const GenerationEvent& ev) {
                 if (!ev.finished) e->Cancel("c");  // the client goes away after one token
                 cb(ev);
               }).ok());
  const std::vector<GenerationEvent> events = c.Wait();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].finish_reason, "cancelled");
  EXPECT_EQ(events[1].completion_tokens, 1);
  EXPECT_EQ(runner_->steps.size(), 1u);  // no step ran after the cancellation
  EXPECT_EQ(engine->Stats().kv_blocks_used, 0);
  engine->Cancel("c");  // already gone: no-op
  engine->Cancel("unknown");
}

TEST_F(EngineTest, StopsOnEosUnlessIgnored) {
  // Pick a prompt whose 4th greedy token does not occur before, and make it the EOS.
  std::vector<int32_t> prompt, ref;
  for (int seed = 0;; ++seed) {
    prompt = Prompt(6, seed);
    ref = ReferenceGreedy(prompt, 8, kVocab);
    if (std::find(ref.begin(), ref.begin() + 3, ref[3]) == ref.begin() + 3) break;
  }
  EngineSetup setup;
  setup.eos = ref[3];
  auto engine = Make(setup);
  SamplingParams p = Greedy(8);
  p.ignore_eos = false;
  Collector stop;
  ASSERT_TRUE(engine->Submit({"eos", prompt, p}, stop.Callback()).ok());
  EXPECT_EQ(stop.Tokens(), std::vector<int32_t>(ref.begin(), ref.begin() + 3));
  EXPECT_EQ(stop.Final().finish_reason, "stop");
  EXPECT_EQ(stop.Final().completion_tokens, 4);  // the EOS counts, is not delivered
  p.ignore_eos = true;
  Collector ignore;
  ASSERT_TRUE(engine->Submit({"ignore", prompt, p}, ignore.Callback()).ok());
  EXPECT_EQ(ignore.Tokens(), ref);
  EXPECT_EQ(ignore.Final().finish_reason, "length");
}

TEST_F(EngineTest, StopStringCutsTheTextAndEndsTheRequest) {
  auto engine = Make({});
  const std::vector<int32_t> prompt = engine->tokenizer().Encode("Elizabeth said to Darcy");
  Collector full;
  ASSERT_TRUE(engine->Submit({"full", prompt, Greedy(30)}, full.Callback()).ok());
  const std::string text = full.Text();
  ASSERT_GE(text.size(), 8u) << text;
  const std::string stop = text.substr(text.size() / 2, 3);
  const size_t at = text.find(stop);

  SamplingParams p = Greedy(30);
  p.stop = {stop};
  Collector cut;
  ASSERT_TRUE(engine->Submit({"cut", prompt, p}, cut.Callback()).ok());
  EXPECT_EQ(cut.Text(), text.substr(0, at));
  EXPECT_EQ(cut.Final().finish_reason, "stop");
  EXPECT_LT(cut.Final().completion_tokens, 30);
  // Streamed text never shows a part of the stop string that is then cut.
  std::string streamed;
  for (const GenerationEvent& e : cut.Wait()) {
    streamed += e.text;
    EXPECT_EQ(text.compare(0, streamed.size(), streamed), 0);
    EXPECT_LE(streamed.size(), at);
  }
}

TEST_F(EngineTest, LatencyHistogramsFollowTheInjectedClock) {
  EngineSetup setup;
  setup.on_step = [this](int) {
    clock_.Advance(10ms);  // every step takes 10 ms of fake time
    return Status::Ok();
  };
  auto engine = Make(setup);
  Collector c;
  ASSERT_TRUE(engine->Submit({"t", Prompt(5, 1), Greedy(4)}, c.Callback()).ok());
  c.Wait();
  const HistogramSnapshot ttft = engine->ttft_seconds().Snapshot();
  const HistogramSnapshot itl = engine->itl_seconds().Snapshot();
  const HistogramSnapshot tpot = engine->tpot_seconds().Snapshot();
  const HistogramSnapshot e2e = engine->e2e_seconds().Snapshot();
  EXPECT_EQ(ttft.count, 1u);
  EXPECT_NEAR(ttft.sum, 0.010, 1e-9);
  EXPECT_EQ(itl.count, 3u);
  EXPECT_NEAR(itl.sum, 0.030, 1e-9);
  EXPECT_EQ(tpot.count, 1u);
  EXPECT_NEAR(tpot.sum, 0.010, 1e-9);
  EXPECT_EQ(e2e.count, 1u);
  EXPECT_NEAR(e2e.sum, 0.040, 1e-9);
}

TEST_F(EngineTest, ARunnerErrorFailsThatStepsRequestsOnly) {
  EngineSetup setup;
  setup.on_step = [](int step) { return step == 1 ? Internal("kernel exploded") : Status::Ok(); };
  auto engine = Make(setup);
  Collector failed;
  ASSERT_TRUE(engine->Submit({"f", Prompt(5, 1), Greedy(4)}, failed.Callback()).ok());
  const GenerationEvent last = failed.Final();
  EXPECT_EQ(last.finish_reason, "error");
  EXPECT_EQ(last.error.code(), StatusCode::kInternal);
  EXPECT_NE(last.error.message().find("kernel exploded"), std::string::npos);
  EXPECT_EQ(engine->Stats().kv_blocks_used, 0);
  Collector next;
  ASSERT_TRUE(engine->Submit({"n", Prompt(5, 1), Greedy(4)}, next.Callback()).ok());
  EXPECT_EQ(next.Tokens(), ReferenceGreedy(Prompt(5, 1), 4, kVocab));
}

TEST_F(EngineTest, PrefixCacheHitsShowInEventsAndStats) {
  auto engine = Make({});
  const std::vector<int32_t> prompt = Prompt(40, 5);
  Collector first, second;
  ASSERT_TRUE(engine->Submit({"a", prompt, Greedy(3)}, first.Callback()).ok());
  EXPECT_EQ(first.Final().cached_prompt_tokens, 0);
  ASSERT_TRUE(engine->Submit({"b", prompt, Greedy(3)}, second.Callback()).ok());
  EXPECT_EQ(second.Final().cached_prompt_tokens, 36);  // 9 full blocks; the last token computed
  EXPECT_EQ(second.Tokens(), first.Tokens());
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.prefix_queries, 80);
  EXPECT_EQ(s.prefix_hits, 36);
  EXPECT_EQ(s.prompt_tokens, 80);
  EXPECT_EQ(second.Final().prompt_tokens, 40);
}

TEST_F(EngineTest, LogprobsWhenRequested) {
  auto engine = Make({});
  SamplingParams p = Greedy(5);
  p.logprobs = 3;
  Collector c;
  ASSERT_TRUE(engine->Submit({"lp", Prompt(5, 2), p}, c.Callback()).ok());
  for (const GenerationEvent& e : c.Wait()) {
    ASSERT_EQ(e.logprobs.size(), e.tokens.size());
    for (const TokenLogprob& lp : e.logprobs) {
      ASSERT_EQ(lp.top.size(), 3u);
      EXPECT_EQ(lp.top[0].first, lp.token);  // greedy: the chosen token is the most likely
      EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
      EXPECT_LT(lp.logprob, 0);
      EXPECT_GE(lp.top[0].second, lp.top[1].second);
    }
  }
}

TEST_F(EngineTest, DestructionFinishesEveryRequest) {
  std::vector<Collector> c(4);
  {
    auto engine = Make({});
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(
          engine->Submit({std::to_string(i), Prompt(8, i), Greedy(100)}, c[i].Callback()).ok());
    }
  }
  for (Collector& one : c) {
    const std::vector<GenerationEvent> events = one.Wait();
    int finals = 0;
    for (const GenerationEvent& e : events) finals += e.finished;
    EXPECT_EQ(finals, 1);
    EXPECT_TRUE(events.back().finish_reason == "cancelled" ||
                events.back().finish_reason == "length");
  }
}

TEST(EngineCreateTest, RejectsBadOptions) {
  FakeClock clock;
  auto make = [&](EngineOptions o, int model_vocab) {
    auto tok = Tokenizer::Load(testing::TestTokenizerPath());
    return GenerationEngine::Create(
        std::make_unique<FakeRunner>(FakeConfig(model_vocab, 64), 4, 16), std::move(tok).value(), o,
        &clock);
  };
  EngineOptions o;
  o.max_num_seqs = 0;
  auto e = make(o, kVocab);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("max_num_seqs must be >= 1"), std::string::npos);
  o = {};
  o.max_num_batched_tokens = 0;
  EXPECT_FALSE(make(o, kVocab).ok());
  e = make({}, 100);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("more than the model's vocab_size 100"), std::string::npos);
  EXPECT_FALSE(GenerationEngine::Create(nullptr, nullptr, {}, &clock).ok());
  EXPECT_TRUE(make({}, kVocab).ok());
}

}  // namespace
}  // namespace engine_test
}  // namespace inferd::gen
