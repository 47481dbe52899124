// SentencePieceModel against libsentencepiece itself, token for token, through Debian's
// spm_encode/spm_decode/spm_export_vocab (a test process must not load libsentencepiece next to
// libprotobuf either).
#include "generation/sentencepiece_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

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
      "\ttab and more",
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
    std::replace(t.begin(), t.end(), '\n', ' ');  // the tools read one text per line
    texts.push_back(t);
  }
  return texts;
}

// One line per text / id sequence in, one line out.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<int32_t> ParseIds(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// Runs `tool --model=... <flags>` on `lines` (one per line); returns its output lines.
std::vector<std::string> RunSpm(const std::string& tool, const std::filesystem::path& model,
                                const std::string& flags, const std::vector<std::string>& lines) {
  const std::filesystem::path in = testing::ScratchDir() / "spm_in.txt";
  const std::filesystem::path out = testing::ScratchDir() / "spm_out.txt";
  {
    std::ofstream f(in, std::ios::binary);
    for (const std::string& l : lines) f << l << "\n";
  }
  testing::RunCommand(
      tool + " --model='" + model.string() + "' " + flags + " < '" + in.string() + "'",
      out.string());
  return Lines(ReadFile(out));
}

class SentencePieceModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SentencePieceModelTest, MatchesLibsentencepiece) {
  const std::filesystem::path path = testing::TrainTestTokenizer(GetParam());
  auto model = SentencePieceModel::Parse(ReadFile(path));
  ASSERT_TRUE(model.ok()) << model.status().ToString();

  const std::vector<std::string> vocab = RunSpm("spm_export_vocab", path, "", {});
  ASSERT_EQ(model->vocab_size(), static_cast<int>(vocab.size()));
  auto id_of = [&](const std::string& piece) {
    for (size_t i = 0; i < vocab.size(); ++i) {
      if (vocab[i].substr(0, vocab[i].find('\t')) == piece) return static_cast<int>(i);
    }
    return -1;
  };
  EXPECT_EQ(model->bos_id(), id_of("<s>"));
  EXPECT_EQ(model->eos_id(), id_of("</s>"));
  EXPECT_EQ(model->unk_id(), id_of("<unk>"));

  const std::vector<std::string> texts = Texts();
  const std::vector<std::string> encoded = RunSpm("spm_encode", path, "--output_format=id", texts);
  ASSERT_EQ(encoded.size(), texts.size());
  std::vector<std::string> id_lines;
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(model->Encode(texts[i]), ParseIds(encoded[i])) << "[" << texts[i] << "]";
    id_lines.push_back(encoded[i]);
  }
  // Arbitrary id sequences (control, byte and unknown pieces anywhere), as a model generates;
  // no byte piece of a line break (the tools work line by line).
  const int newline = id_of("<0x0A>"), cr = id_of("<0x0D>");
  uint64_t r = 5;
  for (int i = 0; i < 300; ++i) {
    std::string line;
    for (int j = 0; j < 1 + i % 12; ++j) {
      int id;
      do {
        r = testing::Mix64(r);
        id = static_cast<int>(r % vocab.size());
      } while (id == newline || id == cr);
      line += std::to_string(id) + " ";
    }
    id_lines.push_back(line);
  }
  const std::vector<std::string> decoded =
      RunSpm("spm_decode", path, "--input_format=id", id_lines);
  ASSERT_EQ(decoded.size(), id_lines.size());
  for (size_t i = 0; i < id_lines.size(); ++i) {
    EXPECT_EQ(model->Decode(ParseIds(id_lines[i])), decoded[i]) << id_lines[i];
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
