// BlockManager: which KV blocks of the runner's pool (ids 0..num_blocks-1) are free, which
// sequence's block table holds which, and the prefix cache over full blocks.
//
// A sequence's block table maps logical block i (positions [i*block_size, (i+1)*block_size)) to
// a physical block. A block is *full* once all block_size of its tokens are computed; a full block
// can be registered in the prefix cache under hash(parent block's hash, its tokens), so a later
// sequence whose prompt starts with the same tokens reuses it instead of recomputing them
// (vLLM's automatic prefix caching). Cached blocks are shared with reference counts; a block
// whose count drops to 0 stays cached (and reusable) but becomes evictable, and allocation takes
// a never-cached free block first, then evicts the least recently released cached block.
//
//   BlockManager bm(num_blocks, block_size, /*enable_prefix_caching=*/true);
//   PrefixMatch m = bm.MatchPrefix(prompt);              // full blocks already computed
//   if (bm.CanAllocate(m, prompt.size())) {
//     bm.AdoptPrefix(id, m);                              // table starts with the hit blocks
//     bm.Allocate(id, prompt.size());                     // blocks for the rest
//     ... run the model, then:
//     bm.CommitFullBlocks(id, tokens, computed);          // make full blocks findable
//   }
//   bm.Free(id);                                          // the moment the sequence ends
//
// Not thread-safe: the engine's step thread owns it.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace inferd::gen {

// Full blocks of a token sequence found in the prefix cache, in order from the first.
struct PrefixMatch {
  std::vector<int32_t> blocks;
  int num_tokens(int block_size) const { return static_cast<int>(blocks.size()) * block_size; }
};

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size, bool enable_prefix_caching);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  // Blocks held by at least one sequence.
  int NumUsed() const { return num_used_; }
  // Blocks an allocation can take: never-cached free ones plus evictable cached ones.
  int NumAvailable() const { return num_blocks_ - num_used_; }
  // Blocks needed to hold `num_tokens` tokens.
  int BlocksFor(int64_t num_tokens) const {
    return static_cast<int>((num_tokens + block_size_ - 1) / block_size_);
  }

  // The longest run of full blocks at the start of `tokens` that is cached, leaving at least one
  // token uncomputed (the model must run on the last token to give its logits). Changes nothing.
  PrefixMatch MatchPrefix(std::span<const int32_t> tokens) const;
  // Whether a sequence with no blocks could adopt `match` and grow to `num_tokens`.
  bool CanAllocate(const PrefixMatch& match, int64_t num_tokens) const;
  // Starts `seq_id`'s (empty) block table with the matched blocks, taking a reference on each,
  // and counts the query (`num_query_tokens`) and its hit tokens.
  void AdoptPrefix(int64_t seq_id, const PrefixMatch& match, int64_t num_query_tokens);

  // Grows `seq_id`'s table to cover `num_tokens` tokens. Returns false (changing nothing) when the
  // pool has too few available blocks.
  bool Allocate(int64_t seq_id, int64_t num_tokens);
  // Shrinks `seq_id`'s table to the blocks `num_tokens` tokens need, releasing the rest (last
  // first): a speculative step's rejected draft tokens give back the blocks reserved for them.
  // Only uncommitted blocks may go (num_tokens covers every committed block).
  void Truncate(int64_t seq_id, int64_t num_tokens);
  // Registers the blocks of `seq_id` that are full within the first `num_computed` of `tokens`
  // (the sequence's tokens; their K/V computed) in the prefix cache. Cheap when nothing changed.
  void CommitFullBlocks(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_computed);
  // Releases every block of `seq_id` (no-op for an unknown id). Blocks are released last first,
  // so a prefix's tail is evicted before its head.
  void Free(int64_t seq_id);

  // The block table of `seq_id` (empty if unknown). Valid until the next call that changes it.
  std::span<const int32_t> BlockTable(int64_t seq_id) const;

  // Reference count of a block (0 = free or evictable); for tests and checks.
  int RefCount(int32_t block) const { return blocks_[block].ref_count; }
  bool IsCached(int32_t block) const { return blocks_[block].cached; }

  // Prefix-cache counters, in tokens: queried by admissions, and found cached.
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

 private:
  struct Block {
    int ref_count = 0;
    bool cached = false;  // registered in cache_ under `hash`
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int32_t> tokens;       // its tokens when cached (verifies a hit)
    std::list<int32_t>::iterator lru;  // in evictable_ when cached and ref_count == 0
  };
  struct SeqBlocks {
    std::vector<int32_t> table;
    int num_committed = 0;   // leading blocks already hashed
    uint64_t last_hash = 0;  // hash of block num_committed-1 (kRootHash if none)
  };

  static uint64_t HashBlock(uint64_t parent, std::span<const int32_t> tokens);
  // A block for a new table entry (ref_count 1), or -1 when none is available.
  int32_t TakeBlock();
  void Release(int32_t block);
  void Evict(int32_t block);

  const int num_blocks_;
  const int block_size_;
  const bool prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                    // never cached (or evicted), ref_count 0
  std::list<int32_t> evictable_;                 // cached, ref_count 0; front = oldest release
  std::unordered_map<uint64_t, int32_t> cache_;  // hash -> block
  std::unordered_map<int64_t, SeqBlocks> seqs_;
  int num_used_ = 0;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace inferd::gen
