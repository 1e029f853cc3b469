#include "api/completion_request.h"

#include <string>

#include "api/api_error.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

void ExpectInvalid(const absl::StatusOr<CompletionRequest>& r, const std::string& param) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(ErrorParam(r.status()), param) << r.status();
}

TEST(CompletionRequestTest, ParsesChatFieldsAndDefaults) {
  absl::StatusOr<CompletionRequest> r = ParseChatCompletionRequest(R"({
    "model": "m", "stream": true, "stream_options": {"include_usage": true},
    "messages": [{"role": "developer", "content": "Be nice."},
                 {"role": "user", "content": [{"type": "text", "text": "Hel"},
                                              {"type": "text", "text": "lo"}]},
                 {"role": "assistant", "content": null}],
    "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 42, "stop": "\n",
    "presence_penalty": 0.25, "frequency_penalty": -0.5, "n": 1, "logprobs": false,
    "user": "u-1"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, CompletionRequest::Kind::kChat);
  EXPECT_EQ(r->model, "m");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "Hel\nlo");
  EXPECT_EQ(r->messages[2].content, "");
  EXPECT_EQ(r->max_tokens, 7);
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r->sampling.top_p, 0.9f);
  EXPECT_EQ(r->sampling.seed, 42u);
  EXPECT_FLOAT_EQ(r->sampling.presence_penalty, 0.25f);
  EXPECT_FLOAT_EQ(r->sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(r->stop, std::vector<std::string>{"\n"});

  absl::StatusOr<CompletionRequest> d =
      ParseChatCompletionRequest(R"({"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->stream);
  EXPECT_FALSE(d->max_tokens.has_value());
  EXPECT_FLOAT_EQ(d->sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(d->sampling.top_p, 1.0f);
}

TEST(CompletionRequestTest, MaxCompletionTokensWins) {
  absl::StatusOr<CompletionRequest> r = ParseChatCompletionRequest(
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"max_completion_tokens":9})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_tokens, 9);
}

TEST(CompletionRequestTest, RejectsBadFieldsNamingThem) {
  const std::string ok_messages = R"("messages":[{"role":"user","content":"hi"}])";
  auto chat = [&](const std::string& extra) {
    return ParseChatCompletionRequest("{" + ok_messages + extra + "}");
  };
  ExpectInvalid(ParseChatCompletionRequest("{not json"), "");
  ExpectInvalid(ParseChatCompletionRequest("[1,2]"), "");
  ExpectInvalid(ParseChatCompletionRequest("{}"), "messages");
  ExpectInvalid(ParseChatCompletionRequest(R"({"messages":[]})"), "messages");
  ExpectInvalid(ParseChatCompletionRequest(R"({"messages":"hi"})"), "messages");
  ExpectInvalid(ParseChatCompletionRequest(R"({"messages":[{"role":"tool","content":"x"}]})"),
                "messages[0].tool_call_id");
  ExpectInvalid(ParseChatCompletionRequest(R"({"messages":[{"role":"user","content":5}]})"),
                "messages[0].content");
  ExpectInvalid(ParseChatCompletionRequest(
                    R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"),
                "messages[0].content[0].type");
  ExpectInvalid(chat(R"(,"n":2)"), "n");
  ExpectInvalid(chat(R"(,"max_tokens":0)"), "max_tokens");
  ExpectInvalid(chat(R"(,"max_completion_tokens":-3)"), "max_completion_tokens");
  ExpectInvalid(chat(R"(,"max_tokens":"10")"), "max_tokens");
  ExpectInvalid(chat(R"(,"temperature":"hot")"), "temperature");
  ExpectInvalid(chat(R"(,"temperature":-1)"), "temperature");
  ExpectInvalid(chat(R"(,"temperature":2.5)"), "temperature");
  // Fields this server does not implement are refused by name, not ignored.
  ExpectInvalid(chat(R"(,"tools":[{"type":"function","function":{"name":"f g"}}])"),
                "tools[0].function.name");
  ExpectInvalid(chat(R"(,"tools":[{"type":"function","function":{"name":"f"}},)"
                     R"({"type":"function","function":{"name":"f"}}])"),
                "tools[1].function.name");
  ExpectInvalid(chat(R"(,"tools":[{"type":"retrieval"}])"), "tools[0].type");
  ExpectInvalid(chat(R"(,"tools":[{"type":"function","function":{"name":"f","parameters":1}}])"),
                "tools[0].function.parameters");
  ExpectInvalid(chat(R"(,"tool_choice":"required")"), "tool_choice");  // no tools
  ExpectInvalid(chat(R"(,"tools":[{"type":"function","function":{"name":"f"}}],)"
                     R"("tool_choice":{"type":"function","function":{"name":"g"}})"),
                "tool_choice.function.name");
  ExpectInvalid(chat(R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{}}})"),
                "response_format.json_schema.name");
  ExpectInvalid(chat(R"(,"some_future_field":{"x":1})"), "some_future_field");
  ExpectInvalid(chat(R"(,"response_format":{"type":"sound"})"), "response_format.type");
  ExpectInvalid(chat(R"(,"logprobs":1)"), "logprobs");
  ExpectInvalid(chat(R"(,"top_logprobs":3)"), "top_logprobs");  // needs logprobs: true
  ExpectInvalid(chat(R"(,"logprobs":true,"top_logprobs":21)"), "top_logprobs");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":"x","logprobs":6})"), "logprobs");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":"x","logprobs":true})"), "logprobs");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":"x","top_logprobs":1})"), "top_logprobs");
  // Their "ask for nothing" values are what clients send by default.
  for (const char* fine : {R"(,"logprobs":false)", R"(,"tools":[])", R"(,"tool_choice":"none")",
                           R"(,"response_format":{"type":"text"})", R"(,"logit_bias":{})"}) {
    EXPECT_TRUE(chat(fine).ok()) << fine;
  }
  ExpectInvalid(chat(R"(,"prompt":"x")"), "prompt");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":"x","messages":[]})"), "messages");
  ExpectInvalid(chat(R"(,"top_p":0)"), "top_p");
  ExpectInvalid(chat(R"(,"presence_penalty":3)"), "presence_penalty");
  ExpectInvalid(chat(R"(,"seed":1.5)"), "seed");
  ExpectInvalid(chat(R"(,"stream":"yes")"), "stream");
  ExpectInvalid(chat(R"(,"model":7)"), "model");
  ExpectInvalid(chat(R"(,"stop":["a","b","c","d","e"])"), "stop");
  ExpectInvalid(chat(R"(,"stop":[1])"), "stop");
  ExpectInvalid(chat(R"(,"stream_options":{"include_usage":1})"), "stream_options.include_usage");
}

TEST(CompletionRequestTest, LogprobsAsChatAndCompletionsSpellThem) {
  absl::StatusOr<CompletionRequest> chat = ParseChatCompletionRequest(
      R"({"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":20})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_TRUE(chat->logprobs);
  EXPECT_EQ(chat->top_logprobs, 20);
  absl::StatusOr<CompletionRequest> text =
      ParseTextCompletionRequest(R"({"prompt":"Hi","logprobs":0})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(text->logprobs);
  EXPECT_EQ(text->top_logprobs, 0);
  absl::StatusOr<CompletionRequest> none = ParseTextCompletionRequest(R"({"prompt":"Hi"})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->logprobs);
}

TEST(CompletionRequestTest, AgentHistoriesToolsAndFormatsParse) {
  absl::StatusOr<CompletionRequest> r = ParseChatCompletionRequest(R"({"messages":[
      {"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"18 C"}],
    "tools":[{"type":"function","function":{"name":"get_weather","description":"Now.",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
    "tool_choice":"required","parallel_tool_calls":false,
    "response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"}}}})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->messages.size(), 3u);
  ASSERT_EQ(r->messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r->messages[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(r->messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r->messages[1].tool_calls[0].arguments, R"({"city":"Paris"})");  // compact
  EXPECT_EQ(r->messages[2].role, "tool");
  EXPECT_EQ(r->messages[2].tool_call_id, "call_1");
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->tools[0].description, "Now.");
  EXPECT_EQ(r->tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_FALSE(r->parallel_tool_calls);
  EXPECT_EQ(r->response_format.type, ResponseFormat::Type::kJsonSchema);
  EXPECT_EQ(r->response_format.schema["type"], "object");
  // Arguments that are not a JSON object are refused.
  absl::StatusOr<CompletionRequest> bad = ParseChatCompletionRequest(
      R"({"messages":[{"role":"assistant","tool_calls":[{"type":"function",)"
      R"("function":{"name":"f","arguments":"[1]"}}]}]})");
  ASSERT_FALSE(bad.ok());
}

TEST(CompletionRequestTest, JoinsTextPartsWithANewline) {
  absl::StatusOr<CompletionRequest> r = ParseChatCompletionRequest(
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"What is"},)"
      R"({"type":"text","text":"the best book"}]}],"temperature":2})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->messages[0].content, "What is\nthe best book");
  EXPECT_FLOAT_EQ(r->sampling.temperature, 2.0f);
}

TEST(CompletionRequestTest, ParsesTextPrompt) {
  absl::StatusOr<CompletionRequest> r =
      ParseTextCompletionRequest(R"({"prompt":["Once upon"],"stop":["a","b"],"max_tokens":3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, CompletionRequest::Kind::kText);
  EXPECT_EQ(r->prompt, "Once upon");
  EXPECT_EQ(r->stop.size(), 2u);
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":3})"), "prompt");
  ExpectInvalid(ParseTextCompletionRequest(R"({})"), "prompt");
}

TEST(CompletionRequestTest, ParsesTokenIdPrompts) {
  absl::StatusOr<CompletionRequest> r = ParseTextCompletionRequest(R"({"prompt":[1, 403, 407]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt_ids, (std::vector<int32_t>{1, 403, 407}));
  EXPECT_TRUE(r->prompt.empty());
  r = ParseTextCompletionRequest(R"({"prompt":[[1, 2]]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt_ids, (std::vector<int32_t>{1, 2}));
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":[1, -2]})"), "prompt");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":[1, 2.5]})"), "prompt");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":[1, "a"]})"), "prompt");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":[4294967296]})"), "prompt");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":[]})"), "prompt");
  ExpectInvalid(ParseTextCompletionRequest(R"({"prompt":[[1], [2]]})"), "prompt");
  // A list of prompts is refused for what it is, not as malformed token ids.
  for (const char* body : {R"({"prompt":[[1, 2], [3]]})", R"({"prompt":["a", "b"]})"}) {
    absl::StatusOr<CompletionRequest> batch = ParseTextCompletionRequest(body);
    ExpectInvalid(batch, "prompt");
    EXPECT_NE(batch.status().message().find("only one prompt per request is supported"),
              std::string::npos)
        << batch.status();
  }
  // Token ids mixed with other values are still malformed token ids.
  absl::StatusOr<CompletionRequest> mixed = ParseTextCompletionRequest(R"({"prompt":[1, [2]]})");
  ExpectInvalid(mixed, "prompt");
  EXPECT_NE(mixed.status().message().find("integers >= 0"), std::string::npos) << mixed.status();
}

TEST(CompletionRequestTest, NullCountsAsAbsent) {
  absl::StatusOr<CompletionRequest> r = ParseChatCompletionRequest(
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":null,"stop":null,"n":null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->max_tokens.has_value());
  EXPECT_TRUE(r->stop.empty());
}

}  // namespace
}  // namespace ringlm
