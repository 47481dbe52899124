#include "generation/block_manager.h"

#include <algorithm>
#include <cassert>

namespace inferd::gen {

namespace {
constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
}  // namespace

BlockManager::BlockManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      blocks_(static_cast<size_t>(num_blocks)) {
  assert(num_blocks >= 0 && block_size >= 1);
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is taken first
}

uint64_t BlockManager::HashBlock(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = Mix(parent);
  for (int32_t t : tokens)
    h = Mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + kRootHash));
  return h;
}

PrefixMatch BlockManager::MatchPrefix(std::span<const int32_t> tokens) const {
  PrefixMatch match;
  if (!prefix_caching_ || tokens.empty()) return match;
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(block_size_);
  uint64_t parent = kRootHash;
  for (size_t i = 0; i < max_blocks; ++i) {
    auto slice = tokens.subspan(i * block_size_, block_size_);
    const uint64_t h = HashBlock(parent, slice);
    auto it = cache_.find(h);
    if (it == cache_.end()) break;
    const Block& b = blocks_[it->second];
    // The hash is 64 bits: a hit is confirmed on the tokens and the parent, so a collision costs
    // a miss, never wrong K/V.
    if (b.parent_hash != parent ||
        !std::equal(slice.begin(), slice.end(), b.tokens.begin(), b.tokens.end())) {
      break;
    }
    match.blocks.push_back(it->second);
    parent = h;
  }
  return match;
}

bool BlockManager::CanAllocate(const PrefixMatch& match, int64_t num_tokens) const {
  int revived = 0;  // hit blocks now evictable: adopting them takes them out of the available set
  for (int32_t b : match.blocks) revived += blocks_[b].ref_count == 0;
  const int needed = BlocksFor(num_tokens) - static_cast<int>(match.blocks.size());
  return needed + revived <= NumAvailable();
}

void BlockManager::AdoptPrefix(int64_t seq_id, const PrefixMatch& match, int64_t num_query_tokens) {
  SeqBlocks& seq = seqs_[seq_id];
  assert(seq.table.empty());
  seq.last_hash = kRootHash;
  for (int32_t b : match.blocks) {
    Block& block = blocks_[b];
    if (block.ref_count++ == 0) {
      evictable_.erase(block.lru);
      ++num_used_;
    }
    seq.table.push_back(b);
    seq.last_hash = block.hash;
  }
  seq.num_committed = static_cast<int>(match.blocks.size());
  prefix_query_tokens_ += num_query_tokens;
  prefix_hit_tokens_ += match.num_tokens(block_size_);
}

int32_t BlockManager::TakeBlock() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    b = evictable_.front();
    evictable_.pop_front();
    Evict(b);
  } else {
    return -1;
  }
  blocks_[b].ref_count = 1;
  ++num_used_;
  return b;
}

void BlockManager::Evict(int32_t block) {
  Block& b = blocks_[block];
  cache_.erase(b.hash);
  b.cached = false;
  b.tokens.clear();
}

bool BlockManager::Allocate(int64_t seq_id, int64_t num_tokens) {
  SeqBlocks& seq = seqs_[seq_id];
  if (seq.table.empty() && seq.num_committed == 0) seq.last_hash = kRootHash;
  const int needed = BlocksFor(num_tokens) - static_cast<int>(seq.table.size());
  if (needed <= 0) return true;
  if (needed > NumAvailable()) return false;
  for (int i = 0; i < needed; ++i) seq.table.push_back(TakeBlock());
  return true;
}

void BlockManager::Truncate(int64_t seq_id, int64_t num_tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  SeqBlocks& seq = it->second;
  const size_t keep = static_cast<size_t>(std::max(BlocksFor(num_tokens), seq.num_committed));
  while (seq.table.size() > keep) {
    Release(seq.table.back());
    seq.table.pop_back();
  }
}

void BlockManager::CommitFullBlocks(int64_t seq_id, std::span<const int32_t> tokens,
                                    int64_t num_computed) {
  if (!prefix_caching_) return;
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  SeqBlocks& seq = it->second;
  const int64_t computed = std::min<int64_t>(num_computed, static_cast<int64_t>(tokens.size()));
  const int full =
      std::min(static_cast<int>(computed / block_size_), static_cast<int>(seq.table.size()));
  for (; seq.num_committed < full; ++seq.num_committed) {
    auto slice = tokens.subspan(static_cast<size_t>(seq.num_committed) * block_size_, block_size_);
    const uint64_t h = HashBlock(seq.last_hash, slice);
    Block& b = blocks_[seq.table[seq.num_committed]];
    // A block with the same contents may already be cached (another sequence computed the same
    // prefix in the same steps): keep that one, ours is freed uncached when the sequence ends.
    if (!b.cached && !cache_.contains(h)) {
      b.cached = true;
      b.hash = h;
      b.parent_hash = seq.last_hash;
      b.tokens.assign(slice.begin(), slice.end());
      cache_[h] = seq.table[seq.num_committed];
    }
    seq.last_hash = h;
  }
}

void BlockManager::Release(int32_t block) {
  Block& b = blocks_[block];
  assert(b.ref_count > 0);
  if (--b.ref_count > 0) return;
  --num_used_;
  if (b.cached) {
    b.lru = evictable_.insert(evictable_.end(), block);
  } else {
    free_.push_back(block);
  }
}

void BlockManager::Free(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  const std::vector<int32_t>& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) Release(*b);
  seqs_.erase(it);
}

std::span<const int32_t> BlockManager::BlockTable(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return {};
  return it->second.table;
}

}  // namespace inferd::gen
