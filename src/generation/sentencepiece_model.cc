#include "generation/sentencepiece_model.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <queue>

namespace inferd::gen {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, sentencepiece's space
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr float kUnkPenalty = 10.0f;                       // unigram: unknown = min score - 10

// The protobuf wire format, as far as a ModelProto needs it.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())), end_(p_ + bytes.size()) {}
  bool done() const { return p_ == end_; }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = *p_++;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool Tag(uint32_t* field, uint32_t* wire) {
    uint64_t t;
    if (!Varint(&t) || (t >> 3) == 0) return false;
    *field = static_cast<uint32_t>(t >> 3);
    *wire = static_cast<uint32_t>(t & 7);
    return true;
  }
  bool Bytes(std::string_view* out) {
    uint64_t n;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *out = {reinterpret_cast<const char*>(p_), static_cast<size_t>(n)};
    p_ += n;
    return true;
  }
  bool Fixed32(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    std::memcpy(v, p_, 4);
    p_ += 4;
    return true;
  }
  bool Skip(uint32_t wire) {
    uint64_t v;
    uint32_t f;
    std::string_view s;
    switch (wire) {
      case 0:
        return Varint(&v);
      case 1:
        if (end_ - p_ < 8) return false;
        p_ += 8;
        return true;
      case 2:
        return Bytes(&s);
      case 5:
        return Fixed32(&f);
      default:
        return false;  // groups (3, 4) are not used by ModelProto
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

struct Specs {
  int model_type = 1;
  bool byte_fallback = false;
  std::string unk_surface = " \xE2\x81\x87 ";
  std::string bos_piece = "<s>", eos_piece = "</s>";
  std::string normalizer_name;
  bool has_charsmap = false;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

// Calls on_field(field, wire, reader) for each field of `bytes`; false on malformed input.
template <typename F>
bool ForEachField(std::string_view bytes, F on_field) {
  WireReader r(bytes);
  while (!r.done()) {
    uint32_t field, wire;
    if (!r.Tag(&field, &wire) || !on_field(field, wire, r)) return false;
  }
  return true;
}

bool ReadBool(WireReader& r, uint32_t wire, bool* out) {
  uint64_t v;
  if (wire != 0 || !r.Varint(&v)) return false;
  *out = v != 0;
  return true;
}

bool ReadString(WireReader& r, uint32_t wire, std::string* out) {
  std::string_view s;
  if (wire != 2 || !r.Bytes(&s)) return false;
  out->assign(s);
  return true;
}

bool ParseTrainerSpec(std::string_view bytes, Specs* s) {
  return ForEachField(bytes, [s](uint32_t field, uint32_t wire, WireReader& r) {
    uint64_t v;
    switch (field) {
      case 3:
        if (wire != 0 || !r.Varint(&v)) return false;
        s->model_type = static_cast<int>(v);
        return true;
      case 35:
        return ReadBool(r, wire, &s->byte_fallback);
      case 44:
        return ReadString(r, wire, &s->unk_surface);
      case 46:
        return ReadString(r, wire, &s->bos_piece);
      case 47:
        return ReadString(r, wire, &s->eos_piece);
      default:
        return r.Skip(wire);
    }
  });
}

bool ParseNormalizerSpec(std::string_view bytes, Specs* s) {
  return ForEachField(bytes, [s](uint32_t field, uint32_t wire, WireReader& r) {
    std::string_view b;
    switch (field) {
      case 1:
        return ReadString(r, wire, &s->normalizer_name);
      case 2:
        if (wire != 2 || !r.Bytes(&b)) return false;
        s->has_charsmap = !b.empty();
        return true;
      case 3:
        return ReadBool(r, wire, &s->add_dummy_prefix);
      case 4:
        return ReadBool(r, wire, &s->remove_extra_whitespaces);
      case 5:
        return ReadBool(r, wire, &s->escape_whitespaces);
      default:
        return r.Skip(wire);
    }
  });
}

// Byte length of the well-formed UTF-8 character at s[i], or 0 if there is none (a stray or
// overlong byte, a surrogate, past U+10FFFF, a truncated sequence), as sentencepiece's DecodeUTF8.
size_t Utf8Length(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return i + k < s.size() ? static_cast<uint8_t>(s[i + k]) : 0; };
  auto cont = [&](size_t k, uint8_t lo = 0x80, uint8_t hi = 0xbf) {
    return at(k) >= lo && at(k) <= hi;
  };
  const uint8_t c = at(0);
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const bool second = c == 0xe0 ? cont(1, 0xa0) : c == 0xed ? cont(1, 0x80, 0x9f) : cont(1);
    return second && cont(2) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const bool second = c == 0xf0 ? cont(1, 0x90) : c == 0xf4 ? cont(1, 0x80, 0x8f) : cont(1);
    return second && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

// Appends `bytes` as text: well-formed characters as they are, every other byte as U+FFFD (the
// normalizer does the same to input text, the decoder to byte pieces).
void AppendValidUtf8(std::string_view bytes, std::string* out) {
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = Utf8Length(bytes, i);
    if (n == 0) {
      out->append(kReplacement);
      ++i;
    } else {
      out->append(bytes.substr(i, n));
      i += n;
    }
  }
}

}  // namespace

StatusOr<SentencePieceModel> SentencePieceModel::Parse(std::string_view bytes) {
  SentencePieceModel m;
  Specs specs;
  bool ok = ForEachField(bytes, [&](uint32_t field, uint32_t wire, WireReader& r) {
    std::string_view sub;
    if (field >= 1 && field <= 3) {
      if (wire != 2 || !r.Bytes(&sub)) return false;
    }
    if (field == 1) {
      Piece piece;
      return ForEachField(sub,
                          [&](uint32_t f, uint32_t w, WireReader& pr) {
                            uint32_t bits;
                            uint64_t v;
                            switch (f) {
                              case 1:
                                return ReadString(pr, w, &piece.text);
                              case 2:
                                if (w != 5 || !pr.Fixed32(&bits)) return false;
                                std::memcpy(&piece.score, &bits, 4);
                                return true;
                              case 3:
                                if (w != 0 || !pr.Varint(&v)) return false;
                                piece.type = static_cast<PieceType>(v);
                                return true;
                              default:
                                return pr.Skip(w);
                            }
                          }) &&
             (m.pieces_.push_back(std::move(piece)), true);
    }
    if (field == 2) return ParseTrainerSpec(sub, &specs);
    if (field == 3) return ParseNormalizerSpec(sub, &specs);
    return r.Skip(wire);
  });
  if (!ok) return InvalidArgument("not a sentencepiece model (malformed protobuf)");
  if (m.pieces_.empty()) return InvalidArgument("the sentencepiece model has no pieces");
  if (specs.model_type != 1 && specs.model_type != 2) {
    return InvalidArgument("sentencepiece model type {} is not supported (only unigram and BPE)",
                           specs.model_type);
  }
  if (specs.has_charsmap) {
    return InvalidArgument(
        "sentencepiece normalizer '{}' is not supported (only identity: train "
        "with normalization_rule_name=identity)",
        specs.normalizer_name);
  }
  m.type_ = static_cast<Type>(specs.model_type);
  m.byte_fallback_ = specs.byte_fallback;
  m.add_dummy_prefix_ = specs.add_dummy_prefix;
  m.remove_extra_whitespaces_ = specs.remove_extra_whitespaces;
  m.escape_whitespaces_ = specs.escape_whitespaces;
  m.unk_surface_ = specs.unk_surface;
  std::fill(std::begin(m.byte_ids_), std::end(m.byte_ids_), -1);
  m.unk_id_ = -1;
  m.min_score_ = std::numeric_limits<float>::max();
  for (int32_t id = 0; id < m.vocab_size(); ++id) {
    Piece& p = m.pieces_[id];
    switch (p.type) {
      case PieceType::kNormal:
      case PieceType::kUserDefined:
      case PieceType::kUnused:
        m.index_.emplace(p.text, id);
        m.max_piece_bytes_ = std::max(m.max_piece_bytes_, p.text.size());
        if (p.type == PieceType::kNormal) m.min_score_ = std::min(m.min_score_, p.score);
        break;
      case PieceType::kUnknown:
        if (m.unk_id_ < 0) m.unk_id_ = id;
        break;
      case PieceType::kControl:
        if (p.text == specs.bos_piece) m.bos_id_ = id;
        if (p.text == specs.eos_piece) m.eos_id_ = id;
        break;
      case PieceType::kByte:
        if (p.text.size() == 6 && p.text.starts_with("<0x") && p.text.back() == '>') {
          const int byte = std::stoi(p.text.substr(3, 2), nullptr, 16);
          m.byte_ids_[byte] = id;
          p.byte = byte;
        }
        break;
      default:
        return InvalidArgument("sentencepiece piece {} has unknown type {}", id,
                               static_cast<int>(p.type));
    }
  }
  if (m.unk_id_ < 0) return InvalidArgument("the sentencepiece model has no unknown piece");
  if (m.min_score_ == std::numeric_limits<float>::max()) m.min_score_ = 0;
  return m;
}

std::string SentencePieceModel::Normalize(std::string_view text) const {
  const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : std::string_view(" ");
  size_t i = 0;
  if (remove_extra_whitespaces_) {
    while (i < text.size() && text[i] == ' ') ++i;
  }
  std::string out;
  if (i == text.size()) return out;
  if (add_dummy_prefix_) out.append(space);
  bool prev_space = add_dummy_prefix_;
  while (i < text.size()) {
    if (text[i] == ' ') {
      if (!remove_extra_whitespaces_ || !prev_space) out.append(space);
      prev_space = true;
      ++i;
      continue;
    }
    const size_t n = Utf8Length(text, i);
    out.append(n == 0 ? kReplacement : text.substr(i, n));
    i += std::max<size_t>(n, 1);
    prev_space = false;
  }
  if (remove_extra_whitespaces_) {
    while (out.size() >= space.size() && out.ends_with(space))
      out.resize(out.size() - space.size());
  }
  return out;
}

int32_t SentencePieceModel::Find(std::string_view piece) const {
  auto it = index_.find(std::string(piece));
  return it == index_.end() ? -1 : it->second;
}

std::vector<std::string_view> SentencePieceModel::SegmentBpe(std::string_view s) const {
  struct Symbol {
    int prev, next;
    std::string_view text;
  };
  struct Pair {
    int left, right;
    float score;
    size_t size;
  };
  // Highest score first; on ties the leftmost pair (sentencepiece's bpe_model.cc).
  auto lower = [](const Pair& a, const Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower)> agenda(lower);
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::max<size_t>(1, Utf8Length(s, i));
    const int idx = static_cast<int>(symbols.size());
    symbols.push_back({idx - 1, idx + 1, s.substr(i, n)});
    i += n;
  }
  if (symbols.empty()) return {};
  symbols.back().next = -1;
  auto add_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view joined(symbols[left].text.data(),
                                  symbols[left].text.size() + symbols[right].text.size());
    const int32_t id = Find(joined);
    if (id >= 0) agenda.push({left, right, pieces_[id].score, joined.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i)
    add_pair(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    // Stale: one side was merged into something else since the pair was queued.
    if (left.text.empty() || right.text.empty() ||
        left.text.size() + right.text.size() != top.size) {
      continue;
    }
    left.text = std::string_view(left.text.data(), top.size);
    right.text = {};
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    add_pair(left.prev, top.left);
    add_pair(top.left, left.next);
  }
  std::vector<std::string_view> out;
  for (int i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].text);
  return out;
}

std::vector<std::string_view> SentencePieceModel::SegmentUnigram(std::string_view s) const {
  struct Best {
    float score = 0;
    int64_t start = -1;  // -1: not reached
  };
  std::vector<Best> best(s.size() + 1);
  best[0].start = 0;
  const float unk_score = min_score_ - kUnkPenalty;
  for (size_t start = 0; start < s.size();) {
    const size_t mblen = std::max<size_t>(1, Utf8Length(s, start));
    const float base = best[start].score;
    bool single = false;
    for (size_t len = 1; len <= max_piece_bytes_ && start + len <= s.size(); ++len) {
      const int32_t id = Find(s.substr(start, len));
      if (id < 0 || pieces_[id].type == PieceType::kUnused) continue;
      const float score =
          base + (pieces_[id].type == PieceType::kUserDefined ? 0.0f : pieces_[id].score);
      Best& target = best[start + len];
      if (target.start < 0 || score > target.score) target = {score, static_cast<int64_t>(start)};
      if (len == mblen) single = true;
    }
    if (!single) {
      Best& target = best[start + mblen];
      const float score = base + unk_score;
      if (target.start < 0 || score > target.score) target = {score, static_cast<int64_t>(start)};
    }
    start += mblen;
  }
  std::vector<std::string_view> out;
  for (size_t end = s.size(); end > 0;) {
    const size_t start = static_cast<size_t>(best[end].start);
    out.push_back(s.substr(start, end - start));
    end = start;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void SentencePieceModel::AppendIds(std::string_view piece, std::vector<int32_t>* ids) const {
  const int32_t id = Find(piece);
  if (id >= 0 && pieces_[id].type != PieceType::kUnused) {
    ids->push_back(id);
    return;
  }
  if (byte_fallback_) {
    bool all = true;
    for (char c : piece) all &= byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (all) {
      for (char c : piece) ids->push_back(byte_ids_[static_cast<uint8_t>(c)]);
      return;
    }
  }
  ids->push_back(unk_id_);
}

std::vector<int32_t> SentencePieceModel::Encode(std::string_view text) const {
  const std::string normalized = Normalize(text);
  std::vector<int32_t> ids;
  const std::vector<std::string_view> pieces =
      type_ == Type::kBpe ? SegmentBpe(normalized) : SegmentUnigram(normalized);
  for (std::string_view piece : pieces) AppendIds(piece, &ids);
  return ids;
}

std::string SentencePieceModel::Decode(std::span<const int32_t> ids) const {
  std::string out, bytes;
  bool at_start = true;  // the dummy prefix is removed from the first piece only
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    const Piece& p = pieces_[id];
    if (p.type == PieceType::kByte) {
      if (p.byte >= 0) bytes.push_back(static_cast<char>(p.byte));
      continue;
    }
    if (!bytes.empty()) {
      AppendValidUtf8(bytes, &out);
      bytes.clear();
      at_start = false;
    }
    if (p.type == PieceType::kControl) continue;
    std::string_view text = p.type == PieceType::kUnknown ? std::string_view(unk_surface_) : p.text;
    // libsentencepiece: with remove_extra_whitespaces every leading space goes until some text
    // is out; otherwise only the first piece's dummy prefix.
    if (remove_extra_whitespaces_ && out.empty()) {
      while (text.starts_with(kSpaceSymbol)) text.remove_prefix(kSpaceSymbol.size());
    } else if (at_start && add_dummy_prefix_ && text.starts_with(kSpaceSymbol)) {
      text.remove_prefix(kSpaceSymbol.size());
    }
    at_start = false;
    for (size_t i = 0; i < text.size();) {
      if (text.substr(i, kSpaceSymbol.size()) == kSpaceSymbol) {
        out.push_back(' ');
        i += kSpaceSymbol.size();
      } else {
        out.push_back(text[i++]);
      }
    }
  }
  if (!bytes.empty()) AppendValidUtf8(bytes, &out);
  return out;
}

std::optional<std::string> SentencePieceModel::PieceBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return std::nullopt;
  const Piece& p = pieces_[id];
  if (p.type == PieceType::kByte) {
    if (p.byte < 0) return std::nullopt;
    return std::string(1, static_cast<char>(p.byte));
  }
  if (p.type != PieceType::kNormal && p.type != PieceType::kUserDefined) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < p.text.size();) {
    if (p.text.compare(i, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
      out.push_back(' ');
      i += kSpaceSymbol.size();
    } else {
      out.push_back(p.text[i++]);
    }
  }
  return out;
}

}  // namespace inferd::gen
