#include "generation/stop_strings.h"

#include <gtest/gtest.h>

namespace inferd::gen {
namespace {

// Feeds `pieces` one by one; returns the emitted text and whether a stop string ended it.
std::pair<std::string, bool> Stream(StopStringFilter& f, std::vector<std::string> pieces) {
  std::string all, out;
  for (const std::string& p : pieces) {
    if (f.Push(p, &out)) return {all + out, true};
    all += out;
  }
  return {all + f.Flush(), false};
}

TEST(StopStringFilterTest, NoStopStringsPassesEverything) {
  StopStringFilter f({});
  std::string out;
  EXPECT_FALSE(f.Push("abc", &out));
  EXPECT_EQ(out, "abc");
  EXPECT_EQ(f.Flush(), "");
}

TEST(StopStringFilterTest, WithholdsAPossibleStopStringUntilItIsDecided) {
  StopStringFilter f({"END"});
  std::string out;
  EXPECT_FALSE(f.Push("the E", &out));
  EXPECT_EQ(out, "the ");
  EXPECT_FALSE(f.Push("N", &out));
  EXPECT_EQ(out, "");
  EXPECT_FALSE(f.Push("x", &out));  // "ENx" is not "END": released
  EXPECT_EQ(out, "ENx");
}

TEST(StopStringFilterTest, CutsBeforeAStopStringSpanningPieces) {
  StopStringFilter f({"END"});
  auto [text, stopped] = Stream(f, {"the E", "N", "D is near"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "the ");
}

TEST(StopStringFilterTest, EarliestOfSeveralStopStringsWins) {
  StopStringFilter f({"world", "lo w"});
  auto [text, stopped] = Stream(f, {"hel", "lo world"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "hel");
}

TEST(StopStringFilterTest, FlushReleasesHeldTextAtTheEnd) {
  StopStringFilter f({"\n\n"});
  auto [text, stopped] = Stream(f, {"a\n", "b\n"});
  EXPECT_FALSE(stopped);
  EXPECT_EQ(text, "a\nb\n");
}

TEST(StopStringFilterTest, StopStringInsideOnePiece) {
  StopStringFilter f({"stop"});
  auto [text, stopped] = Stream(f, {"go", " on, stop here"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "go on, ");
}

}  // namespace
}  // namespace inferd::gen
