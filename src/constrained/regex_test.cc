#include "constrained/regex.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>

namespace inferd::constrained {
namespace {

Dfa Compile(std::string_view pattern) {
  auto dfa = Dfa::FromRegex(pattern);
  EXPECT_TRUE(dfa.ok()) << pattern << ": " << dfa.status().ToString();
  return std::move(*dfa);
}

TEST(RegexTest, LiteralsClassesAndQuantifiers) {
  struct Case {
    const char* pattern;
    std::vector<const char*> yes, no;
  };
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"", "ab", "abcd", "abd"}},
      {"a|bc|", {"a", "bc", ""}, {"b", "abc"}},
      {"a*b+c?", {"b", "aabbb", "abc", "bbc"}, {"", "a", "ac", "abcc"}},
      {"(ab){2,3}", {"abab", "ababab"}, {"ab", "abababab", ""}},
      {"x{3}", {"xxx"}, {"xx", "xxxx"}},
      {"x{2,}", {"xx", "xxxxxxx"}, {"x"}},
      {"[a-c0-2_]+", {"a0_", "cc21"}, {"d", "a-", ""}},
      {"[^a-c]", {"d", "-", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}, {"a", "b", "dd"}},
      {"[]a]", {"]", "a"}, {"b"}},
      {"[a-]", {"a", "-"}, {"b"}},
      {R"(\d\D\w\W\s\S)", {"1a_ \t!"}, {"a1_ \t!"}},
      {R"(\.\*\\\(\))", {".*\\()"}, {"a*\\()"}},
      {R"(\x41\u00e9\n)", {"A\xc3\xa9\n"}, {"Ae\n"}},
      {".", {"a", "\xc3\xa9", "\t"}, {"\n", "", "ab"}},
      {"^a$", {"a"}, {"", "aa"}},
      {"(?:a|b)(?P<n>c)(?<m>d)", {"acd", "bcd"}, {"cd"}},
      {"\xc3\xa9+", {"\xc3\xa9\xc3\xa9"}, {"e"}},
      {"a{,3}", {"a{,3}"}, {"aaa"}},  // not a count: literal braces, as Python's re
      {"a*?b", {"aab", "b"}, {"a"}},
  };
  for (const Case& c : cases) {
    Dfa dfa = Compile(c.pattern);
    for (const char* s : c.yes) EXPECT_TRUE(dfa.Matches(s)) << c.pattern << " should match " << s;
    for (const char* s : c.no)
      EXPECT_FALSE(dfa.Matches(s)) << c.pattern << " should not match " << s;
  }
}

TEST(RegexTest, NegatedClassesNeverMatchInvalidUtf8OrSurrogates) {
  Dfa dfa = Compile("[^a]*");
  EXPECT_TRUE(dfa.Matches("\xed\x9f\xbf"));       // U+D7FF
  EXPECT_FALSE(dfa.Matches("\xed\xa0\x80"));      // U+D800, a surrogate
  EXPECT_TRUE(dfa.Matches("\xee\x80\x80"));       // U+E000
  EXPECT_FALSE(dfa.Matches("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(dfa.Matches("\x80"));              // a lone continuation byte
  EXPECT_FALSE(dfa.Matches("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(dfa.Matches("\xf4\x8f\xbf\xbf"));   // U+10FFFF
  EXPECT_FALSE(dfa.Matches("\xc3"));              // truncated
}

// Against std::regex (ECMAScript, full match) on random strings over a small alphabet.
TEST(RegexTest, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {"(a|b)*abb",    "a(b|c)*d?", "(ab|a)(bc|c)",
                                             "[abc]{2,4}d*", "(a*b*)*c",  "(?:a|bc){1,3}"};
  std::mt19937 rng(7);
  for (const std::string& p : patterns) {
    Dfa dfa = Compile(p);
    std::string ecma = p;
    std::regex re(ecma);
    for (int i = 0; i < 400; ++i) {
      std::string s;
      const int len = static_cast<int>(rng() % 8);
      for (int k = 0; k < len; ++k) s += "abcd"[rng() % 4];
      EXPECT_EQ(dfa.Matches(s), std::regex_match(s, re)) << p << " on '" << s << "'";
    }
  }
}

TEST(RegexTest, PrefixesStayAliveAndDeadMeansNoCompletion) {
  Dfa dfa = Compile("abc|abd");
  int32_t s = dfa.Walk(dfa.start(), "ab");
  ASSERT_NE(s, Dfa::kDead);
  EXPECT_FALSE(dfa.accepting(s));
  EXPECT_EQ(dfa.Next(s, 'e'), Dfa::kDead);
  const int32_t end = dfa.Next(s, 'c');
  EXPECT_TRUE(dfa.accepting(end));
  EXPECT_TRUE(dfa.final(end));
  // Trimmed: a branch that can never finish is dead at once.
  Dfa trimmed = Compile("a(b[^\\s\\S]|c)");
  EXPECT_NE(trimmed.Walk(trimmed.start(), "a"), Dfa::kDead);
  EXPECT_EQ(trimmed.Walk(trimmed.start(), "ab"), Dfa::kDead);
  EXPECT_TRUE(trimmed.final(trimmed.Walk(trimmed.start(), "ac")));
}

TEST(RegexTest, ByteClassesKeepTheTableSmall) {
  Dfa dfa = Compile("[0-9]+");
  EXPECT_LE(dfa.num_classes(), 3);
  EXPECT_LE(dfa.num_states(), 3);
}

TEST(RegexTest, BadPatternsAreClearErrors) {
  struct Case {
    const char* pattern;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"(ab", "missing ')'"},
      {"ab)", "unmatched ')'"},
      {"[ab", "missing ']'"},
      {"*a", "nothing to repeat"},
      {"a**", "multiple repeat"},
      {"a{3,1}", "m < n"},
      {"a{5000}", "repeat count above"},
      {"(a)\\1", "backreferences"},
      {"(?=a)", "lookaround"},
      {"a\\bb", "word boundaries"},
      {"a^b", "'^' is only supported at the start"},
      {"a$b", "'$' is only supported at the end"},
      {"\\q", "unknown escape"},
      {"\\xZZ", "hex digits"},
      {"[z-a]", "out of order"},
      {"[[:alpha:]]", "POSIX"},
      {"a\\", "trailing backslash"},
      {"\xff", "invalid UTF-8"},
      {"[^\\x00-\\x{7f}]", "hex digits"},
  };
  for (const Case& c : cases) {
    auto dfa = Dfa::FromRegex(c.pattern);
    ASSERT_FALSE(dfa.ok()) << c.pattern;
    EXPECT_NE(dfa.status().message().find(c.message), std::string::npos)
        << c.pattern << ": " << dfa.status().message();
    EXPECT_FALSE(CheckRegexSyntax(c.pattern).ok()) << c.pattern;
  }
}

TEST(RegexTest, TooManyStatesAndEmptyLanguagesFail) {
  DfaOptions small;
  small.max_states = 50;
  auto big = Dfa::FromRegex("(a|b)*a(a|b){8}", small);  // needs 2^9 states
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("more than 50 automaton states"), std::string::npos);
  EXPECT_TRUE(CheckRegexSyntax("(a|b)*a(a|b){8}", small).ok());  // syntax is fine
  DfaOptions tiny_nfa;
  tiny_nfa.max_nfa_states = 100;
  EXPECT_FALSE(Dfa::FromRegex("(abc){500}", tiny_nfa).ok());
  auto none = Dfa::FromRegex("[^\\s\\S]");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("matches no string"), std::string::npos);
}

TEST(RegexTest, EscapeRoundTrips) {
  const std::string text = "{\"a\":[1.5,\"x|y\"],\"b\\n\":null}\x01 ^$?*+-/";
  Dfa dfa = Compile(RegexEscape(text));
  EXPECT_TRUE(dfa.Matches(text));
  EXPECT_FALSE(dfa.Matches(text + " "));
}

}  // namespace
}  // namespace inferd::constrained
