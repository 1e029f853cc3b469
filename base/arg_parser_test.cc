#include "base/arg_parser.h"

#include "gtest/gtest.h"

namespace ringlm {
namespace {

ArgParser MakeParser() {
  ArgParser p("tool [options] PATH", "A test tool.");
  p.AddOption("model", "PATH", "model file");
  p.AddOption("n-predict", "N", "tokens", "64");
  p.AddAlias("-n", "n-predict");
  p.AddFlag("json", "json output");
  p.AddPositional("PATH", "a path");
  return p;
}

TEST(ArgParserTest, ParsesBothValueFormsFlagsAliasesAndPositionals) {
  ArgParser p = MakeParser();
  ASSERT_TRUE(p.Parse({"--model=m.gguf", "-n", "12", "--json", "file"}).ok());
  EXPECT_EQ(p.GetString("model"), "m.gguf");
  EXPECT_EQ(*p.GetInt("n-predict", 0, 100), 12);
  EXPECT_TRUE(p.GetFlag("json"));
  EXPECT_EQ(p.Positional(0), "file");
}

TEST(ArgParserTest, DefaultsApplyAndRangesAreChecked) {
  ArgParser p = MakeParser();
  ASSERT_TRUE(p.Parse({"file"}).ok());
  EXPECT_EQ(*p.GetInt("n-predict", 0, 100), 64);
  EXPECT_FALSE(p.Has("model"));
  EXPECT_FALSE(p.GetInt("n-predict", 0, 10).ok());
}

TEST(ArgParserTest, ReportsErrorsPrecisely) {
  ArgParser p = MakeParser();
  absl::Status s = p.Parse({"--bogus", "file"});
  EXPECT_NE(s.message().find("unknown option --bogus"), std::string::npos);
  ArgParser q = MakeParser();
  EXPECT_NE(q.Parse({"file", "--model"}).message().find("--model needs a value"),
            std::string::npos);
  ArgParser r = MakeParser();
  EXPECT_NE(r.Parse({}).message().find("missing argument PATH"), std::string::npos);
  ArgParser t = MakeParser();
  ASSERT_TRUE(t.Parse({"--n-predict", "x", "file"}).ok());
  EXPECT_NE(t.GetInt("n-predict", 0, 9).status().message().find("wants an integer"),
            std::string::npos);
}

TEST(ArgParserTest, HelpListsEveryOption) {
  ArgParser p = MakeParser();
  ASSERT_TRUE(p.Parse({"--help"}).ok());
  EXPECT_TRUE(p.help_requested());
  const std::string help = p.HelpText();
  for (const char* s : {"--model PATH", "-n, --n-predict N", "--json", "(default: 64)", "PATH"}) {
    EXPECT_NE(help.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace ringlm

namespace ringlm {
namespace {

TEST(ArgParserTest, RepeatedOptionsKeepEveryValueInOrder) {
  ArgParser p("prog", "d");
  p.AddRepeatedOption("origin", "ORIGIN", "an origin");
  p.AddOption("one", "X", "single");
  ASSERT_TRUE(p.Parse({"--origin", "a", "--one", "1", "--origin=b", "--one", "2"}).ok());
  EXPECT_EQ(p.GetAll("origin"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.GetString("one"), "2");
  EXPECT_TRUE(p.GetAll("one").empty());
  EXPECT_NE(p.HelpText().find("(repeatable)"), std::string::npos);
  ArgParser none("prog", "d");
  none.AddRepeatedOption("origin", "ORIGIN", "an origin");
  ASSERT_TRUE(none.Parse({}).ok());
  EXPECT_TRUE(none.GetAll("origin").empty());
}

}  // namespace
}  // namespace ringlm
