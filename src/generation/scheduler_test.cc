#include "generation/scheduler.h"

#include <gtest/gtest.h>

#include <map>

#include "generation/test_util.h"

namespace inferd::gen {
namespace scheduler_test {
namespace {

using testing::FakeConfig;
using testing::FakeRunner;
using testing::ReferenceGreedy;

constexpr int kVocab = 97;

std::vector<int32_t> Prompt(int n, int32_t seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i)
    p.push_back(static_cast<int32_t>(testing::Mix64(seed * 1000 + i) % kVocab));
  return p;
}

// Runs a Scheduler against a FakeRunner with greedy sampling, as the engine does.
class Driver {
 public:
  Driver(SchedulerOptions options, int num_blocks, int block_size, int max_context = 512)
      : scheduler_(options, num_blocks, block_size),
        runner_(FakeConfig(kVocab, max_context), block_size, num_blocks) {}

  void Add(int64_t id, std::vector<int32_t> prompt, int max_tokens) {
    auto seq = std::make_unique<Sequence>();
    seq->id = id;
    seq->prompt_len = static_cast<int>(prompt.size());
    seq->tokens = std::move(prompt);
    prompts_[id] = seq->tokens;
    max_tokens_[id] = max_tokens;
    scheduler_.Add(std::move(seq));
  }

  ScheduleResult Step() {
    ScheduleResult plan = scheduler_.Schedule();
    if (plan.chunks.empty()) return plan;
    Tensor logits;
    Status s = runner_.Step(scheduler_.RunnerChunks(plan), &logits);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return plan;
    scheduler_.CompleteStep(plan);
    int64_t row = 0;
    std::vector<int64_t> done;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.need_logits) continue;
      const float* l = logits.data<float>() + row++ * kVocab;
      const int32_t token = static_cast<int32_t>(std::max_element(l, l + kVocab) - l);
      c.seq->tokens.push_back(token);
      outputs_[c.seq->id].push_back(token);
      if (static_cast<int>(outputs_[c.seq->id].size()) == max_tokens_[c.seq->id]) {
        done.push_back(c.seq->id);
      }
    }
    for (int64_t id : done) scheduler_.Remove(id);
    return plan;
  }

  // Steps until no work is left (at most `max_steps`); returns the number of steps.
  int RunAll(int max_steps = 10000) {
    int steps = 0;
    while (scheduler_.HasWork() && steps < max_steps) {
      Step();
      ++steps;
    }
    EXPECT_FALSE(scheduler_.HasWork());
    return steps;
  }

  void ExpectReferenceOutputs() {
    for (auto& [id, prompt] : prompts_) {
      EXPECT_EQ(outputs_[id], ReferenceGreedy(prompt, max_tokens_[id], kVocab)) << "seq " << id;
    }
  }

  Scheduler& scheduler() { return scheduler_; }
  FakeRunner& runner() { return runner_; }
  std::map<int64_t, std::vector<int32_t>>& outputs() { return outputs_; }

 private:
  Scheduler scheduler_;
  FakeRunner runner_;
  std::map<int64_t, std::vector<int32_t>> prompts_, outputs_;
  std::map<int64_t, int> max_tokens_;
};

SchedulerOptions Options(int max_seqs, int budget, bool prefix = true, bool chunked = true) {
  return {max_seqs, budget, prefix, chunked};
}

TEST(SchedulerTest, DecodesFirstThenChunkedPrefillWithinTheBudget) {
  Driver d(Options(8, 8), 64, 4);
  d.Add(1, Prompt(3, 1), 10);
  ScheduleResult r = d.Step();
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0].num_tokens, 3);
  EXPECT_TRUE(r.chunks[0].need_logits);

  d.Add(2, Prompt(20, 2), 5);
  // Each step: seq 1's decode token first, then 7 (then 7, then 6) prompt tokens of seq 2.
  for (int want : {7, 7, 6}) {
    r = d.Step();
    ASSERT_EQ(r.chunks.size(), 2u);
    EXPECT_EQ(r.chunks[0].seq->id, 1);
    EXPECT_EQ(r.chunks[0].num_tokens, 1);
    EXPECT_EQ(r.chunks[1].seq->id, 2);
    EXPECT_EQ(r.chunks[1].num_tokens, want);
    EXPECT_EQ(r.chunks[1].need_logits, want == 6);
    EXPECT_LE(r.num_tokens, 8);
  }
  r = d.Step();  // both decode
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[1].num_tokens, 1);
  d.RunAll();
  d.ExpectReferenceOutputs();
  EXPECT_TRUE(d.runner().error.empty()) << d.runner().error;
}

TEST(SchedulerTest, ALongPromptNeverStallsDecodes) {
  Driver d(Options(8, 16), 256, 4);
  for (int i = 0; i < 4; ++i) d.Add(i, Prompt(4, i), 40);
  d.Step();  // all four prefilled (16 tokens)
  d.Add(10, Prompt(300, 10), 2);
  for (int step = 0; step < 20; ++step) {
    ScheduleResult r = d.Step();
    EXPECT_LE(r.num_tokens, 16);
    int decodes = 0;
    for (const ScheduledChunk& c : r.chunks) decodes += c.seq->id < 10 && c.num_tokens == 1;
    EXPECT_EQ(decodes, 4) << "step " << step;
  }
  d.RunAll();
  d.ExpectReferenceOutputs();
}

TEST(SchedulerTest, RespectsMaxNumSeqs) {
  Driver d(Options(2, 64), 64, 4);
  for (int i = 0; i < 4; ++i) d.Add(i, Prompt(5, i), 3 + i);
  ScheduleResult r = d.Step();
  EXPECT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(d.scheduler().num_running(), 2);
  EXPECT_EQ(d.scheduler().num_waiting(), 2);
  int max_running = 0;
  while (d.scheduler().HasWork()) {
    d.Step();
    max_running = std::max(max_running, d.scheduler().num_running());
  }
  EXPECT_EQ(max_running, 2);
  d.ExpectReferenceOutputs();
}

TEST(SchedulerTest, WithoutChunkingAPromptRunsWholeAndAloneWhenOverBudget) {
  Driver d(Options(8, 8, true, /*chunked=*/false), 64, 4);
  d.Add(1, Prompt(20, 1), 3);
  ScheduleResult r = d.Step();
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0].num_tokens, 20);
  d.Add(2, Prompt(6, 2), 3);
  d.Add(3, Prompt(6, 3), 3);
  r = d.Step();  // seq 1 decodes; seq 2 fits (1 + 6 <= 8); seq 3 waits
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[1].num_tokens, 6);
  d.RunAll();
  d.ExpectReferenceOutputs();
}

TEST(SchedulerTest, PreemptionAndRecomputeCompleteEveryRequestWithTheSameOutput) {
  // 12 blocks of 4 = 48 tokens; 6 sequences of 10 + 14 tokens (6 blocks each) cannot all fit.
  Driver small(Options(16, 64), 12, 4);
  Driver large(Options(16, 64), 256, 4);
  for (int i = 0; i < 6; ++i) {
    small.Add(i, Prompt(10, i), 14);
    large.Add(i, Prompt(10, i), 14);
  }
  small.RunAll();
  large.RunAll();
  EXPECT_GT(small.scheduler().num_preemptions(), 0);
  EXPECT_EQ(large.scheduler().num_preemptions(), 0);
  small.ExpectReferenceOutputs();
  large.ExpectReferenceOutputs();
  EXPECT_EQ(small.outputs(), large.outputs());
  EXPECT_EQ(small.scheduler().blocks().NumUsed(), 0);
  EXPECT_TRUE(small.runner().error.empty()) << small.runner().error;
}

TEST(SchedulerTest, PreemptionWithoutPrefixCachingAndWithChunksStillCompletes) {
  Driver d(Options(16, 7, /*prefix=*/false), 10, 4);
  for (int i = 0; i < 8; ++i) d.Add(i, Prompt(9 + i % 3, i), 12 + i % 5);
  d.RunAll();
  EXPECT_GT(d.scheduler().num_preemptions(), 0);
  d.ExpectReferenceOutputs();
  EXPECT_EQ(d.scheduler().blocks().NumAvailable(), 10);
  EXPECT_TRUE(d.runner().error.empty()) << d.runner().error;
}

TEST(SchedulerTest, PrefixCacheHitsSkipComputingCachedTokens) {
  Driver d(Options(8, 64), 64, 4);
  const std::vector<int32_t> shared = Prompt(18, 1);
  d.Add(1, shared, 4);
  d.RunAll();
  std::vector<int32_t> longer = shared;
  longer.push_back(5);
  longer.push_back(6);
  d.Add(2, longer, 4);
  ScheduleResult r = d.Step();
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0].start, 16);  // 4 full blocks of the shared 18 tokens
  EXPECT_EQ(r.chunks[0].num_tokens, 4);
  EXPECT_EQ(r.chunks[0].seq->cached_prompt_tokens, 16);
  EXPECT_EQ(d.scheduler().blocks().prefix_hit_tokens(), 16);
  d.RunAll();
  d.ExpectReferenceOutputs();
  EXPECT_TRUE(d.runner().error.empty()) << d.runner().error;
}

TEST(SchedulerTest, ConcurrentSharedPrefixesStayConsistent) {
  Driver d(Options(16, 32), 64, 4);
  const std::vector<int32_t> shared = Prompt(24, 3);
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> p = shared;
    for (int j = 0; j <= i % 4; ++j) p.push_back(static_cast<int32_t>(i + j));
    d.Add(i, p, 8 + i);
    if (i % 3 == 0) d.Step();
  }
  d.RunAll();
  d.ExpectReferenceOutputs();
  EXPECT_GT(d.scheduler().blocks().prefix_hit_tokens(), 0);
  EXPECT_TRUE(d.runner().error.empty()) << d.runner().error;
}

TEST(SchedulerTest, SharedPrefixesUnderPreemptionStayConsistent) {
  // Sharing and eviction together: a shared block must never be handed out while referenced.
  Driver d(Options(16, 24), 14, 4);
  const std::vector<int32_t> shared = Prompt(12, 4);
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = shared;
    p.push_back(static_cast<int32_t>(i));
    d.Add(i, p, 10 + i % 3);
    d.Step();
  }
  d.RunAll();
  EXPECT_GT(d.scheduler().num_preemptions(), 0);
  EXPECT_GT(d.scheduler().blocks().prefix_hit_tokens(), 0);
  d.ExpectReferenceOutputs();
  EXPECT_TRUE(d.runner().error.empty()) << d.runner().error;
}

TEST(SchedulerTest, RemoveFreesBlocksAtOnce) {
  Driver d(Options(8, 64), 64, 4);
  d.Add(1, Prompt(10, 1), 50);
  d.Add(2, Prompt(30, 2), 50);
  d.Step();
  d.Step();
  const int before = d.scheduler().blocks().NumUsed();
  const int held = static_cast<int>(d.scheduler().blocks().BlockTable(2).size());
  EXPECT_EQ(held, 8);  // 30 + 1 computed tokens + the next one: 32 -> 8 blocks
  ASSERT_NE(d.scheduler().Remove(2), nullptr);
  EXPECT_EQ(d.scheduler().blocks().NumUsed(), before - held);
  EXPECT_EQ(d.scheduler().Remove(2), nullptr);
  ASSERT_NE(d.scheduler().Remove(1), nullptr);
  EXPECT_EQ(d.scheduler().blocks().NumUsed(), 0);
  EXPECT_FALSE(d.scheduler().HasWork());
}

}  // namespace
}  // namespace scheduler_test
}  // namespace inferd::gen
