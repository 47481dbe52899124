// Regular expressions for constrained output: a parser for the usual syntax and a byte-level DFA
// (deterministic automaton over UTF-8 bytes) whose states the token index (token_index.h) walks.
//
// Why hand-written: constrained decoding needs the automaton's states themselves (a mask of
// allowed tokens is precomputed per state, and each sequence keeps its current state between
// tokens). No library in Debian exposes them: RE2 and PCRE2 keep their DFAs internal and only
// answer "does it match", std::regex is a backtracker, and the Rust regex-automata crate that
// vLLM's and llama.cpp's peers build on is not packaged for C++. Parser + Thompson NFA + subset
// construction over bytes is small and testable on its own.
//
// Semantics: the whole output must match (anchored at both ends; a leading '^' and a trailing
// '$' are accepted and mean nothing more). Syntax: literals (UTF-8), '.', classes [a-z] [^...]
// with escapes inside, \d \D \w \W \s \S, \n \t \r \f \v \0, \xHH, \uHHHH, escaped punctuation,
// groups (...) (?:...) (?P<name>...) (?<name>...), '|', quantifiers * + ? {n} {n,} {n,m}
// (a lazy '?' after one is accepted: laziness means nothing for a full match). '.' and negated
// classes match any character except the ones named ('.' excludes '\n'), i.e. every well-formed
// UTF-8 encoding of a code point outside the set (surrogates never). Not supported (an
// INVALID_ARGUMENT that names it): backreferences, lookaround, \b \B, anchors in the middle,
// POSIX classes, flags.
//
//   auto dfa = Dfa::FromRegex(R"(-?[0-9]+(\.[0-9]+)?)");
//   int32_t s = dfa->start();
//   for (char c : std::string_view("-1.5")) s = dfa->Next(s, c);   // kDead once it cannot match
//   bool ok = s != Dfa::kDead && dfa->accepting(s);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd::constrained {

struct DfaOptions {
  int max_states = 20000;       // subset construction stops with INVALID_ARGUMENT beyond this
  int max_nfa_states = 400000;  // so does NFA construction (counted repetition copies a sub-NFA)
  int max_repeat = 1000;        // largest n in {n} / {n,m}
};

// Checks the syntax only (cheap; no automaton): OK or INVALID_ARGUMENT naming the problem and its
// offset in the pattern.
Status CheckRegexSyntax(std::string_view pattern, const DfaOptions& options = {});

// A trimmed DFA: every state can still reach an accepting one (transitions that could not are
// kDead), so "not dead" means "still a prefix of some match". Bytes are grouped into classes that
// no transition tells apart, so the table is states x classes. Immutable; thread-safe.
class Dfa {
 public:
  static constexpr int32_t kDead = -1;

  // INVALID_ARGUMENT: bad syntax (with offset), an unsupported construct, a pattern that matches
  // nothing, or one that needs more states than `options` allow.
  static StatusOr<Dfa> FromRegex(std::string_view pattern, const DfaOptions& options = {});

  int32_t start() const { return 0; }
  int32_t Next(int32_t state, uint8_t byte) const {
    return table_[static_cast<size_t>(state) * num_classes_ + class_of_[byte]];
  }
  // Walks `bytes` from `state`; kDead as soon as no match is possible.
  int32_t Walk(int32_t state, std::string_view bytes) const;
  bool accepting(int32_t state) const { return accepting_[state] != 0; }
  // True when `state` has no outgoing transition (only the end of the output may follow).
  bool final(int32_t state) const { return final_[state] != 0; }
  int num_states() const { return static_cast<int>(accepting_.size()); }
  int num_classes() const { return num_classes_; }
  bool Matches(std::string_view text) const;

 private:
  Dfa() = default;
  friend class DfaBuilder;

  int num_classes_ = 0;
  uint8_t class_of_[256] = {};
  std::vector<int32_t> table_;  // [state * num_classes_ + class] -> state or kDead
  std::vector<uint8_t> accepting_;
  std::vector<uint8_t> final_;
};

// Escapes `literal` so that it matches itself (for building patterns from JSON text).
std::string RegexEscape(std::string_view literal);

}  // namespace inferd::constrained
