// Token masks for constrained output: which vocabulary tokens may come next, per DFA state.
//
// A token is allowed in state s when walking its bytes through the DFA (regex.h) from s stays
// alive (the text so far remains a prefix of some match); the end-of-sequence token is allowed
// exactly in accepting states. Masks are computed per state, not per token by trial decoding:
// the vocabulary is a byte trie, and a state's mask is one depth-first walk of the trie that
// prunes a whole subtree at the first dead byte (most tokens die at their first byte outside a
// string). Masks are computed the first time a state is asked for and kept (`precompute` does
// all states up front); docs/generation.md "Constrained output" has the measured costs.
//
//   auto vocab = std::make_shared<Vocabulary>(token_bytes, eos_id);
//   TokenIndexCache cache(vocab);                   // compiled patterns, shared by requests
//   auto index = cache.Get(regex);                  // StatusOr<std::shared_ptr<const TokenIndex>>
//   int32_t state = (*index)->start();
//   std::span<const uint64_t> allowed = (*index)->Allowed(state);   // bit t = token t allowed
//   state = (*index)->Next(state, sampled_token);
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "constrained/regex.h"

namespace inferd::constrained {

// The bytes each token adds to the output, as a byte trie. Immutable; thread-safe.
class Vocabulary {
 public:
  // token_bytes[id]: what token id appends to the text; nullopt or empty for tokens that must
  // never be generated under a constraint (control, unknown, unused pieces). `eos_id` < 0: none.
  Vocabulary(const std::vector<std::optional<std::string>>& token_bytes, int32_t eos_id);

  int size() const { return size_; }
  int32_t eos_id() const { return eos_id_; }
  // The bytes of `token` (empty for tokens that are never allowed, and for EOS).
  const std::string& bytes(int32_t token) const { return bytes_[token]; }

 private:
  friend class TokenIndex;
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node, sorted by byte
    std::vector<int32_t> tokens;                        // tokens whose bytes end here
  };
  int size_;
  int32_t eos_id_;
  std::vector<std::string> bytes_;
  std::vector<Node> trie_;  // [0] is the root
};

struct TokenIndexOptions {
  DfaOptions dfa;
  bool precompute = false;  // all states' masks at creation instead of on first use
};

// A compiled constraint: a DFA over the vocabulary. Thread-safe (masks are filled under a lock).
class TokenIndex {
 public:
  // INVALID_ARGUMENT for a bad or too large pattern (regex.h), or when no token of the vocabulary
  // can start a match and the empty text does not match either.
  static StatusOr<std::shared_ptr<const TokenIndex>> Create(std::string_view regex,
                                                            std::shared_ptr<const Vocabulary> vocab,
                                                            const TokenIndexOptions& options = {});

  int32_t start() const { return dfa_.start(); }
  // Bit t (word t / 64, bit t % 64) set when token t may follow in `state`; vocab size bits.
  // The span stays valid for the index's lifetime. All zero only in a state from which no token
  // sequence of this vocabulary reaches a match (possible without byte-fallback pieces).
  std::span<const uint64_t> Allowed(int32_t state) const EXCLUDES(mu_);
  // The state after `token`; Dfa::kDead if it was not allowed. EOS leaves the state unchanged.
  int32_t Next(int32_t state, int32_t token) const;
  bool accepting(int32_t state) const { return dfa_.accepting(state); }
  const Dfa& dfa() const { return dfa_; }
  const Vocabulary& vocab() const { return *vocab_; }
  int masks_computed() const EXCLUDES(mu_);

 private:
  TokenIndex(Dfa dfa, std::shared_ptr<const Vocabulary> vocab);
  std::vector<uint64_t> ComputeMask(int32_t state) const;

  const Dfa dfa_;
  const std::shared_ptr<const Vocabulary> vocab_;
  mutable Mutex mu_;
  mutable std::vector<std::unique_ptr<const std::vector<uint64_t>>> masks_ GUARDED_BY(mu_);
  mutable int computed_ GUARDED_BY(mu_) = 0;
};

// Compiled constraints by pattern, least recently used dropped beyond `capacity` (a request still
// holding one keeps it alive). Thread-safe; compilation runs outside the lock.
class TokenIndexCache {
 public:
  explicit TokenIndexCache(std::shared_ptr<const Vocabulary> vocab, TokenIndexOptions options = {},
                           size_t capacity = 64);
  StatusOr<std::shared_ptr<const TokenIndex>> Get(const std::string& regex) EXCLUDES(mu_);
  const Vocabulary& vocab() const { return *vocab_; }

 private:
  const std::shared_ptr<const Vocabulary> vocab_;
  const TokenIndexOptions options_;
  const size_t capacity_;
  Mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const TokenIndex>>> lru_ GUARDED_BY(mu_);
  std::unordered_map<std::string, decltype(lru_)::iterator> by_regex_ GUARDED_BY(mu_);
};

}  // namespace inferd::constrained
