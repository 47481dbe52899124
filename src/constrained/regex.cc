#include "constrained/regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

namespace inferd::constrained {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // code points, inclusive

// Sorted, merged, surrogates removed (they have no UTF-8 encoding).
Ranges Normalize(Ranges r) {
  Ranges split;
  for (auto [lo, hi] : r) {
    if (lo <= 0xDFFF && hi >= 0xD800) {
      if (lo < 0xD800) split.emplace_back(lo, 0xD7FF);
      if (hi > 0xDFFF) split.emplace_back(0xE000, hi);
    } else {
      split.emplace_back(lo, hi);
    }
  }
  std::sort(split.begin(), split.end());
  Ranges out;
  for (auto [lo, hi] : split) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges Complement(const Ranges& r) {
  Ranges n = Normalize(r), out;
  uint32_t next = 0;
  for (auto [lo, hi] : n) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return Normalize(out);
}

struct Node {
  enum Kind { kEmpty, kClass, kConcat, kAlt, kRepeat } kind = kEmpty;
  Ranges ranges;               // kClass
  std::vector<Node> children;  // kConcat, kAlt, kRepeat (one)
  int min = 0, max = -1;       // kRepeat; max -1 = unbounded
};

Node ClassNode(Ranges r) {
  Node n;
  n.kind = Node::kClass;
  n.ranges = Normalize(std::move(r));
  return n;
}

Ranges Digit() { return {{'0', '9'}}; }
Ranges Word() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges Space() { return {{'\t', '\r'}, {' ', ' '}}; }

// Recursive-descent parser over the pattern's bytes (UTF-8 decoded for literals).
class Parser {
 public:
  Parser(std::string_view p, const DfaOptions& o) : p_(p), options_(o) {}

  StatusOr<Node> Parse() {
    if (Peek('^')) ++pos_;
    Node n = ParseAlt();
    if (error_.ok() && pos_ < p_.size()) Fail("unmatched ')'");
    if (!error_.ok()) return error_;
    return n;
  }

 private:
  bool Peek(char c) const { return pos_ < p_.size() && p_[pos_] == c; }
  bool AtEnd() const { return pos_ >= p_.size(); }
  void Fail(std::string_view what) {
    if (error_.ok()) {
      error_ = InvalidArgument("invalid regex: {} at offset {}", what, std::min(pos_, p_.size()));
    }
  }

  Node ParseAlt() {
    Node first = ParseConcat();
    if (!Peek('|')) return first;
    Node alt;
    alt.kind = Node::kAlt;
    alt.children.push_back(std::move(first));
    while (error_.ok() && Peek('|')) {
      ++pos_;
      alt.children.push_back(ParseConcat());
    }
    return alt;
  }

  Node ParseConcat() {
    Node cat;
    cat.kind = Node::kConcat;
    while (error_.ok() && !AtEnd() && !Peek('|') && !Peek(')')) {
      if (Peek('$') && pos_ + 1 == p_.size() && depth_ == 0) {
        ++pos_;  // a trailing '$': the match is anchored anyway
        break;
      }
      cat.children.push_back(ParseRepeat());
    }
    return cat;
  }

  Node ParseRepeat() {
    Node atom = ParseAtom();
    bool quantified = false;
    while (error_.ok() && !AtEnd()) {
      int min = 0, max = -1;
      const char c = p_[pos_];
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : -1;
      } else if (c == '{' && ParseCount(&min, &max)) {
      } else {
        break;
      }
      if (quantified) {
        Fail("multiple repeat");
        break;
      }
      quantified = true;
      if (Peek('?')) ++pos_;  // lazy: no meaning for a full match
      Node rep;
      rep.kind = Node::kRepeat;
      rep.min = min;
      rep.max = max;
      rep.children.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  // {n} {n,} {n,m} at pos_; false (pos_ unchanged) if it is not one (then '{' is a literal).
  bool ParseCount(int* min, int* max) {
    size_t i = pos_ + 1;
    auto number = [&](int* out) {
      const size_t start = i;
      int64_t v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9' && v <= options_.max_repeat) {
        v = v * 10 + (p_[i++] - '0');
      }
      *out = static_cast<int>(v);
      return i > start;
    };
    if (!number(min)) return false;
    *max = *min;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(max)) *max = -1;
    }
    if (i >= p_.size() || p_[i] != '}') return false;
    pos_ = i + 1;
    if (*min > options_.max_repeat || *max > options_.max_repeat) {
      Fail(fmt::format("a repeat count above {}", options_.max_repeat));
    } else if (*max >= 0 && *max < *min) {
      Fail("a repeat {n,m} with m < n");
    }
    return true;
  }

  Node ParseAtom() {
    const char c = p_[pos_];
    switch (c) {
      case '(':
        return ParseGroup();
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return ClassNode(Complement({{'\n', '\n'}}));
      case '\\': {
        Ranges r;
        ParseEscape(/*in_class=*/false, &r);
        return ClassNode(std::move(r));
      }
      case '*':
      case '+':
      case '?':
        Fail("nothing to repeat");
        return {};
      case '^':
        Fail("'^' is only supported at the start of the pattern");
        return {};
      case '$':
        Fail("'$' is only supported at the end of the pattern");
        return {};
      default: {
        const uint32_t cp = DecodeChar();
        return ClassNode({{cp, cp}});
      }
    }
  }

  Node ParseGroup() {
    ++pos_;
    if (Peek('?')) {
      const std::string_view rest = p_.substr(pos_);
      if (rest.starts_with("?:")) {
        pos_ += 2;
      } else if (rest.starts_with("?P<") ||
                 (rest.starts_with("?<") && rest.size() > 2 && rest[2] != '=' && rest[2] != '!')) {
        const size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos) {
          Fail("unterminated group name");
          return {};
        }
        pos_ = close + 1;
      } else {
        Fail("unsupported group (lookaround, flags and backreferences are not supported)");
        return {};
      }
    }
    ++depth_;
    Node inner = ParseAlt();
    --depth_;
    if (!Peek(')')) {
      Fail("missing ')'");
      return {};
    }
    ++pos_;
    return inner;
  }

  Node ParseClass() {
    ++pos_;
    bool negate = false;
    if (Peek('^')) {
      negate = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (error_.ok()) {
      if (AtEnd()) {
        Fail("missing ']'");
        return {};
      }
      if (Peek(']') && !first) break;
      first = false;
      if (p_.substr(pos_).starts_with("[:")) {
        Fail("POSIX character classes are not supported");
        return {};
      }
      std::optional<uint32_t> lo = ClassAtom(&r);
      if (!lo || !Peek('-') || pos_ + 1 >= p_.size() || p_[pos_ + 1] == ']') {
        if (lo) r.emplace_back(*lo, *lo);
        continue;
      }
      ++pos_;  // '-'
      std::optional<uint32_t> hi = ClassAtom(&r);
      if (!hi) {
        Fail("a range ends in a class escape");
      } else if (*hi < *lo) {
        Fail("a range out of order");
      } else {
        r.emplace_back(*lo, *hi);
      }
    }
    ++pos_;  // ']'
    return ClassNode(negate ? Complement(r) : r);
  }

  // A single character (returned) or a class escape (added to *set, nullopt returned).
  std::optional<uint32_t> ClassAtom(Ranges* set) {
    if (!Peek('\\')) return DecodeChar();
    Ranges r;
    if (ParseEscape(/*in_class=*/true, &r) && r.size() == 1 && r[0].first == r[0].second) {
      return r[0].first;
    }
    set->insert(set->end(), r.begin(), r.end());
    return std::nullopt;
  }

  // At a backslash. Fills *out; returns true when it is a single character.
  bool ParseEscape(bool in_class, Ranges* out) {
    ++pos_;
    if (AtEnd()) {
      Fail("a trailing backslash");
      return false;
    }
    const char c = p_[pos_++];
    auto single = [out](uint32_t cp) {
      out->emplace_back(cp, cp);
      return true;
    };
    if (std::string_view("dDwWsS").find(c) != std::string_view::npos) {  // class escapes
      const char lower = static_cast<char>(c | 0x20);
      Ranges r = lower == 'd' ? Digit() : lower == 'w' ? Word() : Space();
      *out = c == lower ? std::move(r) : Complement(r);
      return false;
    }
    static constexpr std::pair<char, uint32_t> kSingles[] = {{'n', '\n'}, {'t', '\t'}, {'r', '\r'},
                                                             {'f', '\f'}, {'v', '\v'}, {'0', 0}};
    for (auto [escape, cp] : kSingles) {
      if (c == escape) return single(cp);
    }
    switch (c) {
      case 'x':
        return single(Hex(2));
      case 'u':
        return single(Hex(4));
      case 'b':
        if (in_class) return single('\b');
        Fail("word boundaries (\\b) are not supported");
        return false;
      default:
        break;
    }
    if ((c >= '1' && c <= '9')) {
      Fail("backreferences are not supported");
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      --pos_;
      Fail(fmt::format("unknown escape '\\{}'", c));
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      --pos_;
      const uint32_t cp = DecodeChar();
      return single(cp);
    } else {
      return single(static_cast<unsigned char>(c));  // escaped punctuation
    }
    return false;
  }

  uint32_t Hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const char c = pos_ < p_.size() ? p_[pos_] : '\0';
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) {
        Fail(fmt::format("\\x and \\u need {} hex digits", digits));
        return 0;
      }
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v >= 0xD800 && v <= 0xDFFF) Fail("a surrogate code point");
    return v;
  }

  // One UTF-8 character of the pattern.
  uint32_t DecodeChar() {
    const auto b0 = static_cast<unsigned char>(p_[pos_]);
    const int len = b0 < 0x80         ? 1
                    : (b0 >> 5) == 6  ? 2
                    : (b0 >> 4) == 14 ? 3
                    : (b0 >> 3) == 30 ? 4
                                      : 0;
    if (len == 0 || pos_ + len > p_.size()) {
      Fail("invalid UTF-8");
      ++pos_;
      return 0;
    }
    uint32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(p_[pos_ + i]);
      if ((b >> 6) != 2) {
        Fail("invalid UTF-8");
        ++pos_;
        return 0;
      }
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += len;
    return cp;
  }

  std::string_view p_;
  const DfaOptions& options_;
  size_t pos_ = 0;
  int depth_ = 0;
  Status error_ = Status::Ok();
};

// ---- UTF-8: a code point range as sequences of byte ranges (Russ Cox's utf8 range split) ----

using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;

int EncodedLength(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void Encode(uint32_t cp, uint8_t* out) {
  const int n = EncodedLength(cp);
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  for (int i = n - 1; i > 0; --i, cp >>= 6) out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  out[0] = static_cast<uint8_t>((0xF00 >> n) | cp);
}

void SplitUtf8(uint32_t lo, uint32_t hi, std::vector<ByteSeq>* out) {
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && hi > max) {
      SplitUtf8(lo, max, out);
      SplitUtf8(max + 1, hi, out);
      return;
    }
  }
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitUtf8(lo, lo | m, out);
        SplitUtf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitUtf8(lo, (hi & ~m) - 1, out);
        SplitUtf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, a);
  Encode(hi, b);
  ByteSeq seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out->push_back(std::move(seq));
}

// ---- Thompson NFA over bytes ----

struct NfaState {
  std::vector<std::tuple<uint8_t, uint8_t, int>> edges;  // byte range -> state
  std::vector<int> eps;
};

class NfaBuilder {
 public:
  explicit NfaBuilder(const DfaOptions& o) : options_(o) {}
  std::vector<NfaState> states;
  Status error = Status::Ok();

  int Add() {
    if (static_cast<int>(states.size()) >= options_.max_nfa_states && error.ok()) {
      error = InvalidArgument("the pattern is too large (more than {} automaton states)",
                              options_.max_nfa_states);
    }
    states.emplace_back();
    return static_cast<int>(states.size()) - 1;
  }

  // Builds `n` between new states; returns {start, end}.
  std::pair<int, int> Build(const Node& n) {
    const int s = Add(), e = Add();
    if (!error.ok()) return {s, e};
    switch (n.kind) {
      case Node::kEmpty:
        states[s].eps.push_back(e);
        break;
      case Node::kClass:
        BuildClass(n.ranges, s, e);
        break;
      case Node::kConcat: {
        int cur = s;
        for (const Node& c : n.children) {
          auto [cs, ce] = Build(c);
          states[cur].eps.push_back(cs);
          cur = ce;
          if (!error.ok()) break;
        }
        states[cur].eps.push_back(e);
        break;
      }
      case Node::kAlt:
        for (const Node& c : n.children) {
          auto [cs, ce] = Build(c);
          states[s].eps.push_back(cs);
          states[ce].eps.push_back(e);
          if (!error.ok()) break;
        }
        break;
      case Node::kRepeat:
        BuildRepeat(n, s, e);
        break;
    }
    return {s, e};
  }

 private:
  void BuildClass(const Ranges& ranges, int s, int e) {
    std::vector<ByteSeq> seqs;
    for (auto [lo, hi] : ranges) SplitUtf8(lo, hi, &seqs);
    for (const ByteSeq& seq : seqs) {
      int cur = s;
      for (size_t i = 0; i < seq.size(); ++i) {
        const int next = i + 1 == seq.size() ? e : Add();
        states[cur].edges.emplace_back(seq[i].first, seq[i].second, next);
        cur = next;
      }
    }
  }

  void BuildRepeat(const Node& n, int s, int e) {
    const Node& child = n.children[0];
    int cur = s;
    for (int i = 0; i < n.min && error.ok(); ++i) {
      auto [cs, ce] = Build(child);
      states[cur].eps.push_back(cs);
      cur = ce;
    }
    if (n.max < 0) {  // a loop: cur -> child -> cur
      auto [cs, ce] = Build(child);
      states[cur].eps.push_back(cs);
      states[ce].eps.push_back(cur);
    } else {
      for (int i = n.min; i < n.max && error.ok(); ++i) {
        auto [cs, ce] = Build(child);
        states[cur].eps.push_back(cs);
        states[cur].eps.push_back(e);
        cur = ce;
      }
    }
    states[cur].eps.push_back(e);
  }

  const DfaOptions& options_;
};

}  // namespace

// Subset construction, then trimming of states that cannot reach acceptance.
class DfaBuilder {
 public:
  static StatusOr<Dfa> Build(const std::vector<NfaState>& nfa, int start, int accept,
                             const DfaOptions& options);

 private:
  // The untrimmed DFA: NFA state sets and their transitions, [set * classes + class].
  struct Subsets {
    std::vector<std::vector<int>> sets;
    std::vector<int32_t> table;
  };
  static std::vector<uint8_t> ByteClasses(const std::vector<NfaState>& nfa, Dfa* dfa);
  static StatusOr<Subsets> Construct(const std::vector<NfaState>& nfa, int start,
                                     const std::vector<uint8_t>& representative,
                                     const DfaOptions& options);
  static std::vector<uint8_t> Live(const Subsets& d, int classes, int accept);
};

namespace {

void Closure(const std::vector<NfaState>& nfa, std::vector<int>* set, std::vector<uint8_t>* mark) {
  std::vector<int> stack(set->begin(), set->end());
  for (int s : *set) (*mark)[s] = 1;
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (int t : nfa[s].eps) {
      if (!(*mark)[t]) {
        (*mark)[t] = 1;
        set->push_back(t);
        stack.push_back(t);
      }
    }
  }
  for (int s : *set) (*mark)[s] = 0;
  std::sort(set->begin(), set->end());
}

}  // namespace

// Bytes no NFA edge tells apart share a column; returns one representative byte per class.
std::vector<uint8_t> DfaBuilder::ByteClasses(const std::vector<NfaState>& nfa, Dfa* dfa) {
  std::vector<uint8_t> boundary(257, 0);
  for (const NfaState& s : nfa) {
    for (auto [lo, hi, to] : s.edges) boundary[lo] = boundary[hi + 1] = 1;
  }
  int cls = -1;
  std::vector<uint8_t> representative;
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || boundary[b]) {
      ++cls;
      representative.push_back(static_cast<uint8_t>(b));
    }
    dfa->class_of_[b] = static_cast<uint8_t>(cls);
  }
  dfa->num_classes_ = cls + 1;
  return representative;
}

StatusOr<DfaBuilder::Subsets> DfaBuilder::Construct(const std::vector<NfaState>& nfa, int start,
                                                    const std::vector<uint8_t>& representative,
                                                    const DfaOptions& options) {
  std::vector<uint8_t> mark(nfa.size(), 0);
  std::map<std::vector<int>, int32_t> ids;
  Subsets d;
  std::vector<int> init = {start};
  Closure(nfa, &init, &mark);
  ids.emplace(init, 0);
  d.sets.push_back(std::move(init));
  for (size_t i = 0; i < d.sets.size(); ++i) {
    for (uint8_t b : representative) {
      std::vector<int> next;
      for (int s : d.sets[i]) {
        for (auto [lo, hi, to] : nfa[s].edges) {
          if (b >= lo && b <= hi && !mark[to]) {
            mark[to] = 1;
            next.push_back(to);
          }
        }
      }
      for (int s : next) mark[s] = 0;
      if (next.empty()) {
        d.table.push_back(Dfa::kDead);
        continue;
      }
      Closure(nfa, &next, &mark);
      auto [it, inserted] = ids.emplace(next, static_cast<int32_t>(d.sets.size()));
      if (inserted) {
        if (static_cast<int>(d.sets.size()) >= options.max_states) {
          return InvalidArgument(
              "the pattern needs more than {} automaton states (simplify it, or bound its "
              "nesting and repetitions)",
              options.max_states);
        }
        d.sets.push_back(std::move(next));
      }
      d.table.push_back(it->second);
    }
  }
  return d;
}

// States that reach an accepting one (reverse reachability from the accepting states).
std::vector<uint8_t> DfaBuilder::Live(const Subsets& d, int classes, int accept) {
  const size_t n = d.sets.size();
  std::vector<uint8_t> live(n, 0);
  std::vector<std::vector<int32_t>> reverse(n);
  std::vector<int32_t> stack;
  for (size_t i = 0; i < n; ++i) {
    if (std::binary_search(d.sets[i].begin(), d.sets[i].end(), accept)) {
      live[i] = 1;
      stack.push_back(static_cast<int32_t>(i));
    }
    for (int c = 0; c < classes; ++c) {
      const int32_t t = d.table[i * classes + c];
      if (t != Dfa::kDead) reverse[t].push_back(static_cast<int32_t>(i));
    }
  }
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t p : reverse[s]) {
      if (!live[p]) {
        live[p] = 1;
        stack.push_back(p);
      }
    }
  }
  return live;
}

StatusOr<Dfa> DfaBuilder::Build(const std::vector<NfaState>& nfa, int start, int accept,
                                const DfaOptions& options) {
  Dfa dfa;
  const std::vector<uint8_t> representative = ByteClasses(nfa, &dfa);
  const int classes = dfa.num_classes_;
  auto d = Construct(nfa, start, representative, options);
  if (!d.ok()) return d.status();
  const std::vector<uint8_t> live = Live(*d, classes, accept);
  if (!live[0]) return InvalidArgument("the pattern matches no string");
  const size_t n = d->sets.size();
  std::vector<int32_t> renumber(n, Dfa::kDead);
  int32_t next_id = 0;
  for (size_t i = 0; i < n; ++i) {
    if (live[i]) renumber[i] = next_id++;
  }
  dfa.table_.assign(static_cast<size_t>(next_id) * classes, Dfa::kDead);
  dfa.accepting_.assign(next_id, 0);
  dfa.final_.assign(next_id, 1);
  for (size_t i = 0; i < n; ++i) {
    if (!live[i]) continue;
    const int32_t id = renumber[i];
    dfa.accepting_[id] = std::binary_search(d->sets[i].begin(), d->sets[i].end(), accept);
    for (int c = 0; c < classes; ++c) {
      const int32_t t = d->table[i * classes + c];
      const int32_t to = t == Dfa::kDead ? Dfa::kDead : renumber[t];
      dfa.table_[static_cast<size_t>(id) * classes + c] = to;
      if (to != Dfa::kDead) dfa.final_[id] = 0;
    }
  }
  return dfa;
}

Status CheckRegexSyntax(std::string_view pattern, const DfaOptions& options) {
  Parser parser(pattern, options);
  return parser.Parse().status();
}

StatusOr<Dfa> Dfa::FromRegex(std::string_view pattern, const DfaOptions& options) {
  Parser parser(pattern, options);
  auto ast = parser.Parse();
  if (!ast.ok()) return ast.status();
  NfaBuilder nfa(options);
  auto [start, accept] = nfa.Build(*ast);
  RETURN_IF_ERROR(nfa.error);
  return DfaBuilder::Build(nfa.states, start, accept, options);
}

int32_t Dfa::Walk(int32_t state, std::string_view bytes) const {
  for (char c : bytes) {
    if (state == kDead) break;
    state = Next(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool Dfa::Matches(std::string_view text) const {
  const int32_t s = Walk(start(), text);
  return s != kDead && accepting(s);
}

std::string RegexEscape(std::string_view literal) {
  static constexpr std::string_view kSpecial = R"(\.^$|?*+()[]{}-/)";
  std::string out;
  for (char c : literal) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7F) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      if (kSpecial.find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out;
}

}  // namespace inferd::constrained
