// `ringlm bench` on the bundled model with tiny sizes: exit status and the
// shape of its figures, never their values.
#include "cli/commands.h"
#include "cli/test_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using nlohmann::json;
using testing::CommandResult;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunCommand;

TEST(BenchCommandTest, HelpListsTheFlags) {
  CommandResult r = RunCommand(RunBench, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--model", "-m", "--n-prompt", "-p", "--n-gen", "-n", "--n-depth", "-d", "--repetitions",
        "-r", "--batch", "-b", "--threads", "--json", "--cpu-target"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  EXPECT_THAT(r.err, IsEmpty());
}

TEST(BenchCommandTest, BadArgumentsFailWithAMessage) {
  CommandResult no_model = RunCommand(RunBench, {"-p", "4"});
  EXPECT_EQ(no_model.exit_code, 1);
  EXPECT_EQ(no_model.err, "ringlm: INVALID_ARGUMENT: --model is required\n");

  CommandResult nothing =
      RunCommand(RunBench, {"-m", testing::StoriesModel(), "-p", "0", "-n", "0"});
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_THAT(nothing.err, HasSubstr("-p and -n are both 0: nothing to measure"));

  CommandResult depth = RunCommand(RunBench, {"-m", testing::StoriesModel(), "-d", "-1"});
  EXPECT_EQ(depth.exit_code, 1);
  EXPECT_THAT(depth.err, HasSubstr("n-depth"));

  CommandResult target =
      RunCommand(RunBench, {"-m", testing::StoriesModel(), "--cpu-target", "avx3"});
  EXPECT_EQ(target.exit_code, 1);
  EXPECT_THAT(target.err, HasSubstr("unknown CPU target \"avx3\""));

  CommandResult bad = RunCommand(RunBench, {"--bogus"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "ringlm: unknown option --bogus (see --help)\n");
  for (const CommandResult& r : {no_model, nothing, depth, target, bad}) {
    EXPECT_THAT(r.out, IsEmpty());
  }
}

TEST(BenchCommandTest, PrintsATableRowPerTest) {
  CommandResult r = RunCommand(
      RunBench, {"-m", testing::StoriesModel(), "-p", "4", "-n", "2", "-r", "1", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
  EXPECT_THAT(r.out, ContainsRegex("^\\| model +\\| +size \\| +params \\| type +\\| cpu +\\| "
                                   "threads \\| +test \\| +t/s \\|\n"));
  // | llama | 1.12 MiB | 0.29 M | F32 | <cpu> | 1 | pp4 | 123.45 ± 0.00 |
  for (const char* test : {"pp4", "tg2"}) {
    EXPECT_THAT(r.out, ContainsRegex(std::string("\\| llama +\\| +1\\.12 MiB \\| +0\\.29 M \\| "
                                                 "F32 +\\| [a-z0-9]+ +\\| +1 \\| +") +
                                     test + " \\| +[0-9.]+ ± [0-9.]+ \\|\n"))
        << test;
  }
}

TEST(BenchCommandTest, JsonHasEachTestAtTheDepthAsked) {
  CommandResult r = RunCommand(RunBench, {"-m", testing::StoriesModel("q8_0"), "-p", "4", "-n", "2",
                                          "-d", "8", "-r", "2", "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(out.is_object()) << r.out;
  EXPECT_EQ(out["architecture"], "llama");
  EXPECT_EQ(out["type"], "Q8_0");
  EXPECT_EQ(out["params"], 292800);
  EXPECT_EQ(out["threads"], 1);
  EXPECT_EQ(out["repetitions"], 2);
  ASSERT_EQ(out["tests"].size(), 2u) << r.out;
  EXPECT_EQ(out["tests"][0]["test"], "pp4 @ d8");
  EXPECT_EQ(out["tests"][0]["n_prompt"], 4);
  EXPECT_EQ(out["tests"][1]["test"], "tg2 @ d8");
  EXPECT_EQ(out["tests"][1]["n_gen"], 2);
  for (const json& t : out["tests"]) {
    EXPECT_EQ(t["n_depth"], 8);
    EXPECT_EQ(t["samples_ts"].size(), 2u);
    EXPECT_GT(t["avg_ts"].get<double>(), 0);
  }
}

TEST(BenchCommandTest, BatchDecodesSessionsTogether) {
  CommandResult r = RunCommand(RunBench, {"-m", testing::StoriesModel("q8_0"), "-p", "0", "-n", "3",
                                          "-b", "4", "-r", "1", "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(out.is_object()) << r.out;
  ASSERT_EQ(out["tests"].size(), 1u) << r.out;
  EXPECT_EQ(out["tests"][0]["test"], "tg3 x4");
  EXPECT_EQ(out["tests"][0]["n_batch"], 4);
  EXPECT_GT(out["tests"][0]["avg_ts"].get<double>(), 0);

  CommandResult bad = RunCommand(RunBench, {"-m", testing::StoriesModel(), "-b", "0"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("batch"));
}

}  // namespace
}  // namespace ringlm
