#include "constrained/token_index.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "constrained/json_schema.h"

namespace inferd::constrained {
namespace {

bool Bit(std::span<const uint64_t> mask, int32_t t) { return (mask[t / 64] >> (t % 64)) & 1; }

// id 0: EOS, 1: a control token (no bytes), then pieces.
std::shared_ptr<const Vocabulary> TestVocab(const std::vector<std::string>& pieces) {
  std::vector<std::optional<std::string>> bytes = {std::nullopt, std::nullopt};
  for (const std::string& p : pieces) bytes.emplace_back(p);
  return std::make_shared<Vocabulary>(bytes, /*eos_id=*/0);
}

// The reference: walk every token's bytes from `state` (what the trie walk must equal).
std::vector<int32_t> BruteForce(const TokenIndex& index, int32_t state) {
  std::vector<int32_t> allowed;
  for (int32_t t = 0; t < index.vocab().size(); ++t) {
    if (t == index.vocab().eos_id()) {
      if (index.accepting(state)) allowed.push_back(t);
      continue;
    }
    const std::string& b = index.vocab().bytes(t);
    if (!b.empty() && index.dfa().Walk(state, b) != Dfa::kDead) allowed.push_back(t);
  }
  return allowed;
}

std::vector<int32_t> Ids(std::span<const uint64_t> mask, int vocab) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < vocab; ++t) {
    if (Bit(mask, t)) ids.push_back(t);
  }
  return ids;
}

TEST(TokenIndexTest, MasksFollowTheAutomatonAndEosOnlyWhenAccepting) {
  // 2:"a" 3:"ab" 4:"abc" 5:"b" 6:"c" 7:"ca" 8:"x"
  auto vocab = TestVocab({"a", "ab", "abc", "b", "c", "ca", "x"});
  auto index = TokenIndex::Create("ab*c", vocab);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  const TokenIndex& ix = **index;
  EXPECT_EQ(Ids(ix.Allowed(ix.start()), vocab->size()), (std::vector<int32_t>{2, 3, 4}));
  const int32_t after_a = ix.Next(ix.start(), 2);
  EXPECT_EQ(Ids(ix.Allowed(after_a), vocab->size()), (std::vector<int32_t>{5, 6}));
  const int32_t done = ix.Next(after_a, 6);
  ASSERT_TRUE(ix.accepting(done));
  EXPECT_EQ(Ids(ix.Allowed(done), vocab->size()), (std::vector<int32_t>{0}));  // only EOS
  EXPECT_EQ(ix.Next(done, 0), done);
  EXPECT_EQ(ix.Next(after_a, 8), Dfa::kDead);
  EXPECT_EQ(ix.Next(after_a, 1), Dfa::kDead);  // a control token is never allowed
  EXPECT_EQ(ix.Next(after_a, 0), Dfa::kDead);  // nor EOS before the match is complete
}

TEST(TokenIndexTest, TrieWalkEqualsBruteForceOnEveryStateOfAJsonSchema) {
  std::mt19937 rng(3);
  std::vector<std::string> pieces;
  const std::string alphabet = "{}[]\":,0123456789-.eE abcnultrsf\\\xc3\xa9";
  for (int i = 0; i < 600; ++i) {
    std::string p;
    const int len = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
    pieces.push_back(p);
  }
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));  // byte fallback
  auto vocab = TestVocab(pieces);
  auto regex = JsonSchemaTextToRegex(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
          "n":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b"]}}},
          "required":["name"]})");
  ASSERT_TRUE(regex.ok());
  TokenIndexOptions options;
  options.precompute = true;
  auto index = TokenIndex::Create(*regex, vocab, options);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ((*index)->masks_computed(), (*index)->dfa().num_states());
  for (int32_t s = 0; s < (*index)->dfa().num_states(); ++s) {
    ASSERT_EQ(Ids((*index)->Allowed(s), vocab->size()), BruteForce(**index, s)) << "state " << s;
  }
}

TEST(TokenIndexTest, LazyMasksAreComputedOncePerStateAndSafeAcrossThreads) {
  auto vocab = TestVocab({"1", "2", "12", "[", "]", ","});
  auto index = TokenIndex::Create(R"(\[(1|2)+(,(1|2)+)*\])", vocab);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ((*index)->masks_computed(), 1);  // the start state, checked by Create
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int32_t s = 0; s < (*index)->dfa().num_states(); ++s) (*index)->Allowed(s);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ((*index)->masks_computed(), (*index)->dfa().num_states());
}

TEST(TokenIndexTest, AVocabularyThatCannotStartTheMatchIsAnError) {
  auto vocab = TestVocab({"a", "b"});
  auto index = TokenIndex::Create("[0-9]+", vocab);
  ASSERT_FALSE(index.ok());
  EXPECT_NE(index.status().message().find("no token of the model's vocabulary"), std::string::npos);
  EXPECT_FALSE(TokenIndex::Create("(", vocab).ok());
}

TEST(TokenIndexCacheTest, SharesCompiledPatternsAndEvictsLeastRecentlyUsed) {
  auto vocab = TestVocab({"a", "b"});
  TokenIndexCache cache(vocab, {}, /*capacity=*/2);
  auto a1 = cache.Get("a+");
  auto a2 = cache.Get("a+");
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->get(), a2->get());
  ASSERT_TRUE(cache.Get("b+").ok());
  ASSERT_TRUE(cache.Get("a+").ok());     // a+ is the most recent now
  ASSERT_TRUE(cache.Get("(ab)+").ok());  // evicts b+
  auto a3 = cache.Get("a+");
  EXPECT_EQ(a1->get(), a3->get());
  EXPECT_FALSE(cache.Get("[").ok());
}

}  // namespace
}  // namespace inferd::constrained
