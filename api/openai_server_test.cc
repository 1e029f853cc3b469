// The HTTP API over real loopback HTTP, against a scripted backend.
#include "api/openai_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/fake_backend_for_test.h"
#include "api/openai_format.h"
#include "api/sse_frames_for_test.h"
#include "api/web_page.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using Json = nlohmann::json;
using testing::FakeBackend;
using testing::FakeScript;
using testing::SseFrames;

class ApiServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = testing::Tok512Tokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }

  // `names`: the model's served names (empty = its model id).
  void StartServer(ApiOptions options = {}, uint32_t context = 512,
                   std::vector<std::string> names = {}) {
    backend_ = std::make_unique<FakeBackend>(*tokenizer_, context);
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<ApiServer>(
        options, std::vector<ApiModel>{{.backend = backend_.get(), .names = std::move(names)}});
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
  }
  void TearDown() override {
    if (server_) server_->Stop();
    server_.reset();
    backend_.reset();
  }

  std::unique_ptr<httplib::Client> Client() {
    auto client = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client->set_read_timeout(10, 0);
    return client;
  }
  httplib::Result Post(const std::string& path, const std::string& body,
                       httplib::Headers headers = {}) {
    return Client()->Post(path.c_str(), headers, body, "application/json");
  }

  // The tokens of `text` and the text they stream back as (with the SPM space).
  static std::vector<int32_t> Tokens(const std::string& text) {
    return tokenizer_->Encode(text, false, false);
  }
  static std::string Pieces(const std::vector<int32_t>& ids) {
    std::string out;
    for (int32_t id : ids) out += tokenizer_->TokenToPiece(id);
    return out;
  }
  void Script(const std::string& text, FakeScript base = {}) {
    base.tokens = Tokens(text);
    backend_->SetScript([base](const GenerationRequest&) { return base; });
  }

  static void ExpectError(const httplib::Result& r, int status, const std::string& type,
                          const Json& code, const Json& param) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    Json body = Json::parse(r->body, nullptr, false);
    ASSERT_TRUE(body.contains("error")) << r->body;
    const Json& e = body["error"];
    EXPECT_TRUE(e["message"].is_string());
    EXPECT_FALSE(e["message"].get<std::string>().empty());
    EXPECT_EQ(e["type"], type) << r->body;
    EXPECT_EQ(e["code"], code) << r->body;
    EXPECT_EQ(e["param"], param) << r->body;
  }

  static inline const Tokenizer* tokenizer_ = nullptr;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<ApiServer> server_;
};

const char kHello[] = R"({"messages":[{"role":"user","content":"Hello"}]})";

TEST_F(ApiServerTest, ChatCompletionHasOpenAiShape) {
  StartServer();
  Script("Once upon a time", FakeScript{.cached_tokens = 3});
  httplib::Result r = Post("/v1/chat/completions", kHello);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_GT(j["created"].get<int64_t>(), 1700000000);
  EXPECT_EQ(j["model"], "stories260K");
  EXPECT_EQ(j["system_fingerprint"], SystemFingerprint("stories260K"));
  EXPECT_EQ(j["system_fingerprint"].get<std::string>().size(), 19u);
  EXPECT_EQ(r->get_header_value("x-request-id"), j["id"]);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], Pieces(Tokens("Once upon a time")));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");

  std::vector<GenerationRequest> sent = backend_->submitted();
  ASSERT_EQ(sent.size(), 1u);
  // The plain transcript, tokenized with BOS.
  EXPECT_EQ(sent[0].prompt, tokenizer_->Encode("User: Hello\nAssistant:", true, true));
  const Json& usage = j["usage"];
  EXPECT_EQ(usage["prompt_tokens"], sent[0].prompt.size());
  EXPECT_EQ(usage["completion_tokens"], Tokens("Once upon a time").size());
  EXPECT_EQ(usage["total_tokens"], sent[0].prompt.size() + Tokens("Once upon a time").size());
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 3);
  // OpenAI defaults, and max_tokens = the rest of the context.
  EXPECT_EQ(sent[0].max_tokens, static_cast<int32_t>(512 - sent[0].prompt.size()));
  EXPECT_FLOAT_EQ(sent[0].sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(sent[0].sampling.top_p, 1.0f);
}

TEST_F(ApiServerTest, SamplingFieldsReachTheBackend) {
  StartServer();
  Script("Hi");
  httplib::Result r = Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],
      "model":"stories260K","temperature":0,"top_p":0.5,"seed":7,"max_tokens":9,
      "presence_penalty":1,"frequency_penalty":0.5})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  GenerationRequest sent = backend_->submitted().at(0);
  EXPECT_EQ(sent.sampling.temperature, 0.0f);
  EXPECT_EQ(sent.sampling.top_p, 0.5f);
  EXPECT_EQ(sent.sampling.seed, 7u);
  EXPECT_EQ(sent.sampling.presence_penalty, 1.0f);
  EXPECT_EQ(sent.sampling.frequency_penalty, 0.5f);
  EXPECT_EQ(sent.max_tokens, 9);
}

TEST_F(ApiServerTest, MaxTokensEndsWithLength) {
  StartServer();
  Script("Once upon a time there was a cat");
  httplib::Result r = Post("/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2})");
  ASSERT_TRUE(r);
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);
  EXPECT_EQ(j["choices"][0]["message"]["content"],
            Pieces({Tokens("Once upon a time there was a cat")[0],
                    Tokens("Once upon a time there was a cat")[1]}));
}

TEST_F(ApiServerTest, StreamingFramesAreExact) {
  StartServer();
  const std::string text = "Once upon a time";
  Script(text, FakeScript{.cached_tokens = 2});
  httplib::Result r =
      Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hello"}],
           "stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::vector<Json> frames = SseFrames(r->body);
  ASSERT_GE(frames.size(), 4u) << r->body;
  const std::string id = frames[0]["id"];
  EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(r->get_header_value("x-request-id"), id);
  EXPECT_EQ(frames[0]["system_fingerprint"], SystemFingerprint("stories260K"));
  for (const Json& f : frames) {
    EXPECT_EQ(f["id"], id);
    EXPECT_EQ(f["object"], "chat.completion.chunk");
    EXPECT_EQ(f["model"], "stories260K");
  }
  // First: the role. Then content pieces. Then an empty delta with the reason.
  EXPECT_EQ(frames[0]["choices"][0]["delta"], (Json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(frames[0]["choices"][0]["finish_reason"].is_null());
  std::string content;
  for (size_t i = 1; i + 2 < frames.size(); ++i) {
    const Json& choice = frames[i]["choices"][0];
    EXPECT_TRUE(choice["finish_reason"].is_null());
    EXPECT_EQ(choice["delta"].size(), 1u) << choice;
    content += choice["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, Pieces(Tokens(text)));
  const Json& last = frames[frames.size() - 2];
  EXPECT_EQ(last["choices"][0]["delta"], Json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  const Json& usage = frames.back();
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], Tokens(text).size());
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

TEST_F(ApiServerTest, StreamingWithoutIncludeUsageHasNoUsageChunk) {
  StartServer();
  Script("Hi there");
  httplib::Result r =
      Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"stream":true})");
  ASSERT_TRUE(r);
  std::vector<Json> frames = SseFrames(r->body);
  ASSERT_GE(frames.size(), 2u);
  EXPECT_EQ(frames.back()["choices"][0]["finish_reason"], "stop");
  for (const Json& f : frames) EXPECT_FALSE(f.contains("usage"));
}

TEST_F(ApiServerTest, TextCompletionsStreamAndNot) {
  StartServer();
  Script("a cat");
  httplib::Result r = Post("/v1/completions", R"({"prompt":"Once upon a time"})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["text"], Pieces(Tokens("a cat")));
  EXPECT_EQ(backend_->submitted().at(0).prompt, tokenizer_->Encode("Once upon a time", true, true));

  r = Post("/v1/completions", R"({"prompt":"Once","stream":true})");
  ASSERT_TRUE(r);
  std::vector<Json> frames = SseFrames(r->body);
  std::string text;
  for (const Json& f : frames) {
    EXPECT_EQ(f["object"], "text_completion");
    text += f["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, Pieces(Tokens("a cat")));
  EXPECT_EQ(frames.back()["choices"][0]["finish_reason"], "stop");
}

TEST_F(ApiServerTest, StopStringAcrossTokensCutsAndCancels) {
  StartServer();
  const std::string text = "Once upon a time there was a cat who lived in a big house";
  Script(text, FakeScript{.delay = absl::Milliseconds(2)});
  const std::string full = Pieces(Tokens(text));
  // "e was" spans the tokens of "there" and "was".
  httplib::Result r =
      Post("/v1/chat/completions",
           R"({"messages":[{"role":"user","content":"x"}],"stop":["e was","zzz"]})");
  ASSERT_TRUE(r);
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], full.substr(0, full.find("e was")));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(j["usage"]["completion_tokens"].get<size_t>(), Tokens(text).size());
  EXPECT_EQ(backend_->cancels(), 1);  // generation stopped early
}

TEST_F(ApiServerTest, StreamingHoldsBackAPossibleStopAndNeverLeaksIt) {
  StartServer();
  const std::string text = "Once upon a time there was a cat";
  Script(text);
  const std::string full = Pieces(Tokens(text));
  // "a timer" never occurs: "a time" is held back until " there" rules it out.
  httplib::Result r =
      Post("/v1/chat/completions",
           R"({"messages":[{"role":"user","content":"x"}],"stream":true,"stop":"a timer"})");
  ASSERT_TRUE(r);
  std::vector<Json> frames = SseFrames(r->body);
  std::string content;
  const std::string stop = "a timer";
  for (size_t i = 1; i + 1 < frames.size(); ++i) {
    const std::string piece = frames[i]["choices"][0]["delta"]["content"];
    content += piece;
    for (size_t len = 1; len < stop.size() && len <= content.size(); ++len) {
      EXPECT_NE(content.substr(content.size() - len), stop.substr(0, len))
          << "emitted a possible stop start: '" << content << "'";
    }
  }
  EXPECT_EQ(content, full);

  // A real stop in a stream: nothing of it leaks, finish_reason stop.
  r = Post("/v1/chat/completions",
           R"({"messages":[{"role":"user","content":"x"}],"stream":true,"stop":["re was"]})");
  ASSERT_TRUE(r);
  frames = SseFrames(r->body);
  content.clear();
  for (size_t i = 1; i + 1 < frames.size(); ++i) {
    content += frames[i]["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, full.substr(0, full.find("re was")));
  EXPECT_EQ(frames.back()["choices"][0]["finish_reason"], "stop");
}

TEST_F(ApiServerTest, RequestErrorsHaveOpenAiShape) {
  ApiOptions options;
  options.max_body_bytes = 4096;
  StartServer(options, /*context=*/32);
  Script("Hi");
  ExpectError(Post("/v1/chat/completions", "{oops"), 400, "invalid_request_error", nullptr,
              nullptr);
  ExpectError(Post("/v1/chat/completions", R"({"messages":[]})"), 400, "invalid_request_error",
              nullptr, "messages");
  ExpectError(Post("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})"),
              400, "invalid_request_error", nullptr, "temperature");
  ExpectError(Post("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})"),
              400, "invalid_request_error", nullptr, "max_tokens");
  ExpectError(Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"n":2})"),
              400, "invalid_request_error", nullptr, "n");
  ExpectError(Post("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":"x"}],"model":"gpt-4"})"),
              404, "invalid_request_error", "model_not_found", "model");
  ExpectError(
      Post("/v1/chat/completions",
           Json{{"messages", {{{"role", "user"}, {"content", std::string(200, 'x')}}}}}.dump()),
      400, "invalid_request_error", "context_length_exceeded", "messages");
  ExpectError(Post("/v1/completions", Json{{"prompt", std::string(8000, 'x')}}.dump()), 413,
              "invalid_request_error", "request_too_large", nullptr);
  ExpectError(Client()->Get("/v1/nothing"), 404, "invalid_request_error", "not_found", nullptr);
  EXPECT_TRUE(backend_->submitted().empty());  // none of these reached the backend
}

// Text longer than the context could hold whatever it tokenizes to is
// refused from its size, with the error a tokenized prompt gets.
TEST_F(ApiServerTest, PromptTooLongForAnyTokenizationIsRefusedFromItsSize) {
  StartServer({}, /*context=*/32);
  const std::string text(1 << 20, 'x');  // a large body: it takes a large-body turn too
  httplib::Result r = Post("/v1/completions", Json{{"prompt", text}}.dump());
  ExpectError(r, 400, "invalid_request_error", "context_length_exceeded", "prompt");
  EXPECT_NE(r->body.find("maximum context length is 32 tokens"), std::string::npos) << r->body;
  ExpectError(Post("/v1/chat/completions",
                   Json{{"messages", {{{"role", "user"}, {"content", text}}}}}.dump()),
              400, "invalid_request_error", "context_length_exceeded", "messages");
  ExpectError(Post("/v1/responses", Json{{"input", text}}.dump()), 400, "invalid_request_error",
              "context_length_exceeded", "input");
  EXPECT_TRUE(backend_->submitted().empty());
}

TEST_F(ApiServerTest, BackendErrorsMapToStatuses) {
  StartServer();
  Script("", FakeScript{.submit_error = absl::InternalError("boom")});
  ExpectError(Post("/v1/chat/completions", kHello), 500, "server_error", nullptr, nullptr);
  Script("", FakeScript{.submit_error = absl::ResourceExhaustedError("busy")});
  ExpectError(Post("/v1/chat/completions", kHello), 503, "server_error", "server_overloaded",
              nullptr);
  Script("Hi there",
         FakeScript{.error = absl::UnavailableError(
                        "node node-3f2a (10.0.0.7:47801) stopped answering: stage 2 died")});
  httplib::Result plain = Post("/v1/chat/completions", kHello);
  ExpectError(plain, 503, "server_error", "service_unavailable", nullptr);
  // Errors from inside the cluster name no node, address or stage.
  for (const char* internal : {"node-3f2a", "10.0.0.7", "stage 2"}) {
    EXPECT_EQ(plain->body.find(internal), std::string::npos) << plain->body;
  }
  // Streaming: headers are sent, so the error arrives in-band before [DONE].
  httplib::Result r =
      Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"stream":true})");
  ASSERT_TRUE(r);
  std::vector<Json> frames = SseFrames(r->body);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back()["error"]["code"], "service_unavailable");
  EXPECT_EQ(r->body.find("10.0.0.7"), std::string::npos) << r->body;
}

TEST_F(ApiServerTest, NotReadyGets503AndAFullLineGets429WithRetryAfter) {
  StartServer({.admission = {.max_running = 1, .max_queued = 0}});
  backend_->SetReady(absl::UnavailableError("waiting for 2 more nodes"));
  ExpectError(Post("/v1/chat/completions", kHello), 503, "server_error", "service_unavailable",
              nullptr);
  backend_->SetReady(absl::OkStatus());
  Script("Once upon a time there was", FakeScript{.delay = absl::Milliseconds(100)});
  std::thread slow([this] { Post("/v1/chat/completions", kHello); });
  for (int i = 0; i < 500 && backend_->submitted().empty(); ++i)
    absl::SleepFor(absl::Milliseconds(2));
  httplib::Result refused = Post("/v1/chat/completions", kHello);
  ExpectError(refused, 429, "requests", "rate_limit_exceeded", nullptr);
  ASSERT_TRUE(refused);
  int retry_after = 0;
  EXPECT_TRUE(absl::SimpleAtoi(refused->get_header_value("Retry-After"), &retry_after));
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 60);
  slow.join();
  httplib::Result r = Post("/v1/chat/completions", kHello);  // the slot is free again
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ApiServerTest, PastTheRunningLimitRequestsWaitInLineAndAllComplete) {
  // One slot and a line of 3: four requests sent at once all complete, one
  // at a time, each with its whole reply.
  StartServer({.admission = {.max_running = 1, .max_queued = 3}});
  Script("Once upon a time there was", FakeScript{.delay = absl::Milliseconds(20)});
  std::vector<int> statuses(4, 0);
  std::vector<std::string> texts(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      httplib::Result r = Post("/v1/chat/completions", kHello);
      if (!r) return;
      statuses[i] = r->status;
      Json body = Json::parse(r->body, nullptr, false);
      if (r->status == 200) texts[i] = body["choices"][0]["message"]["content"];
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(statuses[i], 200) << i;
    EXPECT_EQ(texts[i], texts[0]) << i;
  }
  EXPECT_EQ(backend_->submitted().size(), 4u);
}

TEST_F(ApiServerTest, ApiKeyIsRequiredOnV1Paths) {
  ApiOptions options;
  options.api_key = "sekrit";
  StartServer(options);
  Script("Hi");
  ExpectError(Post("/v1/chat/completions", kHello), 401, "authentication_error", "invalid_api_key",
              nullptr);
  ExpectError(Post("/v1/chat/completions", kHello, {{"Authorization", "Bearer wrong"}}), 401,
              "authentication_error", "invalid_api_key", nullptr);
  ExpectError(Client()->Get("/v1/models"), 401, "authentication_error", "invalid_api_key", nullptr);
  httplib::Result ok = Post("/v1/chat/completions", kHello, {{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  httplib::Result health = Client()->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(ApiServerTest, ModelsHealthTopologyAndPage) {
  StartServer();
  httplib::Result r = Client()->Get("/v1/models");
  ASSERT_TRUE(r);
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "stories260K");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(Json::parse(Client()->Get("/v1/models/stories260K")->body)["id"], "stories260K");
  ExpectError(Client()->Get("/v1/models/gpt-4"), 404, "invalid_request_error", "model_not_found",
              "model");

  backend_->SetReady(absl::UnavailableError("no stage holds layers 4-5"));
  httplib::Result health = Client()->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("no stage holds layers 4-5"), std::string::npos);
  backend_->SetReady(absl::OkStatus());
  health = Client()->Get("/health");
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(Json::parse(health->body), (Json{{"status", "ok"}}));

  EXPECT_EQ(Client()->Get("/v1/topology")->body, R"({"nodes":[{"id":"n1"}]})");
  httplib::Result page = Client()->Get("/");
  ASSERT_TRUE(page);
  if (EmbeddedWebPage().empty()) {
    EXPECT_EQ(page->status, 404);
  } else {
    EXPECT_EQ(page->status, 200);
    EXPECT_EQ(page->body, EmbeddedWebPage());
    EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  }
}

TEST_F(ApiServerTest, ConcurrentStreamsNeverCross) {
  StartServer();
  // Each client's prompt names its story; the fake answers with that story.
  backend_->SetScript([](const GenerationRequest& request) {
    const std::string prompt = tokenizer_->Decode(request.prompt);
    const size_t at = prompt.find("story ");
    const std::string n = prompt.substr(at + 6, 1);
    FakeScript s;
    s.tokens = Tokens("The dog number " + n + " ran to the park " + n + " times.");
    s.delay = absl::Milliseconds(3);
    return s;
  });
  constexpr int kClients = 8;
  std::vector<std::string> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([this, i, &got] {
      Json body = {{"messages", {{{"role", "user"}, {"content", absl::StrCat("story ", i)}}}},
                   {"stream", true}};
      httplib::Result r = Post("/v1/chat/completions", body.dump());
      if (!r) return;
      for (const Json& f : SseFrames(r->body)) {
        const Json& delta = f["choices"][0]["delta"];
        if (delta.contains("content")) got[i] += delta["content"].get<std::string>();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(
        got[i],
        Pieces(Tokens(absl::StrCat("The dog number ", i, " ran to the park ", i, " times."))));
  }
}

TEST_F(ApiServerTest, ClientDisconnectCancelsGeneration) {
  StartServer();
  std::vector<int32_t> many;
  for (int i = 0; i < 50; ++i) {
    for (int32_t t : Tokens(" and then")) many.push_back(t);
  }
  backend_->SetScript([many](const GenerationRequest&) {
    return FakeScript{.tokens = many, .delay = absl::Milliseconds(10)};
  });
  {
    auto client = Client();
    int chunks = 0;
    httplib::Result r = client->Post(
        "/v1/chat/completions", httplib::Headers{},
        R"({"messages":[{"role":"user","content":"x"}],"stream":true})", "application/json");
    (void)r;
    // The plain Post above reads the whole stream; use a receiver that hangs up.
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = R"({"messages":[{"role":"user","content":"y"}],"stream":true})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&chunks](const char*, size_t, uint64_t, uint64_t) {
      return ++chunks < 3;  // read a little, then hang up
    };
    httplib::Result aborted = client->send(req);
    EXPECT_FALSE(aborted);
  }
  ASSERT_EQ(backend_->submitted().size(), 2u);
  for (int i = 0; i < 300 && backend_->cancels() < 1; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(backend_->cancels(), 1);  // the first stream ran to the end
}

// A non-streaming request whose client hangs up before the answer stops the
// generation (the client is gone: nobody would read it).
TEST_F(ApiServerTest, ClientDisconnectCancelsANonStreamingGeneration) {
  StartServer();
  std::vector<int32_t> many;
  for (int i = 0; i < 100; ++i) {
    for (int32_t t : Tokens(" and then")) many.push_back(t);
  }
  backend_->SetScript([many](const GenerationRequest&) {
    return FakeScript{.tokens = many, .delay = absl::Milliseconds(20)};  // about 8 s in all
  });
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server_->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string body = R"({"messages":[{"role":"user","content":"x"}]})";
  const std::string request = absl::StrCat(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: ",
      body.size(), "\r\n\r\n", body);
  ASSERT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  for (int i = 0; i < 500 && backend_->submitted().empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(backend_->submitted().size(), 1u);
  ::close(fd);  // hang up without reading
  for (int i = 0; i < 1000 && backend_->cancels() < 1; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(backend_->cancels(), 1);  // cancelled while it was still emitting tokens
}

TEST_F(ApiServerTest, ServedModelNamesAreAliasesAndAcceptAnyTakesEveryName) {
  ApiOptions options;
  const std::vector<std::string> names = {"llama-local", "gpt-4o-mini"};
  StartServer(options, 512, names);
  Script("Hi");
  auto ask = [&](const std::string& model) {
    return Client()->Post(
        "/v1/chat/completions",
        absl::StrCat(R"({"model":")", model, R"(","messages":[{"role":"user","content":"x"}]})"),
        "application/json");
  };
  httplib::Result alias = ask("gpt-4o-mini");
  ASSERT_TRUE(alias);
  EXPECT_EQ(alias->status, 200) << alias->body;
  EXPECT_EQ(Json::parse(alias->body)["model"], "gpt-4o-mini");
  ExpectError(ask("stories260K"), 404, "invalid_request_error", "model_not_found", "model");
  httplib::Result list = Client()->Get("/v1/models");
  ASSERT_TRUE(list);
  const Json data = Json::parse(list->body)["data"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[0]["id"], "llama-local");
  EXPECT_EQ(data[1]["id"], "gpt-4o-mini");
  httplib::Result one = Client()->Get("/v1/models/gpt-4o-mini");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);

  server_->Stop();
  options.accept_any_model = true;
  StartServer(options, 512, names);
  Script("Hi");
  httplib::Result any = ask("gpt-3.5-turbo");
  ASSERT_TRUE(any);
  EXPECT_EQ(any->status, 200) << any->body;
  EXPECT_EQ(Json::parse(any->body)["model"], "llama-local");  // the primary name
}

TEST_F(ApiServerTest, TokenIdPromptsGoToTheBackendAsGiven) {
  StartServer();
  Script("Hi");
  httplib::Result r = Client()->Post(
      "/v1/completions", R"({"prompt":[403, 407, 1],"max_tokens":2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  ASSERT_EQ(backend_->submitted().size(), 1u);
  EXPECT_EQ(backend_->submitted()[0].prompt, (std::vector<int32_t>{403, 407, 1}));
  ExpectError(Client()->Post("/v1/completions", R"({"prompt":[403, 100000]})", "application/json"),
              400, "invalid_request_error", nullptr, "prompt");
}

// Scripted logprobs for `ids`: token i gets -0.5 * (i + 1), alternatives
// token i itself and token 5 (worse).
std::vector<TokenLogprobs> ScriptedLogprobs(const std::vector<int32_t>& ids) {
  std::vector<TokenLogprobs> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const float lp = -0.5f * static_cast<float>(i + 1);
    out.push_back(TokenLogprobs{{ids[i], lp}, {{ids[i], lp}, {5, lp - 1}}});
  }
  return out;
}

TEST_F(ApiServerTest, ChatLogprobsHaveOpenAiShapeWholeAndStreamed) {
  StartServer();
  const std::vector<int32_t> ids = Tokens("Once upon a time");
  backend_->SetScript([&](const GenerationRequest&) {
    return FakeScript{.tokens = ids, .logprobs = ScriptedLogprobs(ids)};
  });
  httplib::Result r = Post("/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"Hi"}],"logprobs":true,)"
                           R"("top_logprobs":2})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_EQ(backend_->submitted().size(), 1u);
  EXPECT_TRUE(backend_->submitted()[0].logprobs);
  EXPECT_EQ(backend_->submitted()[0].top_logprobs, 2);
  const Json content = Json::parse(r->body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), ids.size()) << r->body;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = tokenizer_->TokenToPiece(ids[i]);
    EXPECT_EQ(content[i]["token"], piece);
    EXPECT_FLOAT_EQ(content[i]["logprob"].get<float>(), -0.5f * static_cast<float>(i + 1));
    EXPECT_EQ(content[i]["bytes"].size(), piece.size());
    ASSERT_EQ(content[i]["top_logprobs"].size(), 2u);
    EXPECT_GT(content[i]["top_logprobs"][0]["logprob"], content[i]["top_logprobs"][1]["logprob"]);
  }
  // Streamed: every token's entry arrives once, in order, with its text.
  r = Post("/v1/chat/completions",
           R"({"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"stream":true})");
  ASSERT_TRUE(r);
  std::string text;
  std::vector<std::string> streamed;
  for (const Json& frame : SseFrames(r->body)) {
    const Json& choice = frame["choices"][0];
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (choice["logprobs"].is_null()) continue;
    for (const Json& e : choice["logprobs"]["content"]) streamed.push_back(e["token"]);
  }
  std::string joined;
  for (const std::string& s : streamed) joined += s;
  EXPECT_EQ(streamed.size(), ids.size());
  EXPECT_EQ(joined, text);
  // Not asked: null.
  r = Post("/v1/chat/completions", kHello);
  ASSERT_TRUE(r);
  EXPECT_TRUE(Json::parse(r->body)["choices"][0]["logprobs"].is_null()) << r->body;
}

TEST_F(ApiServerTest, TextCompletionLogprobsUseTheLegacyShape) {
  StartServer();
  const std::vector<int32_t> ids = Tokens("Once upon");
  backend_->SetScript([&](const GenerationRequest&) {
    return FakeScript{.tokens = ids, .logprobs = ScriptedLogprobs(ids)};
  });
  httplib::Result r = Post("/v1/completions", R"({"prompt":"Hi","logprobs":1})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json lp = Json::parse(r->body)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size()) << r->body;
  size_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lp["tokens"][i], tokenizer_->TokenToPiece(ids[i]));
    EXPECT_EQ(lp["text_offset"][i], offset);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 2u);
    offset += tokenizer_->TokenToPiece(ids[i]).size();
  }
}

TEST_F(ApiServerTest, ResponsesApiAnswersWithAResponseObject) {
  StartServer();
  Script("Once upon a time");
  httplib::Result r =
      Post("/v1/responses", R"({"model":"stories260K","instructions":"Be brief.","input":"Hello",)"
                            R"("max_output_tokens":64,"metadata":{"k":"v"}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json body = Json::parse(r->body);
  EXPECT_EQ(body["object"], "response");
  EXPECT_EQ(body["status"], "completed");
  EXPECT_EQ(body["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r->get_header_value("x-request-id"), body["id"]);
  EXPECT_EQ(body["metadata"]["k"], "v");
  ASSERT_EQ(body["output"].size(), 1u);
  const Json& item = body["output"][0];
  EXPECT_EQ(item["type"], "message");
  EXPECT_EQ(item["role"], "assistant");
  EXPECT_EQ(item["content"][0]["type"], "output_text");
  EXPECT_EQ(item["content"][0]["text"], Pieces(Tokens("Once upon a time")));
  EXPECT_EQ(body["usage"]["output_tokens"], Tokens("Once upon a time").size());
  // instructions became a system message, input a user message.
  const std::vector<int32_t> prompt = backend_->submitted()[0].prompt;
  const std::string rendered = tokenizer_->Decode(prompt);
  EXPECT_NE(rendered.find("Be brief."), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("Hello"), std::string::npos) << rendered;
  EXPECT_LT(rendered.find("Be brief."), rendered.find("Hello"));

  // An array of message items; a length stop is "incomplete".
  r = Post("/v1/responses",
           R"({"input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]},)"
           R"({"type":"message","role":"assistant","content":"Yes?"},)"
           R"({"role":"user","content":"More"}],"max_output_tokens":2})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["status"], "incomplete");
  EXPECT_EQ(Json::parse(r->body)["incomplete_details"]["reason"], "max_output_tokens");

  // What it does not support is refused by name.
  ExpectError(Post("/v1/responses", R"({"input":"x","previous_response_id":"resp_1"})"), 400,
              "invalid_request_error", nullptr, "previous_response_id");
  ExpectError(Post("/v1/responses", R"({"input":[{"type":"function_call_output"}]})"), 400,
              "invalid_request_error", nullptr, "input[0].type");
  ExpectError(Post("/v1/responses", R"({"input":"x","text":{"format":{"type":"sound"}}})"), 400,
              "invalid_request_error", nullptr, "text.format.type");
  ExpectError(Post("/v1/responses", R"({"instructions":"x"})"), 400, "invalid_request_error",
              nullptr, "input");
}

TEST_F(ApiServerTest, ResponsesApiStreamsTypedEvents) {
  StartServer();
  Script("Once upon a time");
  httplib::Result r = Post("/v1/responses", R"({"input":"Hello","stream":true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::vector<std::string> types;
  std::string deltas, done_text;
  int64_t sequence = 0;
  for (absl::string_view frame : absl::StrSplit(r->body, "\n\n", absl::SkipEmpty())) {
    std::vector<std::string> lines = absl::StrSplit(frame, '\n');
    ASSERT_EQ(lines.size(), 2u) << frame;
    ASSERT_EQ(lines[0].rfind("event: ", 0), 0u) << frame;
    ASSERT_EQ(lines[1].rfind("data: ", 0), 0u) << frame;
    const Json data = Json::parse(lines[1].substr(6));
    EXPECT_EQ(data["type"], lines[0].substr(7));
    EXPECT_EQ(data["sequence_number"], sequence++);
    types.push_back(data["type"]);
    if (data["type"] == "response.output_text.delta") deltas += data["delta"].get<std::string>();
    if (data["type"] == "response.output_text.done") done_text = data["text"];
    if (data["type"] == "response.completed") {
      EXPECT_EQ(data["response"]["output"][0]["content"][0]["text"], deltas);
    }
  }
  EXPECT_EQ(deltas, Pieces(Tokens("Once upon a time")));
  EXPECT_EQ(done_text, deltas);
  ASSERT_GE(types.size(), 8u);
  EXPECT_EQ(types[0], "response.created");
  EXPECT_EQ(types[1], "response.in_progress");
  EXPECT_EQ(types[2], "response.output_item.added");
  EXPECT_EQ(types[3], "response.content_part.added");
  EXPECT_EQ(types.back(), "response.completed");
  EXPECT_EQ(types[types.size() - 2], "response.output_item.done");
}

// A Hermes-style template (as Qwen's): tools in the system turn, calls as
// <tool_call> blocks, results as tool turns.
constexpr char kHermesTemplate[] =
    "{%- if tools %}<|im_start|>system\n# Tools\n{% for t in tools %}{{ t | tojson }}\n"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>\n{{ c.function | tojson }}\n"
    "</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
constexpr char kWeatherTool[] =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"Now.",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";
constexpr char kCallText[] =
    "Checking. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>";

TEST_F(ApiServerTest, ToolCallsComeBackAsOpenAiToolCallsWholeAndStreamed) {
  StartServer();
  backend_->SetChatTemplate(kHermesTemplate);
  server_->Stop();  // the template is read when the server is built
  server_ = std::make_unique<ApiServer>(ApiOptions{.host = "127.0.0.1", .port = 0}, backend_.get());
  ASSERT_TRUE(server_->Start().ok());
  Script(kCallText);
  const std::string body =
      std::string(R"({"messages":[{"role":"user","content":"Weather?"}],)") + kWeatherTool + "}";
  httplib::Result r = Post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json choice = Json::parse(r->body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], " Checking. ");  // the SPM space
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r->body;
  const Json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>())["city"], "Paris");
  // The tools reached the prompt, rendered by the template.
  const std::string prompt = tokenizer_->Decode(backend_->submitted().at(0).prompt);
  EXPECT_NE(prompt.find("\"name\": \"get_weather\""), std::string::npos) << prompt;

  // Streamed: content deltas, then one tool_calls delta with index 0.
  r = Post("/v1/chat/completions",
           std::string(R"({"stream":true,"messages":[{"role":"user","content":"Weather?"}],)") +
               kWeatherTool + "}");
  ASSERT_TRUE(r);
  std::string content, finish;
  Json streamed_calls = Json::array();
  for (const Json& frame : SseFrames(r->body)) {
    const Json& c = frame["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["delta"].contains("tool_calls")) {
      for (const Json& d : c["delta"]["tool_calls"]) streamed_calls.push_back(d);
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, " Checking. ");
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(streamed_calls.size(), 1u);
  EXPECT_EQ(streamed_calls[0]["index"], 0);
  EXPECT_EQ(streamed_calls[0]["function"]["name"], "get_weather");

  // The agent sends the call and its result back: both are rendered.
  r = Post("/v1/chat/completions", std::string(R"({"messages":[
      {"role":"user","content":"Weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"18 C"}],)") +
                                       kWeatherTool + "}");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string turn2 = tokenizer_->Decode(backend_->submitted().back().prompt);
  EXPECT_NE(turn2.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Paris\"}}"),
            std::string::npos)
      << turn2;
  EXPECT_NE(turn2.find("tool\n18 C"), std::string::npos) << turn2;

  // tool_choice none: the same text is plain content.
  r = Post("/v1/chat/completions",
           std::string(R"({"tool_choice":"none","messages":[{"role":"user","content":"W?"}],)") +
               kWeatherTool + "}");
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body)["choices"][0]["finish_reason"], "stop") << r->body;
}

TEST_F(ApiServerTest, ResponseFormatsBecomeConstraintsOrA400) {
  StartServer();
  Script("{}");
  ASSERT_TRUE(Post("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":"Hi"}],)"
                   R"("response_format":{"type":"json_schema","json_schema":{"name":"p",)"
                   R"("schema":{"type":"object","properties":{"b":{"type":"integer"},)"
                   R"("a":{"type":"string"}}}}}})"));
  ASSERT_TRUE(Post("/v1/responses", R"({"input":"Hi","text":{"format":{"type":"json_object"}}})"));
  ASSERT_TRUE(Post("/v1/chat/completions", kHello));
  const std::vector<GenerationRequest> submitted = backend_->submitted();
  ASSERT_EQ(submitted.size(), 3u);
  // The schema keeps the client's property order ("b" before "a").
  EXPECT_EQ(submitted[0].constraint,
            R"({"type":"json_schema","schema":{"type":"object","properties":{"b":{"type":)"
            R"("integer"},"a":{"type":"string"}}}})");
  EXPECT_EQ(submitted[1].constraint, R"({"type":"json_object"})");
  EXPECT_EQ(submitted[2].constraint, "");
  // What the grammar cannot enforce is a 400 naming where it is.
  ExpectError(Post("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":"Hi"}],"response_format":)"
                   R"({"type":"json_schema","json_schema":{"name":"p","schema":)"
                   R"({"type":"string","pattern":"a+"}}}})"),
              400, "invalid_request_error", nullptr, "response_format.json_schema.schema");
  ExpectError(Post("/v1/responses", R"({"input":"Hi","text":{"format":{"type":"json_schema",)"
                                    R"("name":"p","schema":{"type":"string","format":"email"}}}})"),
              400, "invalid_request_error", nullptr, "text.format.schema");
}

TEST_F(ApiServerTest, ToolsNeedATemplateThatTakesThem) {
  StartServer();  // no template: the built-in plain format
  ExpectError(
      Post("/v1/chat/completions",
           std::string(R"({"messages":[{"role":"user","content":"W?"}],)") + kWeatherTool + "}"),
      400, "invalid_request_error", nullptr, "tools");
  ExpectError(Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"W?"},
      {"role":"tool","tool_call_id":"c","content":"x"}]})"),
              400, "invalid_request_error", nullptr, "messages");
}

TEST_F(ApiServerTest, SecondTurnReusesTheFirstTurnsSession) {
  StartServer();
  const std::string reply = " Once upon a time";
  Script(reply.substr(1));
  Json turn1 = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                {"temperature", 0}};
  httplib::Result r1 = Post("/v1/chat/completions", turn1.dump());
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  const std::string content = Json::parse(r1->body)["choices"][0]["message"]["content"];
  EXPECT_EQ(Json::parse(r1->body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  Json turn2 = turn1;
  turn2["messages"].push_back({{"role", "assistant"}, {"content", content}});
  turn2["messages"].push_back({{"role", "user"}, {"content", "More"}});
  httplib::Result r2 = Post("/v1/chat/completions", turn2.dump());
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;

  std::vector<GenerationRequest> sent = backend_->submitted();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].reuse.reuse_len, 0u);
  EXPECT_FALSE(sent[0].reuse.session_id.empty());
  EXPECT_TRUE(sent[0].keep_session);
  EXPECT_EQ(sent[1].reuse.session_id, sent[0].reuse.session_id);  // continued in place
  EXPECT_TRUE(sent[1].reuse.fork_from.empty());
  // At least the whole first prompt is reused; never more than what its KV holds.
  EXPECT_GE(sent[1].reuse.reuse_len, sent[0].prompt.size());
  EXPECT_LE(sent[1].reuse.reuse_len, sent[0].prompt.size() + Tokens(reply.substr(1)).size() - 1);
  for (size_t i = 0; i < sent[1].reuse.reuse_len; ++i) {
    const int32_t recorded = i < sent[0].prompt.size()
                                 ? sent[0].prompt[i]
                                 : Tokens(reply.substr(1))[i - sent[0].prompt.size()];
    ASSERT_EQ(sent[1].prompt[i], recorded) << i;
  }
  EXPECT_EQ(Json::parse(r2->body)["usage"]["prompt_tokens_details"]["cached_tokens"],
            sent[1].reuse.reuse_len);
}

TEST_F(ApiServerTest, NoPrefixCacheMeansNoReuse) {
  ApiOptions options;
  options.prefix_cache.enabled = false;
  StartServer(options);
  Script("Hi");
  ASSERT_EQ(Post("/v1/chat/completions", kHello)->status, 200);
  ASSERT_EQ(Post("/v1/chat/completions", kHello)->status, 200);
  for (const GenerationRequest& sent : backend_->submitted()) {
    EXPECT_EQ(sent.reuse.reuse_len, 0u);
    EXPECT_FALSE(sent.keep_session);
  }
}

}  // namespace
}  // namespace ringlm
