#include "cli/cli_common.h"

#include <sstream>

#include "cli/test_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

ArgParser TestParser() {
  ArgParser p("ringlm test --model PATH", "A parser for the test.");
  p.AddOption("model", "PATH", "GGUF model file");
  p.AddPositional("NAME", "a name");
  return p;
}

TEST(ParseOrExitTest, HelpGoesToOutAndReturnsZero) {
  ArgParser p = TestParser();
  std::ostringstream out, err;
  EXPECT_EQ(ParseOrExit(p, {"--help"}, out, err), 0);
  EXPECT_EQ(out.str(), p.HelpText());
  EXPECT_THAT(out.str(), HasSubstr("--model"));
  EXPECT_THAT(err.str(), IsEmpty());
}

TEST(ParseOrExitTest, AParseErrorGoesToErrAndReturnsTwo) {
  ArgParser unknown = TestParser();
  std::ostringstream out, err;
  EXPECT_EQ(ParseOrExit(unknown, {"x", "--bogus"}, out, err), 2);
  EXPECT_EQ(err.str(), "ringlm: unknown option --bogus (see --help)\n");
  EXPECT_THAT(out.str(), IsEmpty());

  ArgParser missing = TestParser();
  std::ostringstream out2, err2;
  EXPECT_EQ(ParseOrExit(missing, {}, out2, err2), 2);
  EXPECT_THAT(err2.str(), HasSubstr("missing argument NAME"));
}

TEST(ParseOrExitTest, GoodArgumentsGoOnQuietly) {
  ArgParser p = TestParser();
  std::ostringstream out, err;
  EXPECT_EQ(ParseOrExit(p, {"x", "--model", "m.gguf"}, out, err), -1);
  EXPECT_EQ(p.GetString("model"), "m.gguf");
  EXPECT_EQ(p.Positional(0), "x");
  EXPECT_THAT(out.str(), IsEmpty());
  EXPECT_THAT(err.str(), IsEmpty());
}

TEST(FailTest, WritesTheStatusAndReturnsOne) {
  std::ostringstream err;
  EXPECT_EQ(Fail(absl::InvalidArgumentError("--model is required"), err), 1);
  EXPECT_EQ(err.str(), "ringlm: INVALID_ARGUMENT: --model is required\n");
}

TEST(IsTerminalTest, AStringStreamIsNotATerminal) {
  std::ostringstream s;
  EXPECT_FALSE(IsTerminal(s));
}

TEST(LoadModelForCliTest, LoadsTheModelWithoutWritingToANonTerminal) {
  std::ostringstream err;
  absl::StatusOr<std::unique_ptr<Model>> model =
      LoadModelForCli(testing::StoriesModel(), /*context_size=*/0, err);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().n_layer, 5u);
  EXPECT_EQ((*model)->context_size(), 128u);  // the model's context_length
  EXPECT_THAT(err.str(), IsEmpty());          // no progress line, no warning
}

TEST(LoadModelForCliTest, WarnsWhenTheContextIsAboveTheTrainingLength) {
  std::ostringstream err;
  absl::StatusOr<std::unique_ptr<Model>> model =
      LoadModelForCli(testing::StoriesModel(), /*context_size=*/1000, err);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(err.str(),
            "ringlm: warning: context size 1000 is above the model's context_length 128; "
            "quality may drop past it\n");
}

TEST(LoadModelForCliTest, AMissingFileIsNotFoundAndNamed) {
  std::ostringstream err;
  absl::StatusOr<std::unique_ptr<Model>> model = LoadModelForCli("/nonexistent.gguf", 0, err);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("/nonexistent.gguf"));
}

TEST(JoinPiecesTest, GivesLlamaCppText) {
  std::ostringstream err;
  absl::StatusOr<std::unique_ptr<Model>> model = LoadModelForCli(testing::StoriesModel(), 0, err);
  ASSERT_TRUE(model.ok()) << model.status();
  const nlohmann::json refs = testing::StoriesReferences();
  ASSERT_FALSE(refs["generation"].empty());
  for (const nlohmann::json& g : refs["generation"]) {
    const std::vector<int32_t> ids = g["f32"]["generated_ids"];
    EXPECT_EQ(JoinPieces((*model)->tokenizer(), ids), g["f32"]["generated_text"]);
  }
  // The prompt's leading space (SentencePiece's dummy prefix) is kept.
  EXPECT_EQ(JoinPieces((*model)->tokenizer(), {1, 403, 407}), " Once upon");
}

TEST(JsonStringTest, EscapesAndReplacesInvalidUtf8) {
  EXPECT_EQ(JsonString("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(JsonString("\xE2\x96\x81He"), "\"\xE2\x96\x81He\"");  // UTF-8 kept as is
  EXPECT_EQ(JsonString("x\xFFy"), "\"x\xEF\xBF\xBDy\"");          // U+FFFD
}

TEST(DescribeLayerBytesTest, RunsOfEqualSizes) {
  EXPECT_EQ(DescribeLayerBytes({}), "");
  EXPECT_EQ(DescribeLayerBytes({1 << 20, 1 << 20, 1 << 20}), "layers 0-2: 1.00 MiB each");
  // A dense leading layer, then MoE layers.
  EXPECT_EQ(DescribeLayerBytes({1 << 19, 3 << 20, 3 << 20, 3 << 20}),
            "layer 0: 0.50 MiB, layers 1-3: 3.00 MiB each");
}

TEST(DescribeLayerBytesTest, ManyRunsAsTheirRange) {
  EXPECT_EQ(DescribeLayerBytes({5 << 20, 4 << 20, 5 << 20, 4 << 20, 6 << 20, 4 << 20}),
            "3 sizes, 4.00 MiB (layer 1) to 6.00 MiB (layer 4)");
}

}  // namespace
}  // namespace ringlm
