#include "generation/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <system_error>

namespace inferd::gen {

namespace {
// U+FFFD as UTF-8: sentencepiece's output for bytes that do not (yet) form a character.
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool EndsWithReplacement(std::string_view s) {
  return s.size() >= kReplacement.size() &&
         s.substr(s.size() - kReplacement.size()) == kReplacement;
}
}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
    : sp_(std::move(sp)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound("tokenizer {}: no such file", path.string());
  }
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->Load(path.string());
  if (!status.ok()) {
    return InvalidArgument("tokenizer {}: not a valid sentencepiece model ({})", path.string(),
                           status.ToString());
  }
  if (sp->GetPieceSize() <= 0) {
    return InvalidArgument("tokenizer {}: the sentencepiece model has no pieces", path.string());
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(sp)));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<int> ids;
  if (!sp_->Encode(text, &ids).ok()) return {};
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::vector<int> valid;
  valid.reserve(ids.size());
  const int n = vocab_size();
  for (int32_t id : ids) {
    if (id >= 0 && id < n) valid.push_back(id);
  }
  std::string text;
  if (!sp_->Decode(valid, &text).ok()) return {};
  return text;
}

int Tokenizer::bos_id() const { return sp_->bos_id(); }
int Tokenizer::eos_id() const { return sp_->eos_id(); }
int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

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
