#include "constrained/token_index.h"

#include <algorithm>

namespace inferd::constrained {

Vocabulary::Vocabulary(const std::vector<std::optional<std::string>>& token_bytes, int32_t eos_id)
    : size_(static_cast<int>(token_bytes.size())), eos_id_(eos_id), bytes_(token_bytes.size()) {
  trie_.emplace_back();
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const auto& b = token_bytes[id];
    if (static_cast<int32_t>(id) == eos_id || !b || b->empty()) continue;
    bytes_[id] = *b;
    int32_t node = 0;
    for (char c : *b) {
      const auto byte = static_cast<uint8_t>(c);
      auto& children = trie_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), byte,
                                 [](const auto& child, uint8_t v) { return child.first < v; });
      if (it != children.end() && it->first == byte) {
        node = it->second;
        continue;
      }
      const auto next = static_cast<int32_t>(trie_.size());
      children.insert(it, {byte, next});
      trie_.emplace_back();  // invalidates `children`: not used below
      node = next;
    }
    trie_[node].tokens.push_back(static_cast<int32_t>(id));
  }
}

TokenIndex::TokenIndex(Dfa dfa, std::shared_ptr<const Vocabulary> vocab)
    : dfa_(std::move(dfa)), vocab_(std::move(vocab)) {
  MutexLock l(&mu_);
  masks_.resize(dfa_.num_states());
}

StatusOr<std::shared_ptr<const TokenIndex>> TokenIndex::Create(
    std::string_view regex, std::shared_ptr<const Vocabulary> vocab,
    const TokenIndexOptions& options) {
  if (vocab == nullptr) return InvalidArgument("constrained output: no vocabulary");
  auto dfa = Dfa::FromRegex(regex, options.dfa);
  if (!dfa.ok()) return dfa.status();
  std::shared_ptr<const TokenIndex> index(new TokenIndex(std::move(*dfa), std::move(vocab)));
  const std::span<const uint64_t> first = index->Allowed(index->start());
  if (std::all_of(first.begin(), first.end(), [](uint64_t w) { return w == 0; })) {
    return InvalidArgument(
        "constrained output: no token of the model's vocabulary can start a match of the "
        "pattern");
  }
  if (options.precompute) {
    for (int32_t s = 0; s < index->dfa().num_states(); ++s) index->Allowed(s);
  }
  return index;
}

std::vector<uint64_t> TokenIndex::ComputeMask(int32_t state) const {
  const Vocabulary& v = *vocab_;
  std::vector<uint64_t> mask((static_cast<size_t>(v.size()) + 63) / 64, 0);
  auto set = [&mask](int32_t t) { mask[t / 64] |= uint64_t{1} << (t % 64); };
  if (dfa_.accepting(state) && v.eos_id() >= 0 && v.eos_id() < v.size()) set(v.eos_id());
  // Depth-first over the trie, carrying the DFA state of each node's prefix.
  std::vector<std::pair<int32_t, int32_t>> stack = {{0, state}};
  while (!stack.empty()) {
    const auto [node, s] = stack.back();
    stack.pop_back();
    for (const auto& [byte, child] : v.trie_[node].children) {
      const int32_t next = dfa_.Next(s, byte);
      if (next == Dfa::kDead) continue;
      for (int32_t t : v.trie_[child].tokens) set(t);
      if (!v.trie_[child].children.empty()) stack.emplace_back(child, next);
    }
  }
  return mask;
}

std::span<const uint64_t> TokenIndex::Allowed(int32_t state) const {
  {
    MutexLock l(&mu_);
    if (const auto& m = masks_[state]; m != nullptr) return *m;
  }
  // Computed unlocked (two threads may both compute a new state; the first one stored wins).
  auto mask = std::make_unique<const std::vector<uint64_t>>(ComputeMask(state));
  MutexLock l(&mu_);
  if (masks_[state] == nullptr) {
    masks_[state] = std::move(mask);
    ++computed_;
  }
  return *masks_[state];
}

int32_t TokenIndex::Next(int32_t state, int32_t token) const {
  if (state == Dfa::kDead || token < 0 || token >= vocab_->size()) return Dfa::kDead;
  if (token == vocab_->eos_id()) return dfa_.accepting(state) ? state : Dfa::kDead;
  const std::string& b = vocab_->bytes(token);
  if (b.empty()) return Dfa::kDead;
  return dfa_.Walk(state, b);
}

int TokenIndex::masks_computed() const {
  MutexLock l(&mu_);
  return computed_;
}

TokenIndexCache::TokenIndexCache(std::shared_ptr<const Vocabulary> vocab, TokenIndexOptions options,
                                 size_t capacity)
    : vocab_(std::move(vocab)), options_(options), capacity_(std::max<size_t>(capacity, 1)) {}

StatusOr<std::shared_ptr<const TokenIndex>> TokenIndexCache::Get(const std::string& regex) {
  {
    MutexLock l(&mu_);
    auto it = by_regex_.find(regex);
    if (it != by_regex_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  auto index = TokenIndex::Create(regex, vocab_, options_);
  if (!index.ok()) return index.status();
  MutexLock l(&mu_);
  if (auto it = by_regex_.find(regex); it != by_regex_.end()) return it->second->second;
  lru_.emplace_front(regex, *index);
  by_regex_[regex] = lru_.begin();
  while (lru_.size() > capacity_) {
    by_regex_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return *index;
}

}  // namespace inferd::constrained
