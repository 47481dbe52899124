// Memory planning unit tests, with no executor or kernel: lifetimes, buffer placement, and the
// recorder's in-place and view decisions. End-to-end checks through Session are in
// session/arena_test.cc.
#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace inferd {
namespace {

bool Overlap(const BufferRequest& a, size_t oa, const BufferRequest& b, size_t ob) {
  const bool in_time = !(a.last < b.first || b.last < a.first);
  const bool in_space = oa < ob + b.bytes && ob < oa + a.bytes;
  return in_time && in_space;
}

TEST(MemoryPlannerTest, ChainReusesMemory) {
  // A chain: each buffer is read by the next step only, so two slots suffice.
  std::vector<BufferRequest> reqs = {{4096, 0, 1}, {4096, 1, 2}, {4096, 2, 3}, {4096, 3, 4}};
  BufferLayout p = PlaceBuffers(reqs);
  EXPECT_EQ(p.arena_bytes, 8192u);
  EXPECT_EQ(p.sum_bytes, 4 * 4096u);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
}

TEST(MemoryPlannerTest, NoOverlapAndAlignedOnRandomRequests) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<BufferRequest> reqs;
    for (int i = 0; i < 60; ++i) {
      int first = static_cast<int>(rng() % 40);
      reqs.push_back({1 + rng() % 100000, first, first + static_cast<int>(rng() % 10)});
    }
    BufferLayout p = PlaceBuffers(reqs, 64);
    size_t peak_live = 0;
    for (int s = 0; s < 50; ++s) {
      size_t live = 0;
      for (const auto& r : reqs) live += (r.first <= s && s <= r.last) ? r.bytes : 0;
      peak_live = std::max(peak_live, live);
    }
    EXPECT_GE(p.arena_bytes, peak_live);
    EXPECT_LE(p.arena_bytes, p.sum_bytes);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(p.offsets[i] % 64, 0u);
      EXPECT_LE(p.offsets[i] + reqs[i].bytes, p.arena_bytes);
      for (size_t j = i + 1; j < reqs.size(); ++j) {
        EXPECT_FALSE(Overlap(reqs[i], p.offsets[i], reqs[j], p.offsets[j])) << i << " vs " << j;
      }
    }
  }
}

TEST(MemoryPlannerTest, BestFitUsesSmallestGap) {
  // 0 and 1 live at step 0..1 side by side; 2 (small) lives later and fits where 0 was.
  std::vector<BufferRequest> reqs = {{1024, 0, 1}, {4096, 0, 3}, {512, 2, 3}};
  BufferLayout p = PlaceBuffers(reqs);
  EXPECT_EQ(p.arena_bytes, 4096u + 1024u);
  EXPECT_EQ(p.offsets[2], p.offsets[0]);
}

// Slots: 0 = graph input, 1..3 produced; step 0: 0 -> 1, step 1: 1 -> 2 and 3 (3 unread),
// step 2: 2 -> 4 (graph output).
TEST(LifetimesTest, ReleasedAfterLastReaderOrProducer) {
  std::vector<StepValues> steps = {{{0}, {1}}, {{1}, {2, 3}}, {{2, -1}, {4}}};
  const std::vector<int> outputs = {4};
  Lifetimes lt = ComputeLifetimes(steps, 5, outputs);
  EXPECT_EQ(lt.last_step, (std::vector<int>{3, 1, 2, 1, 3}));
  ASSERT_EQ(lt.release_after.size(), 3u);
  EXPECT_TRUE(lt.release_after[0].empty());
  EXPECT_EQ(lt.release_after[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(lt.release_after[2], (std::vector<int>{2}));
}

TEST(LifetimesTest, CapturedReadsExtendTheLifetime) {
  // Slot 1 is read by step 1's input and captured by step 2's subgraph (listed among its reads).
  std::vector<StepValues> steps = {{{0}, {1}}, {{1}, {2}}, {{2, 1}, {3}}};
  const std::vector<int> outputs = {3};
  Lifetimes lt = ComputeLifetimes(steps, 4, outputs);
  EXPECT_EQ(lt.last_step[1], 2);
  EXPECT_EQ(lt.release_after[2], (std::vector<int>{1, 2}));
}

// A fake heap: tensors viewing distinct ranges of one block, so the recorder sees real addresses.
class RecorderTest : public ::testing::Test {
 protected:
  Tensor At(size_t offset, int64_t bytes) {
    return Tensor::View(DataType::kUInt8, {bytes}, heap_.data() + offset);
  }
  std::vector<char> heap_ = std::vector<char>(1 << 16);
  MemoryRecorder rec_;
};

TEST_F(RecorderTest, ChainSharesMemoryAndViewsExtendLifetimes) {
  // step 0: a (1 KiB, read by step 1); step 1: view v of a (read by step 2), b (1 KiB);
  // step 2: c (1 KiB, read by step 3). `a` must live until step 2 through its view.
  Tensor a = At(0, 1024), b = At(2048, 1024), c = At(4096, 1024);
  rec_.Reset(3);
  rec_.BeginStep(0, 1);
  rec_.RecordAllocated(0, 0, a.raw_data(), 1024, 1, {}, -1);
  rec_.BeginStep(1, 2);
  rec_.RecordView(1, 0, static_cast<const char*>(a.raw_data()) + 512, 2);
  rec_.RecordAllocated(1, 1, b.raw_data(), 1024, 2, {}, -1);
  rec_.BeginStep(2, 1);
  rec_.RecordAllocated(2, 0, c.raw_data(), 1024, 3, {}, -1);
  MemoryPlan plan = rec_.Build(64);
  ASSERT_EQ(plan.outputs.size(), 3u);
  EXPECT_EQ(plan.stats.planned_tensors, 3u);
  EXPECT_EQ(plan.stats.sum_tensor_bytes, 3 * 1024u);
  // Through its view, a lives until step 2: a, b and c are all live there, no reuse.
  EXPECT_EQ(plan.stats.arena_bytes, 3 * 1024u);
  const PlannedOutput& view = plan.outputs[1][0];
  EXPECT_EQ(view.offset, -1);
  EXPECT_EQ(view.alias_begin, plan.outputs[0][0].offset);
  EXPECT_EQ(view.alias_end, view.alias_begin + 1024);
  EXPECT_TRUE(view.AllowsView(view.alias_begin + 512));
  EXPECT_FALSE(view.AllowsView(view.alias_end));
  EXPECT_FALSE(plan.outputs[0][0].AllowsView(0));
}

TEST_F(RecorderTest, ChainWithoutViewsReusesMemory) {
  Tensor a = At(0, 1024), b = At(2048, 1024), c = At(4096, 1024);
  rec_.Reset(3);
  rec_.BeginStep(0, 1);
  rec_.RecordAllocated(0, 0, a.raw_data(), 1024, 1, {}, -1);
  rec_.BeginStep(1, 1);
  rec_.RecordAllocated(1, 0, b.raw_data(), 1024, 2, {}, -1);
  rec_.BeginStep(2, 1);
  rec_.RecordAllocated(2, 0, c.raw_data(), 1024, 3, {}, -1);
  MemoryPlan plan = rec_.Build(64);
  EXPECT_EQ(plan.stats.arena_bytes, 2 * 1024u);
  EXPECT_EQ(plan.outputs[0][0].offset, plan.outputs[2][0].offset);
}

TEST_F(RecorderTest, InPlaceTakesOverAnInputThatDiesAtTheStep) {
  // step 0: x (dies at step 1); step 1: y = f(x, w) in place over x (w is a constant, unrecorded).
  Tensor x = At(0, 1024), w = At(8192, 64), y = At(2048, 1024);
  rec_.Reset(2);
  rec_.BeginStep(0, 1);
  rec_.RecordAllocated(0, 0, x.raw_data(), 1024, 1, {}, -1);
  rec_.BeginStep(1, 1);
  const Tensor* inputs[] = {&x, &w};
  rec_.RecordAllocated(1, 0, y.raw_data(), 1024, 2, inputs, /*in_place_input=*/0);
  MemoryPlan plan = rec_.Build(64);
  EXPECT_EQ(plan.stats.planned_tensors, 1u);
  EXPECT_TRUE(plan.outputs[1][0].in_place);
  EXPECT_EQ(plan.outputs[1][0].offset, plan.outputs[0][0].offset);
  EXPECT_EQ(plan.stats.arena_bytes, 1024u);
}

TEST_F(RecorderTest, NoInPlaceWhenTheInputLivesOnOrIsReadTwiceOrIsTooSmall) {
  Tensor x = At(0, 1024), y = At(2048, 1024), big = At(4096, 2048);
  struct Case {
    const char* what;
    int x_last;           // last step of x
    bool second_reader;   // x is also the step's other input
    int64_t out_bytes;
  };
  for (const Case& c : {Case{"x read later", 2, false, 1024}, Case{"x read twice", 1, true, 1024},
                        Case{"output larger", 1, false, 2048}}) {
    SCOPED_TRACE(c.what);
    rec_.Reset(3);
    rec_.BeginStep(0, 1);
    rec_.RecordAllocated(0, 0, x.raw_data(), 1024, c.x_last, {}, -1);
    rec_.BeginStep(1, 1);
    Tensor other = c.second_reader ? At(512, 64) : At(8192, 64);  // inside x, or elsewhere
    const Tensor* inputs[] = {&x, &other};
    const void* out = c.out_bytes > 1024 ? big.raw_data() : y.raw_data();
    rec_.RecordAllocated(1, 0, out, static_cast<size_t>(c.out_bytes), 2, inputs, 0);
    rec_.BeginStep(2, 0);
    MemoryPlan plan = rec_.Build(64);
    EXPECT_FALSE(plan.outputs[1][0].in_place);
    EXPECT_EQ(plan.stats.planned_tensors, 2u);
    EXPECT_NE(plan.outputs[1][0].offset, plan.outputs[0][0].offset);
  }
}

}  // namespace
}  // namespace inferd
