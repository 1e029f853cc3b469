// `ringlm generate` on the bundled model (against llama.cpp's reference
// output) and through an in-process RingNode.
#include <cstdlib>

#include "absl/status/status.h"
#include "cli/commands.h"
#include "cli/test_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using nlohmann::json;
using testing::CommandResult;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunCommand;

TEST(GenerateCommandTest, HelpListsTheFlags) {
  CommandResult r = RunCommand(RunGenerate, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--model", "--prompt", "--n-predict", "-n", "--temp", "--top-k",
                           "--top-p", "--min-p", "--seed", "--ctx-size", "--threads", "--json",
                           "--timings", "--cluster", "--hidden-dtype", "--cpu-target"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  EXPECT_THAT(r.err, IsEmpty());
}

TEST(GenerateCommandTest, BadArgumentsFailWithAMessage) {
  CommandResult bad = RunCommand(RunGenerate, {"--bogus"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "ringlm: unknown option --bogus (see --help)\n");

  CommandResult no_model = RunCommand(RunGenerate, {"--prompt", "hi"});
  EXPECT_EQ(no_model.exit_code, 1);
  EXPECT_EQ(no_model.err, "ringlm: INVALID_ARGUMENT: --model (or --cluster) is required\n");

  CommandResult temp =
      RunCommand(RunGenerate, {"--model", testing::StoriesModel(), "--temp", "-1"});
  EXPECT_EQ(temp.exit_code, 1);
  EXPECT_THAT(temp.err, HasSubstr("temperature = -1 is out of range"));

  CommandResult missing = RunCommand(RunGenerate, {"--model", "/nonexistent.gguf"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent.gguf"));
  for (const CommandResult& r : {bad, no_model, temp, missing}) EXPECT_THAT(r.out, IsEmpty());
}

// Greedy generation of 64 tokens, as the reference was made, for both
// bundled models: the ids and text as JSON, and the same text streamed.
TEST(GenerateCommandTest, GreedyGenerationReproducesLlamaCpp) {
  const json refs = testing::StoriesReferences();
  ASSERT_FALSE(refs["generation"].empty());
  for (const char* variant : {"f32", "q8_0"}) {
    for (const json& g : refs["generation"]) {
      const std::string prompt = g["prompt"];
      SCOPED_TRACE(std::string(variant) + " prompt '" + prompt + "'");
      const std::vector<std::string> args = {"--model",  testing::StoriesModel(variant),
                                             "--prompt", prompt,
                                             "--temp",   "0",
                                             "-n",       "64",
                                             "-t",       "1"};
      std::vector<std::string> json_args = args;
      json_args.push_back("--json");
      CommandResult as_json = RunCommand(RunGenerate, json_args);
      ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
      const json out = json::parse(as_json.out, nullptr, /*allow_exceptions=*/false);
      EXPECT_EQ(out["prompt_ids"], g["prompt_ids"]);
      EXPECT_EQ(out["ids"], g[variant]["generated_ids"]);
      EXPECT_EQ(out["text"], g[variant]["generated_text"]);

      CommandResult streamed = RunCommand(RunGenerate, args);
      ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
      EXPECT_EQ(streamed.out, g[variant]["generated_text"].get<std::string>() + "\n");
      EXPECT_THAT(streamed.err, IsEmpty());
    }
  }
}

TEST(GenerateCommandTest, TimingsGoToErr) {
  CommandResult r = RunCommand(RunGenerate, {"--model", testing::StoriesModel(), "--prompt", "Once",
                                             "--temp", "0", "-n", "4", "--timings"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("timings: load "));
  EXPECT_THAT(r.err, HasSubstr("timings: prompt 2 tokens, first token after "));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("timings")));
}

class GenerateOnClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("RINGLM_CLUSTER_KEY_FILE");
    v1::GenerateEvent first;
    first.add_prompt_ids(1);
    first.add_prompt_ids(403);
    events_.push_back(first);
    for (auto [token, text] : {std::pair(432, ","), std::pair(383, " there")}) {
      v1::GenerateEvent e;
      e.set_token(token);
      e.set_has_token(true);
      e.set_text(text);
      events_.push_back(e);
    }
  }

  std::vector<std::string> Args(std::vector<std::string> more) const {
    std::vector<std::string> args = {"--cluster", node_.address(), "--insecure", "--prompt",
                                     "Once"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  testing::FakeRingNode node_;
  std::vector<v1::GenerateEvent> events_;
};

TEST_F(GenerateOnClusterTest, StreamsTheTextAndSendsTheSettings) {
  v1::GenerateEvent done;
  done.set_finish_reason(v1::FINISH_REASON_LENGTH);
  events_.push_back(done);
  node_.SetGenerate(events_);
  CommandResult r = RunCommand(
      RunGenerate, Args({"--temp", "0", "-n", "2", "--seed", "42", "--hidden-dtype", "f16"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ", there\n");
  EXPECT_THAT(r.err, IsEmpty());
  const v1::GenerateRequest sent = node_.last_generate_request();
  EXPECT_EQ(sent.prompt(), "Once");
  EXPECT_EQ(sent.sampling().temperature(), 0.0f);
  EXPECT_EQ(sent.sampling().seed(), 42u);
  EXPECT_EQ(sent.limits().max_tokens(), 2);
  EXPECT_EQ(sent.hidden_dtype(), v1::DTYPE_F16);
}

TEST_F(GenerateOnClusterTest, JsonHasThePromptIdsIdsAndText) {
  node_.SetGenerate(events_);
  CommandResult r = RunCommand(RunGenerate, Args({"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"prompt_ids\":[1,403],\"ids\":[432,383],\"text\":\", there\"}\n");
}

TEST_F(GenerateOnClusterTest, AnErrorTheClusterReportsFailsTheCommand) {
  v1::GenerateEvent failed;
  failed.set_finish_reason(v1::FINISH_REASON_ERROR);
  failed.set_error("stage node-b is gone");
  failed.set_error_code(static_cast<int32_t>(absl::StatusCode::kUnavailable));
  events_.push_back(failed);
  node_.SetGenerate(events_);
  CommandResult r = RunCommand(RunGenerate, Args({}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, ", there\n");  // what came before the error
  EXPECT_EQ(r.err, "ringlm: UNAVAILABLE: stage node-b is gone\n");
}

TEST_F(GenerateOnClusterTest, BadClusterSettingsFailBeforeCalling) {
  CommandResult dtype = RunCommand(RunGenerate, Args({"--hidden-dtype", "q8"}));
  EXPECT_EQ(dtype.exit_code, 1);
  EXPECT_EQ(dtype.err, "ringlm: INVALID_ARGUMENT: --hidden-dtype must be f32 or f16\n");
  CommandResult no_key =
      RunCommand(RunGenerate, {"--cluster", node_.address(), "--prompt", "Once"});  // no --insecure
  EXPECT_EQ(no_key.exit_code, 1);
  EXPECT_THAT(no_key.err, HasSubstr("FAILED_PRECONDITION: no cluster key"));
  EXPECT_EQ(node_.last_generate_request().prompt(), "");  // never called
}

TEST_F(GenerateOnClusterTest, AnUnreachableNodeFails) {
  testing::RefusingPort port;
  CommandResult r =
      RunCommand(RunGenerate, {"--cluster", port.address(), "--insecure", "--prompt", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE: node " + port.address()));
}

}  // namespace
}  // namespace ringlm
