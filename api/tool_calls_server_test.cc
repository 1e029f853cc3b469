// DeepSeek V3 tool calls through the HTTP API, on a scripted backend: its
// real chat template (tests/hf_vocab; the tests skip without npm ci there)
// over tok512 with DeepSeek's markers added as control tokens, as they are
// in its vocabulary (so they decode to "" unless a tool-call scan shows them).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "api/fake_backend_for_test.h"
#include "api/openai_server.h"
#include "api/sse_frames_for_test.h"
#include "chat/npm_template_for_test.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using Json = nlohmann::json;
using testing::FakeBackend;
using testing::FakeScript;

const std::vector<std::string> kMarkers = {
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",    "<｜tool▁calls▁end｜>",     "<｜User｜>",
    "<｜Assistant｜>",        "<｜tool▁outputs▁begin｜>", "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",  "<｜tool▁outputs▁end｜>"};

// What the model writes: a sentence, then a block of two calls.
const char kReply[] =
    "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    "```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function"
    "<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
const char kWeatherTool[] =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"Now.",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},)"
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}])";

class DeepSeekToolCallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NPM_TEMPLATE_OR_SKIP(chat_template, "deepseek_v3");
    tokenizer_ = testing::Tok512WithControlTokens(kMarkers);
    ASSERT_NE(tokenizer_, nullptr);
    backend_ = std::make_unique<FakeBackend>(*tokenizer_, 2048);
    backend_->SetChatTemplate(chat_template);
    reply_ = tokenizer_->Encode(kReply, /*add_special=*/false, /*parse_special=*/true);
    backend_->SetScript([this](const GenerationRequest&) { return FakeScript{.tokens = reply_}; });
    ApiOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<ApiServer>(options, backend_.get());
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  httplib::Result Post(const std::string& body) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(10, 0);
    return client.Post("/v1/chat/completions", body, "application/json");
  }
  // The id of control token `text`.
  int32_t Id(const std::string& text) const {
    const std::vector<int32_t> ids = tokenizer_->Encode(text, false, true);
    return ids.size() == 1 ? ids[0] : -1;
  }
  static void ExpectTheTwoCalls(const Json& calls) {
    ASSERT_EQ(calls.size(), 2u) << calls;
    EXPECT_EQ(calls[0]["type"], "function");
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city":"Paris"})");
    EXPECT_EQ(calls[1]["function"]["name"], "get_time");
    EXPECT_EQ(calls[1]["function"]["arguments"], "{}");
    EXPECT_NE(calls[0]["id"], calls[1]["id"]);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<ApiServer> server_;
  std::vector<int32_t> reply_;
};

TEST_F(DeepSeekToolCallsTest, CallsComeBackWholeAndStreamed) {
  // The markers are single control tokens, which decode to nothing.
  EXPECT_EQ(std::count(reply_.begin(), reply_.end(), Id("<｜tool▁calls▁begin｜>")), 1);
  EXPECT_EQ(tokenizer_->Decode(reply_).find("tool"), std::string::npos);
  const std::string body =
      std::string(R"({"messages":[{"role":"user","content":"Weather?"}],)") + kWeatherTool + "}";
  httplib::Result r = Post(body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json choice = Json::parse(r->body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], " Checking.");  // the SPM space
  ExpectTheTwoCalls(choice["message"]["tool_calls"]);
  // The template shows no tools: the server told the model of them, and of
  // how it writes a call, in a system message (content: plain text).
  const std::string prompt = tokenizer_->Decode(backend_->submitted().at(0).prompt);
  EXPECT_NE(prompt.find("You can call these tools"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find(R"("name":"get_weather")"), std::string::npos) << prompt;
  // (tok512 decodes the markers' U+2581 as spaces.)
  EXPECT_NE(
      prompt.find("To call a tool, write:\n<｜tool calls begin｜><｜tool call begin｜>function"
                  "<｜tool sep｜>NAME\n```json\nARGUMENTS\n```<｜tool call end｜>"),
      std::string::npos)
      << prompt;

  r = Post(R"({"stream":true,)" + body.substr(1));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string content, finish;
  Json calls = Json::array();
  for (const Json& frame : testing::SseFrames(r->body)) {
    const Json& c = frame["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["delta"].contains("tool_calls")) {
      for (const Json& d : c["delta"]["tool_calls"]) calls.push_back(d);
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, " Checking.");
  EXPECT_EQ(finish, "tool_calls");
  ExpectTheTwoCalls(calls);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[1]["index"], 1);
}

TEST_F(DeepSeekToolCallsTest, AnAgentsHistoryIsRenderedAsTheTemplateWritesIt) {
  httplib::Result r = Post(std::string(R"({"messages":[
      {"role":"user","content":"Weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"18 C"}],)") +
                           kWeatherTool + "}");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::vector<int32_t> prompt = backend_->submitted().at(0).prompt;
  // The template's markers are control tokens; the call between them is
  // text, its arguments as the client sent them (compacted).
  for (const char* marker : {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                             "<｜tool▁call▁end｜>", "<｜tool▁outputs▁end｜>"}) {
    EXPECT_EQ(std::count(prompt.begin(), prompt.end(), Id(marker)), 1) << marker;
  }
  const std::string text = tokenizer_->Decode(prompt);
  const size_t call =
      text.find("Weather? function get_weather\n```json\n{\"city\":\"Paris\"}\n```");
  ASSERT_NE(call, std::string::npos) << text;
  EXPECT_NE(text.find("18 C", call), std::string::npos) << text;
}

TEST_F(DeepSeekToolCallsTest, ARequiredCallIsConstrainedToTheFamilysForm) {
  httplib::Result r =
      Post(std::string(R"({"tool_choice":{"type":"function","function":{"name":"get_time"}},)"
                       R"("messages":[{"role":"user","content":"Time?"}],)") +
           kWeatherTool + "}");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(backend_->submitted().at(0).constraint,
            R"({"type":"tool_call","family":"deepseek-v3","functions":[{"name":"get_time",)"
            R"("parameters":{"type":"object"}}]})");
  // tool_choice none: no scan, so the markers stay unshown control tokens.
  r = Post(std::string(R"({"tool_choice":"none","messages":[{"role":"user","content":"W?"}],)") +
           kWeatherTool + "}");
  ASSERT_TRUE(r);
  const Json choice = Json::parse(r->body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop") << r->body;
  EXPECT_FALSE(choice["message"].contains("tool_calls")) << r->body;
}

}  // namespace
}  // namespace ringlm
