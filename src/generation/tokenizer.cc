#include "generation/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <system_error>

namespace inferd::gen {

namespace {
// U+FFFD as UTF-8: sentencepiece's output for bytes that do not (yet) form a character.
constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

bool EndsWithReplacement(std::string_view s) {
  return s.size() >= kUtf8Replacement.size() &&
         s.substr(s.size() - kUtf8Replacement.size()) == kUtf8Replacement;
}
}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound("tokenizer {}: no such file", path.string());
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return InvalidArgument("tokenizer {}: cannot read", path.string());
  StatusOr<SentencePieceModel> model = SentencePieceModel::Parse(bytes);
  if (!model.ok()) return model.status().WithContext("tokenizer " + path.string());
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(model).value()));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const { return model_.Encode(text); }

std::string Tokenizer::Decode(std::span<const int32_t> ids) const { return model_.Decode(ids); }

std::shared_ptr<const constrained::Vocabulary> ConstraintVocabulary(const Tokenizer& tokenizer,
                                                                    int vocab_size, int32_t eos) {
  std::vector<std::optional<std::string>> bytes(std::max(vocab_size, 0));
  for (int id = 0; id < vocab_size && id < tokenizer.vocab_size(); ++id) {
    bytes[id] = tokenizer.TokenBytes(id);
  }
  return std::make_shared<constrained::Vocabulary>(bytes, eos);
}

int Tokenizer::bos_id() const { return model_.bos_id(); }
int Tokenizer::eos_id() const { return model_.eos_id(); }
int Tokenizer::vocab_size() const { return model_.vocab_size(); }

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, std::span<const int32_t> context)
    : tokenizer_(tokenizer) {
  const size_t n = std::min<size_t>(context.size(), kContextTokens);
  tokens_.assign(context.end() - static_cast<std::ptrdiff_t>(n), context.end());
  // A prompt ending inside a character cannot anchor the window: the generated text would never
  // extend its decoded text. Start without context then (the first space may be dropped).
  if (EndsWithReplacement(tokenizer_.Decode(tokens_))) tokens_.clear();
  read_offset_ = tokens_.size();
}

std::string IncrementalDecoder::Add(int32_t token) {
  tokens_.push_back(token);
  std::span<const int32_t> all(tokens_);
  const std::string old_text =
      tokenizer_.Decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_));
  const std::string new_text = tokenizer_.Decode(all.subspan(prefix_offset_));
  // Hold back while the window ends in an incomplete character, or while its text is not (yet)
  // an extension of what was emitted.
  if (new_text.size() <= old_text.size() || EndsWithReplacement(new_text) ||
      new_text.compare(0, old_text.size(), old_text) != 0) {
    return {};
  }
  std::string delta = new_text.substr(old_text.size());
  prefix_offset_ = read_offset_;
  read_offset_ = tokens_.size();
  return delta;
}

std::string IncrementalDecoder::Flush() {
  if (read_offset_ == tokens_.size()) return {};
  std::span<const int32_t> all(tokens_);
  const std::string old_text =
      tokenizer_.Decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_));
  const std::string new_text = tokenizer_.Decode(all.subspan(prefix_offset_));
  read_offset_ = tokens_.size();
  if (new_text.size() <= old_text.size() || new_text.compare(0, old_text.size(), old_text) != 0) {
    return {};
  }
  return new_text.substr(old_text.size());
}

}  // namespace inferd::gen
