// SentencePieceModel against libsentencepiece itself (this test binary links no libprotobuf, so
// the two can share it), token for token.
#include "generation/sentencepiece_model.h"

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <fstream>

#include "generation/test_util.h"

namespace inferd::gen {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> Texts() {
  std::vector<std::string> texts = {
      "",
      " ",
      "the quick brown fox jumps over the lazy dog",
      "  leading and  double   spaces and trailing  ",
      "Elizabeth said to Darcy, \"pride and prejudice!\"",
      "café naïve 日本 🦊 € ✓",
      "unseen: xyzzy QQQ zzz 12345",
      "a",
      "\ttab\nnewline",
      "thehouseofcardsisnot",
  };
  // Lines of the training text and shuffled word soup.
  const std::string corpus = testing::TokenizerTrainingText();
  for (size_t pos = 0, n = 0; n < 30; ++n) {
    const size_t end = corpus.find('\n', pos);
    texts.push_back(corpus.substr(pos, end - pos));
    pos = end + 1;
  }
  uint64_t r = 99;
  for (int i = 0; i < 30; ++i) {
    std::string t;
    for (int j = 0; j < 8; ++j) {
      r = testing::Mix64(r);
      t += corpus.substr(r % (corpus.size() - 12), 1 + r % 11);
    }
    texts.push_back(t);
  }
  return texts;
}

class SentencePieceModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SentencePieceModelTest, MatchesLibsentencepiece) {
  const std::filesystem::path path = testing::TrainTestTokenizer(GetParam());
  sentencepiece::SentencePieceProcessor reference;
  ASSERT_TRUE(reference.Load(path.string()).ok());
  auto model = SentencePieceModel::Parse(ReadFile(path));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->vocab_size(), reference.GetPieceSize());
  EXPECT_EQ(model->bos_id(), reference.bos_id());
  EXPECT_EQ(model->eos_id(), reference.eos_id());
  EXPECT_EQ(model->unk_id(), reference.unk_id());
  for (const std::string& text : Texts()) {
    std::vector<int> want = reference.EncodeAsIds(text);
    std::vector<int32_t> got = model->Encode(text);
    EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.end())) << "[" << text << "]";
    EXPECT_EQ(model->Decode(got), reference.DecodeIds(want)) << "[" << text << "]";
  }
  // Arbitrary id sequences (control, byte and unknown pieces anywhere), as a model generates.
  uint64_t r = 5;
  for (int i = 0; i < 300; ++i) {
    std::vector<int> ids;
    for (int j = 0; j < 1 + i % 12; ++j) {
      r = testing::Mix64(r);
      ids.push_back(static_cast<int>(r % reference.GetPieceSize()));
    }
    EXPECT_EQ(model->Decode(std::vector<int32_t>(ids.begin(), ids.end())),
              reference.DecodeIds(ids));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, SentencePieceModelTest,
    ::testing::Values(
        "--model_type=bpe --normalization_rule_name=identity --remove_extra_whitespaces=false",
        "--model_type=bpe --normalization_rule_name=identity",
        "--model_type=unigram --normalization_rule_name=identity",
        "--model_type=unigram --normalization_rule_name=identity --add_dummy_prefix=false"));

TEST(SentencePieceModelParseTest, RejectsWhatItCannotReadWithAReason) {
  auto nfkc = SentencePieceModel::Parse(ReadFile(testing::TrainTestTokenizer("--model_type=bpe")));
  ASSERT_FALSE(nfkc.ok());
  EXPECT_NE(nfkc.status().message().find("normalizer 'nmt_nfkc' is not supported"),
            std::string::npos)
      << nfkc.status().message();
  auto garbage = SentencePieceModel::Parse("\xff\xff\xff");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("malformed"), std::string::npos);
  auto empty = SentencePieceModel::Parse("");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no pieces"), std::string::npos);
}

}  // namespace
}  // namespace inferd::gen
