#include "api/stop_filter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

TEST(StopFilterTest, NoStopsPassesEverythingThrough) {
  StopFilter f({});
  EXPECT_EQ(f.Push("hello "), "hello ");
  EXPECT_EQ(f.Push("world"), "world");
  EXPECT_EQ(f.Finish(), "");
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilterTest, CutsAtStopAndDropsTheRest) {
  StopFilter f({"END"});
  EXPECT_EQ(f.Push("abc END def"), "abc ");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.Push("more"), "");
  EXPECT_EQ(f.Finish(), "");
}

TEST(StopFilterTest, MatchesAcrossPushesAndHoldsBackPossibleStarts) {
  StopFilter f({"\nUser:"});
  EXPECT_EQ(f.Push("Hi there\n"), "Hi there");  // "\n" may start the stop
  EXPECT_EQ(f.Push("Us"), "");
  EXPECT_EQ(f.Push("er: x"), "");
  EXPECT_TRUE(f.stopped());
}

TEST(StopFilterTest, ReleasesHeldTextWhenItTurnsOutNotToBeAStop) {
  StopFilter f({"abcd"});
  EXPECT_EQ(f.Push("xab"), "x");
  EXPECT_EQ(f.Push("c"), "");
  EXPECT_EQ(f.Push("e"), "abce");
  EXPECT_EQ(f.Push("ab"), "");
  EXPECT_EQ(f.Finish(), "ab");  // the end of generation releases the tail
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilterTest, EarliestOfSeveralStopsWins) {
  StopFilter f({"world", "lo w", ""});
  EXPECT_EQ(f.Push("hello world"), "hel");
  EXPECT_TRUE(f.stopped());
}

TEST(StopFilterTest, HeldTailStartsOnCharacterBoundary) {
  StopFilter f({"\xC3\xA9t\xC3\xA9"});      // "été"
  EXPECT_EQ(f.Push("caf\xC3\xA9"), "caf");  // "é" could start "été"
  EXPECT_EQ(f.Push("!"), "\xC3\xA9!");
}

}  // namespace
}  // namespace ringlm
