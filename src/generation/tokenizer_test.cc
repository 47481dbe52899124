#include "generation/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>

#include "generation/test_util.h"

namespace inferd::gen {
namespace {

std::unique_ptr<Tokenizer> LoadTestTokenizer() {
  auto tok = Tokenizer::Load(testing::TestTokenizerPath());
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(tok).value();
}

// Streams `ids` through an IncrementalDecoder after `prompt`; returns the concatenated text.
std::string StreamDecode(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                         const std::vector<int32_t>& ids, std::vector<std::string>* pieces) {
  IncrementalDecoder d(tok, prompt);
  std::string all;
  for (int32_t id : ids) {
    std::string p = d.Add(id);
    if (pieces) pieces->push_back(p);
    all += p;
  }
  return all + d.Flush();
}

TEST(TokenizerTest, EncodesAndDecodesRoundTrip) {
  auto tok = LoadTestTokenizer();
  EXPECT_GT(tok->vocab_size(), 259);  // 3 specials + 256 byte pieces + words
  EXPECT_LE(tok->vocab_size(), 400);
  EXPECT_GE(tok->eos_id(), 0);
  const std::string text = "the quick brown fox jumps over the lazy dog";
  std::vector<int32_t> ids = tok->Encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(tok->Decode(ids), text);
  ids.push_back(-5);  // out of range: skipped
  ids.push_back(100000);
  EXPECT_EQ(tok->Decode(ids), text);
}

TEST(TokenizerTest, IncrementalDecodingKeepsLeadingSpaces) {
  auto tok = LoadTestTokenizer();
  const std::vector<int32_t> prompt = tok->Encode("Elizabeth said");
  const std::vector<int32_t> gen = tok->Encode("the house of cards");
  // Decoding the generated ids alone drops the first space; streamed after the prompt, each
  // word keeps its own.
  std::vector<std::string> pieces;
  EXPECT_EQ(StreamDecode(*tok, prompt, gen, &pieces), " the house of cards");
  EXPECT_EQ(tok->Decode(prompt) + StreamDecode(*tok, prompt, gen, nullptr),
            "Elizabeth said the house of cards");
}

TEST(TokenizerTest, IncrementalDecodingHoldsBackPartialUtf8) {
  auto tok = LoadTestTokenizer();
  const std::string text = "the 日本 fox 🦊 café";  // CJK and emoji: byte fallback
  const std::vector<int32_t> prompt = tok->Encode("she said");
  const std::vector<int32_t> gen = tok->Encode(text);
  int bytes = 0;
  for (int32_t id : gen)
    bytes += tok->Decode(std::vector<int32_t>{id}).find("\xEF\xBF\xBD") != std::string::npos;
  EXPECT_GT(bytes, 4) << "expected byte-fallback pieces";
  std::vector<std::string> pieces;
  EXPECT_EQ(StreamDecode(*tok, prompt, gen, &pieces), " " + text);
  for (const std::string& p : pieces) {
    EXPECT_EQ(p.find("\xEF\xBF\xBD"), std::string::npos) << "a piece emitted a partial character";
  }
}

TEST(TokenizerTest, APromptEndingInsideACharacterLosesNoGeneratedText) {
  auto tok = LoadTestTokenizer();
  std::vector<int32_t> prompt = tok->Encode("she said 🦊");
  // The emoji's last byte is generated: it completes a character the prompt started.
  std::vector<int32_t> gen = {prompt.back()};
  prompt.pop_back();
  for (int32_t t : tok->Encode(" the fox")) gen.push_back(t);
  const std::string text = StreamDecode(*tok, prompt, gen, nullptr);
  EXPECT_NE(text.find("the fox"), std::string::npos) << text;
}

TEST(TokenizerTest, MissingFileIsNotFound) {
  auto tok = Tokenizer::Load("/nonexistent/tokenizer.model");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kNotFound);
  EXPECT_NE(tok.status().message().find("/nonexistent/tokenizer.model"), std::string::npos);
}

TEST(TokenizerTest, CorruptFileFailsWithAClearMessage) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("inferd_corrupt_tok_" + std::to_string(::getpid()) + ".model");
  std::ofstream(path) << "this is not a sentencepiece model";
  auto tok = Tokenizer::Load(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tok.status().message().find("not a sentencepiece model"), std::string::npos)
      << tok.status().message();
  EXPECT_NE(tok.status().message().find(path.string()), std::string::npos);
}

TEST(TokenizerTest, TruncatedModelFails) {
  std::ifstream in(testing::TestTokenizerPath(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto path = std::filesystem::temp_directory_path() /
                    ("inferd_trunc_tok_" + std::to_string(::getpid()) + ".model");
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  auto tok = Tokenizer::Load(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd::gen
