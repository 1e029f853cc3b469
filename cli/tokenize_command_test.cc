// `ringlm tokenize` on the bundled model, against llama-tokenize's ids.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/test_commands.h"
#include "gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/tokenizer.h"
#include "inference/vocabulary_loader.h"

namespace ringlm {
namespace {

using nlohmann::json;
using testing::CommandResult;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunCommand;

TEST(TokenizeCommandTest, HelpListsTheFlags) {
  CommandResult r = RunCommand(RunTokenize, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--model", "--text", "--no-parse-special", "--json"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

TEST(TokenizeCommandTest, MissingFlagsFailWithAMessage) {
  CommandResult no_model = RunCommand(RunTokenize, {"--text", "hi"});
  EXPECT_EQ(no_model.exit_code, 1);
  EXPECT_EQ(no_model.err, "ringlm: INVALID_ARGUMENT: --model is required\n");
  CommandResult no_text = RunCommand(RunTokenize, {"--model", testing::StoriesModel()});
  EXPECT_EQ(no_text.exit_code, 1);
  EXPECT_EQ(no_text.err, "ringlm: INVALID_ARGUMENT: --text is required\n");
  CommandResult bad = RunCommand(RunTokenize, {"--bogus"});
  EXPECT_EQ(bad.exit_code, 2);
  CommandResult missing = RunCommand(RunTokenize, {"--model", "/nonexistent.gguf", "--text", "x"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent.gguf"));
}

TEST(TokenizeCommandTest, JsonIdsMatchLlamaTokenize) {
  const json refs = testing::StoriesReferences();
  ASSERT_FALSE(refs["tokenizer"]["cases"].empty());
  for (const json& c : refs["tokenizer"]["cases"]) {
    const std::string text = c["text"];
    CommandResult r =
        RunCommand(RunTokenize, {"--model", testing::StoriesModel(), "--text", text, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "{\"ids\":[" + absl::StrJoin(c["ids"].get<std::vector<int>>(), ",") + "]}\n")
        << "text '" << text << "'";
  }
}

TEST(TokenizeCommandTest, TablePrintsEachIdWithItsPiece) {
  CommandResult r =
      RunCommand(RunTokenize, {"--model", testing::StoriesModel(), "--text", "Hello world"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "     1 -> \"<s>\"\n"
            "   346 -> \"\xE2\x96\x81He\"\n"
            "   306 -> \"ll\"\n"
            "   414 -> \"o\"\n"
            "   263 -> \"\xE2\x96\x81w\"\n"
            "   304 -> \"or\"\n"
            "   341 -> \"ld\"\n");
  EXPECT_THAT(r.err, IsEmpty());
}

// "<s>" in the text is the BOS token unless --no-parse-special; either way
// the ids are the tokenizer's own.
TEST(TokenizeCommandTest, ParsesSpecialTokensUnlessToldNot) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(testing::StoriesModel());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<Vocabulary> vocab = LoadVocabulary(**file);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(*std::move(vocab));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text = "Hi <s> there";
  const std::vector<int32_t> special = (*tok)->Encode(text, true, /*parse_special=*/true);
  const std::vector<int32_t> plain = (*tok)->Encode(text, true, /*parse_special=*/false);
  ASSERT_EQ(std::count(special.begin(), special.end(), 1), 2);  // BOS and the <s>
  ASSERT_EQ(std::count(plain.begin(), plain.end(), 1), 1);      // BOS only

  auto ids_json = [](const std::vector<int32_t>& ids) {
    return "{\"ids\":[" + absl::StrJoin(ids, ",") + "]}\n";
  };
  CommandResult parsed =
      RunCommand(RunTokenize, {"--model", testing::StoriesModel(), "--text", text, "--json"});
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  EXPECT_EQ(parsed.out, ids_json(special));
  CommandResult unparsed = RunCommand(RunTokenize, {"--model", testing::StoriesModel(), "--text",
                                                    text, "--json", "--no-parse-special"});
  ASSERT_EQ(unparsed.exit_code, 0) << unparsed.err;
  EXPECT_EQ(unparsed.out, ids_json(plain));
}

}  // namespace
}  // namespace ringlm
