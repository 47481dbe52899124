// SentencePieceModel: reads a sentencepiece `.model` file and encodes/decodes with it, without
// libsentencepiece.
//
// Why not libsentencepiece: Debian's libsentencepiece0 carries its own copy of protobuf 3.14 and
// exports its symbols; in a process that also loads libprotobuf 3.21 (libonnx, the model
// repository) the two interpose and the process dies at start-up (a segfault in protobuf's static
// initialisation, or its "compiled against version 3.14.0" check, depending on link order). So
// the inferd library reads the model's protobuf wire format itself (pieces, trainer and
// normalizer specs) and implements the two segmentation algorithms; the unit tests, which link no
// libprotobuf, check it token for token against libsentencepiece.
//
// Supported: BPE and unigram models, byte fallback, the identity normalizer (no precompiled
// character map: what scripts/generation trains) with add_dummy_prefix, remove_extra_whitespaces
// and escape_whitespaces. A model needing anything else (an NFKC character map, WORD/CHAR models)
// fails to load with a message that says so. Thread-safe after Parse (const).
// Checked against libsentencepiece 0.1.97 (sentencepiece_model_test.cc): BPE token for token on
// thousands of texts; unigram too, except that a segmentation tie between equal-score paths can
// be broken differently (seen once in 3,000 random strings without a dummy prefix).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace inferd::gen {

class SentencePieceModel {
 public:
  enum class Type { kUnigram = 1, kBpe = 2 };
  enum class PieceType {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6
  };

  // INVALID_ARGUMENT with the reason for bytes that are not a supported sentencepiece model.
  static StatusOr<SentencePieceModel> Parse(std::string_view bytes);

  std::vector<int32_t> Encode(std::string_view text) const;
  // Ids outside the vocabulary are skipped; control pieces decode to nothing, invalid UTF-8 from
  // byte pieces to U+FFFD per byte (as libsentencepiece).
  std::string Decode(std::span<const int32_t> ids) const;

  // The bytes piece `id` adds in the middle of a decoded text (U+2581 as a space, a <0xNN> piece
  // as its byte); nullopt for control, unknown and unused pieces and ids outside the vocabulary.
  // Constrained output (constrained/token_index.h) walks these through its automaton.
  std::optional<std::string> PieceBytes(int32_t id) const;

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  int bos_id() const { return bos_id_; }
  int eos_id() const { return eos_id_; }
  int unk_id() const { return unk_id_; }

 private:
  struct Piece {
    std::string text;
    float score = 0;
    PieceType type = PieceType::kNormal;
    int byte = -1;  // the byte of a <0xNN> piece
  };

  std::string Normalize(std::string_view text) const;
  // Segments the normalized text into pieces (strings); unknown ones are resolved by the caller.
  std::vector<std::string_view> SegmentBpe(std::string_view normalized) const;
  std::vector<std::string_view> SegmentUnigram(std::string_view normalized) const;
  void AppendIds(std::string_view piece, std::vector<int32_t>* ids) const;
  int32_t Find(std::string_view piece) const;  // a normal or user-defined piece, else -1

  Type type_ = Type::kUnigram;
  std::vector<Piece> pieces_;
  std::unordered_map<std::string, int32_t> index_;  // normal and user-defined pieces
  int32_t byte_ids_[256];                           // <0xNN> pieces, -1 if absent
  size_t max_piece_bytes_ = 1;
  float min_score_ = 0;
  bool byte_fallback_ = false;
  std::string unk_surface_;
  bool add_dummy_prefix_ = true, remove_extra_whitespaces_ = true, escape_whitespaces_ = true;
  int unk_id_ = 0, bos_id_ = -1, eos_id_ = -1;
};

}  // namespace inferd::gen
