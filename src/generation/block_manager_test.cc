#include "generation/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace inferd::gen {
namespace {

std::vector<int32_t> Iota(int n, int32_t start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Allocates `tokens` for `id` as an admission would (prefix match first) and commits them.
int AdmitAndCompute(BlockManager& bm, int64_t id, const std::vector<int32_t>& tokens) {
  PrefixMatch m = bm.MatchPrefix(tokens);
  EXPECT_TRUE(bm.CanAllocate(m, tokens.size()));
  bm.AdoptPrefix(id, m, tokens.size());
  EXPECT_TRUE(bm.Allocate(id, tokens.size()));
  bm.CommitFullBlocks(id, tokens, tokens.size());
  return m.num_tokens(bm.block_size());
}

TEST(BlockManagerTest, AllocatesDistinctBlocksAndFreesThem) {
  BlockManager bm(8, 4, true);
  EXPECT_EQ(bm.NumAvailable(), 8);
  ASSERT_TRUE(bm.Allocate(1, 10));
  EXPECT_EQ(bm.BlockTable(1).size(), 3u);
  ASSERT_TRUE(bm.Allocate(2, 20));
  EXPECT_EQ(bm.BlockTable(2).size(), 5u);
  std::set<int32_t> all;
  for (int32_t b : bm.BlockTable(1)) all.insert(b);
  for (int32_t b : bm.BlockTable(2)) all.insert(b);
  EXPECT_EQ(all.size(), 8u);
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), 7);
  EXPECT_EQ(bm.NumUsed(), 8);

  // Out of blocks: nothing changes.
  EXPECT_FALSE(bm.Allocate(3, 1));
  EXPECT_TRUE(bm.BlockTable(3).empty());
  EXPECT_EQ(bm.NumUsed(), 8);

  bm.Free(1);
  EXPECT_EQ(bm.NumUsed(), 5);
  EXPECT_TRUE(bm.BlockTable(1).empty());
  ASSERT_TRUE(bm.Allocate(3, 12));
  EXPECT_EQ(bm.NumUsed(), 8);
  bm.Free(2);
  bm.Free(3);
  bm.Free(42);  // unknown: no-op
  EXPECT_EQ(bm.NumUsed(), 0);
}

TEST(BlockManagerTest, GrowsOneBlockAtABoundary) {
  BlockManager bm(4, 4, true);
  ASSERT_TRUE(bm.Allocate(1, 4));
  EXPECT_EQ(bm.BlockTable(1).size(), 1u);
  ASSERT_TRUE(bm.Allocate(1, 4));  // already covered
  EXPECT_EQ(bm.BlockTable(1).size(), 1u);
  ASSERT_TRUE(bm.Allocate(1, 5));
  EXPECT_EQ(bm.BlockTable(1).size(), 2u);
  EXPECT_FALSE(bm.Allocate(1, 17));  // 5 blocks > 4: the table keeps its 2
  EXPECT_EQ(bm.BlockTable(1).size(), 2u);
}

TEST(BlockManagerTest, SharesFullPrefixBlocksWithReferenceCounts) {
  BlockManager bm(16, 4, true);
  const std::vector<int32_t> prompt = Iota(13);
  EXPECT_EQ(AdmitAndCompute(bm, 1, prompt), 0);
  EXPECT_EQ(bm.NumUsed(), 4);

  // Same prompt: its 3 full blocks are found and shared; the 4th (partial) is its own.
  PrefixMatch m = bm.MatchPrefix(prompt);
  ASSERT_EQ(m.blocks.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.blocks[i], bm.BlockTable(1)[i]);
  EXPECT_EQ(AdmitAndCompute(bm, 2, prompt), 12);
  EXPECT_EQ(bm.NumUsed(), 5);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bm.RefCount(bm.BlockTable(2)[i]), 2);
  EXPECT_NE(bm.BlockTable(1)[3], bm.BlockTable(2)[3]);
  EXPECT_EQ(bm.prefix_query_tokens(), 26);
  EXPECT_EQ(bm.prefix_hit_tokens(), 12);

  // A prompt of exactly 12 tokens matches only 2 blocks: the last token must be computed.
  EXPECT_EQ(bm.MatchPrefix(Iota(12)).blocks.size(), 2u);
  // A different first block breaks the chain even though block 2's tokens are the same.
  std::vector<int32_t> other = prompt;
  other[0] = 99;
  EXPECT_TRUE(bm.MatchPrefix(other).blocks.empty());

  bm.Free(1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bm.RefCount(bm.BlockTable(2)[i]), 1);
  bm.Free(2);
  EXPECT_EQ(bm.NumUsed(), 0);
  // Unreferenced but still cached: a later request finds them.
  EXPECT_EQ(bm.MatchPrefix(prompt).blocks.size(), 3u);
  EXPECT_EQ(AdmitAndCompute(bm, 3, prompt), 12);
}

TEST(BlockManagerTest, EvictsUnreferencedBlocksLeastRecentlyReleasedFirst) {
  BlockManager bm(4, 2, true);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5};  // blocks [1 2] [3 4] + 1 token
  const std::vector<int32_t> b = {6, 7, 8, 9, 10};
  AdmitAndCompute(bm, 1, {1, 2, 3, 4});
  bm.Free(1);  // releases [3 4] first, then [1 2]
  AdmitAndCompute(bm, 2, {6, 7, 8, 9});
  bm.Free(2);
  EXPECT_EQ(bm.NumUsed(), 0);
  EXPECT_EQ(bm.MatchPrefix(a).blocks.size(), 2u);
  EXPECT_EQ(bm.MatchPrefix(b).blocks.size(), 2u);

  // 3 blocks: all 4 are cached, so 3 are evicted: a's tail, a's head, then b's tail.
  ASSERT_TRUE(bm.Allocate(3, 6));
  EXPECT_TRUE(bm.MatchPrefix(a).blocks.empty());
  EXPECT_EQ(bm.MatchPrefix(b).blocks.size(), 1u);
}

TEST(BlockManagerTest, NeverEvictsReferencedBlocks) {
  BlockManager bm(3, 2, true);
  AdmitAndCompute(bm, 1, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(bm.NumAvailable(), 0);
  EXPECT_FALSE(bm.Allocate(2, 1));
  EXPECT_EQ(bm.MatchPrefix(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}).blocks.size(), 3u);
  for (int32_t blk : bm.BlockTable(1)) EXPECT_TRUE(bm.IsCached(blk));
}

TEST(BlockManagerTest, CanAllocateCountsRevivedCachedBlocks) {
  BlockManager bm(3, 2, true);
  AdmitAndCompute(bm, 1, {1, 2, 3, 4});
  bm.Free(1);  // 2 cached (evictable) + 1 free
  PrefixMatch m = bm.MatchPrefix(std::vector<int32_t>{1, 2, 3, 4, 5});
  ASSERT_EQ(m.blocks.size(), 2u);
  EXPECT_TRUE(bm.CanAllocate(m, 6));   // 2 hit + 1 new
  EXPECT_FALSE(bm.CanAllocate(m, 7));  // 2 hit + 2 new > 3
  EXPECT_FALSE(bm.CanAllocate({}, 7));
}

TEST(BlockManagerTest, DuplicateContentIsCachedOnce) {
  BlockManager bm(8, 2, true);
  const std::vector<int32_t> p = {1, 2, 3, 4, 5};
  // Both computed at the same time (neither saw the other's blocks).
  for (int64_t id : {1, 2}) {
    ASSERT_TRUE(bm.Allocate(id, p.size()));
  }
  bm.CommitFullBlocks(1, p, 5);
  bm.CommitFullBlocks(2, p, 5);
  EXPECT_TRUE(bm.IsCached(bm.BlockTable(1)[0]));
  EXPECT_FALSE(bm.IsCached(bm.BlockTable(2)[0]));
  bm.Free(2);
  bm.Free(1);
  EXPECT_EQ(bm.MatchPrefix(p).blocks.size(), 2u);
}

TEST(BlockManagerTest, CommitsOnlyComputedFullBlocks) {
  BlockManager bm(8, 4, true);
  const std::vector<int32_t> p = Iota(10);
  ASSERT_TRUE(bm.Allocate(1, 10));
  bm.CommitFullBlocks(1, p, 7);  // block 0 full and computed, block 1 not
  EXPECT_EQ(bm.MatchPrefix(p).blocks.size(), 1u);
  bm.CommitFullBlocks(1, p, 10);
  EXPECT_EQ(bm.MatchPrefix(p).blocks.size(), 2u);
}

TEST(BlockManagerTest, PrefixCachingOffNeverMatches) {
  BlockManager bm(8, 2, false);
  AdmitAndCompute(bm, 1, {1, 2, 3, 4, 5});
  EXPECT_TRUE(bm.MatchPrefix(std::vector<int32_t>{1, 2, 3, 4, 5}).blocks.empty());
  for (int32_t blk : bm.BlockTable(1)) EXPECT_FALSE(bm.IsCached(blk));
  bm.Free(1);
  EXPECT_EQ(bm.NumAvailable(), 8);
}

}  // namespace
}  // namespace inferd::gen
