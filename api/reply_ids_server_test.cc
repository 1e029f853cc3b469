// Through the HTTP API, on a scripted backend: a chat reply the server
// generated comes back, in the next turn's prompt, as the ids it was
// generated as, streamed or not, with the prefix cache on or off; what does
// not spell its text exactly is not kept.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/fake_backend_for_test.h"
#include "api/openai_server.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using Json = nlohmann::json;
using testing::FakeBackend;
using testing::FakeScript;

// "Hello there." one token per character (a spelling re-tokenizing never
// gives), then an end of generation. The reply text is " Hello there.".
const char kReply[] = " Hello there.";

std::vector<int32_t> Spelled(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) {
    int32_t found = -1;
    for (int32_t id = 0; id < tokenizer.n_vocab() && found < 0; ++id) {
      if (tokenizer.TokenToPiece(id) == std::string(1, c)) found = id;
    }
    EXPECT_GE(found, 0) << c;
    ids.push_back(found);
  }
  return ids;
}

class ReplyIdsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::Tok512Tokenizer();
    ASSERT_NE(tokenizer_, nullptr);
    spelled_ = Spelled(*tokenizer_, kReply);
  }
  void TearDown() override {
    for (auto& s : servers_) s->Stop();
  }

  // A server on a new fake backend whose every request replies `tokens`.
  std::pair<ApiServer*, FakeBackend*> Start(bool prefix_cache, std::vector<int32_t> tokens) {
    backends_.push_back(std::make_unique<FakeBackend>(*tokenizer_));
    FakeBackend* backend = backends_.back().get();
    backend->SetScript([tokens](const GenerationRequest&) { return FakeScript{.tokens = tokens}; });
    ApiOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.prefix_cache.enabled = prefix_cache;
    servers_.push_back(std::make_unique<ApiServer>(options, backend));
    EXPECT_TRUE(servers_.back()->Start().ok());
    return {servers_.back().get(), backend};
  }

  // POSTs `body` and returns the reply's text (streamed: the deltas joined).
  static std::string Post(ApiServer* server, const std::string& path, Json body) {
    httplib::Client client("127.0.0.1", server->port());
    client.set_read_timeout(10, 0);
    httplib::Result r = client.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 200) << r->body;
    if (!body.value("stream", false)) {
      Json out = Json::parse(r->body);
      return path == "/v1/completions" ? out["choices"][0]["text"]
                                       : out["choices"][0]["message"]["content"];
    }
    std::string text;
    for (size_t at = r->body.find("data: {"); at != std::string::npos;
         at = r->body.find("data: {", at + 1)) {
      Json frame = Json::parse(r->body.substr(at + 6, r->body.find("\n\n", at) - at - 6));
      const Json& delta = frame["choices"][0]["delta"];
      if (delta.contains("content")) text += delta["content"].get<std::string>();
    }
    return text;
  }

  static Json Turn(const std::vector<std::pair<std::string, std::string>>& messages,
                   bool stream = false) {
    Json out = {{"messages", Json::array()}, {"stream", stream}};
    for (const auto& [role, content] : messages) {
      out["messages"].push_back({{"role", role}, {"content", content}});
    }
    return out;
  }

  static bool StartsWith(const std::vector<int32_t>& ids, const std::vector<int32_t>& prefix) {
    return ids.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), ids.begin());
  }
  std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::vector<int32_t> WithEos(std::vector<int32_t> ids) {
    ids.push_back(tokenizer_->eos_id());
    return ids;
  }

  const Tokenizer* tokenizer_ = nullptr;
  std::vector<int32_t> spelled_;
  std::vector<std::unique_ptr<FakeBackend>> backends_;
  std::vector<std::unique_ptr<ApiServer>> servers_;
};

TEST_F(ReplyIdsServerTest, TheNextTurnsPromptHoldsTheGeneratedIdsWithTheCacheOnOrOff) {
  std::vector<std::vector<int32_t>> prompts[2];  // per cache setting: each second turn's prompt
  for (bool cache : {true, false}) {
    for (bool stream : {false, true}) {
      SCOPED_TRACE(absl::StrCat(cache ? "prefix cache on" : "--no-prefix-cache",
                                stream ? ", streamed" : ""));
      auto [server, backend] = Start(cache, WithEos(spelled_));  // a store of its own
      const std::string content =
          Post(server, "/v1/chat/completions", Turn({{"user", "Hi"}}, stream));
      ASSERT_EQ(content, kReply);
      Post(server, "/v1/chat/completions",
           Turn({{"user", "Hi"}, {"assistant", content}, {"user", "More"}}));
      const std::vector<GenerationRequest> sent = backend->submitted();
      ASSERT_EQ(sent.size(), 2u);
      const GenerationRequest& first = sent[0];
      const GenerationRequest& second = sent[1];
      EXPECT_TRUE(StartsWith(second.prompt, Concat(first.prompt, spelled_)));
      prompts[cache ? 0 : 1].push_back(second.prompt);
    }
  }
  EXPECT_EQ(prompts[0], prompts[1]);
}

// The second turn's prompt on a fresh server, which generated nothing.
TEST_F(ReplyIdsServerTest, WhatIsNotAChatReplySpelledExactlyIsNotKept) {
  const auto fresh_prompt = [&](const std::string& content) {
    auto [server, backend] = Start(true, {});
    Post(server, "/v1/chat/completions",
         Turn({{"user", "Hi"}, {"assistant", content}, {"user", "More"}}));
    return backend->submitted().back().prompt;
  };
  const auto second_prompt = [&](ApiServer* server, FakeBackend* backend,
                                 const std::string& content) {
    Post(server, "/v1/chat/completions",
         Turn({{"user", "Hi"}, {"assistant", content}, {"user", "More"}}));
    return backend->submitted().back().prompt;
  };
  {
    // A text completion is not a chat reply.
    auto [server, backend] = Start(true, WithEos(spelled_));
    const std::string text = Post(server, "/v1/completions", {{"prompt", "Hi"}});
    ASSERT_EQ(text, kReply);
    EXPECT_EQ(second_prompt(server, backend, text), fresh_prompt(text));
  }
  {
    // A stop string that cuts the reply inside a token: no ids spell the text.
    std::vector<int32_t> ids = Spelled(*tokenizer_, " Hello");
    int32_t long_token = -1;
    for (int32_t id : tokenizer_->Encode("there", false, false)) {
      if (tokenizer_->TokenToPiece(id).size() >= 2) long_token = id;
    }
    ASSERT_GE(long_token, 0);
    const std::string piece = tokenizer_->TokenToPiece(long_token);
    ids.push_back(long_token);
    auto [server, backend] = Start(true, WithEos(ids));
    Json turn = Turn({{"user", "Hi"}});
    turn["stop"] = piece.substr(1);
    const std::string content = Post(server, "/v1/chat/completions", turn);
    ASSERT_EQ(content, " Hello" + piece.substr(0, 1));
    EXPECT_EQ(second_prompt(server, backend, content), fresh_prompt(content));
  }
  {
    // A stop string at a token boundary keeps the ids before it.
    auto [server, backend] = Start(true, WithEos(spelled_));
    Json turn = Turn({{"user", "Hi"}});
    turn["stop"] = " there";
    const std::string content = Post(server, "/v1/chat/completions", turn);
    ASSERT_EQ(content, " Hello");
    const std::vector<int32_t> first = backend->submitted().back().prompt;
    EXPECT_TRUE(StartsWith(second_prompt(server, backend, content),
                           Concat(first, Spelled(*tokenizer_, " Hello"))));
    EXPECT_NE(second_prompt(server, backend, content), fresh_prompt(content));
  }
}

}  // namespace
}  // namespace ringlm
