// Tokenizer: a sentencepiece model (tokenizer.model next to the decoder), and
// IncrementalDecoder, which turns a stream of generated token ids into a stream of text.
//
// Why incremental decoding is not "decode each token": sentencepiece marks a word's leading space
// with U+2581 and drops it at the start of a decoded string, so Decode({t}) of a mid-text token
// loses its space; and with byte fallback one character may span several tokens (<0xE2><0x80>...),
// so a prefix of them decodes to U+FFFD replacement characters. IncrementalDecoder decodes a
// window that starts a few tokens before the new ones (inside the prompt at first) and emits only
// the text past the window's old text, holding it back while it ends in an incomplete character.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "constrained/token_index.h"
#include "generation/sentencepiece_model.h"

namespace inferd::gen {

// A sentencepiece model read by SentencePieceModel (sentencepiece_model.h explains why not
// libsentencepiece).
class Tokenizer {
 public:
  // NOT_FOUND when `path` does not exist; INVALID_ARGUMENT naming the file and the reason when it
  // is not a (supported) sentencepiece model.
  static StatusOr<std::unique_ptr<Tokenizer>> Load(const std::filesystem::path& path);

  // Thread-safe (const).
  std::vector<int32_t> Encode(std::string_view text) const;
  // Ids outside [0, vocab_size()) are skipped.
  std::string Decode(std::span<const int32_t> ids) const;
  // What token `id` appends mid-text (sentencepiece_model.h PieceBytes); nullopt for control,
  // unknown and unused pieces.
  std::optional<std::string> TokenBytes(int32_t id) const { return model_.PieceBytes(id); }
  int bos_id() const;
  int eos_id() const;
  int vocab_size() const;

 private:
  explicit Tokenizer(SentencePieceModel model) : model_(std::move(model)) {}
  const SentencePieceModel model_;
};

// The bytes each of a model's `vocab_size` tokens adds to the text, for constrained output
// (constrained/token_index.h); ids past the tokenizer's pieces, control and unknown pieces add
// nothing, so a constraint never allows them. `eos` < 0: none.
std::shared_ptr<const constrained::Vocabulary> ConstraintVocabulary(const Tokenizer& tokenizer,
                                                                    int vocab_size, int32_t eos);

// Stream decoding of one sequence's generated tokens. Not thread-safe; one per sequence.
class IncrementalDecoder {
 public:
  // `context`: the prompt (its last few tokens are used, so the first generated token keeps its
  // leading space). The tokenizer must outlive the decoder.
  IncrementalDecoder(const Tokenizer& tokenizer, std::span<const int32_t> context);

  // Adds a generated token; returns the text that became final (possibly empty).
  std::string Add(int32_t token);
  // Returns whatever is still held back (an incomplete character at the very end).
  std::string Flush();

 private:
  static constexpr int kContextTokens = 5;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> tokens_;  // context tail + generated
  size_t prefix_offset_ = 0;     // the decoding window starts here
  size_t read_offset_ = 0;       // text of [prefix_offset_, read_offset_) was already emitted
};

}  // namespace inferd::gen
