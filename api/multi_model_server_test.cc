// Two models behind one ApiServer, over real loopback HTTP, each on a
// scripted backend of its own: routing by `model`, /v1/models, /health,
// /v1/topology, and the per-model prefix caches and reply ids.
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

class MultiModelServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::Tok512Tokenizer();
    ASSERT_NE(tokenizer_, nullptr);
    alpha_ = std::make_unique<FakeBackend>(*tokenizer_, 512, "alpha-7b");
    beta_ = std::make_unique<FakeBackend>(*tokenizer_, 512, "beta-1b");
    Reply(*alpha_, tokenizer_->Encode("Hi", false, false));
    Reply(*beta_, tokenizer_->Encode("Bye", false, false));
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  // alpha answers to "alpha" and "a2"; beta to its model id, "beta-1b".
  void StartServer(ApiOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<ApiServer>(
        options, std::vector<ApiModel>{{.backend = alpha_.get(), .names = {"alpha", "a2"}},
                                       {.backend = beta_.get(), .names = {}}});
    ASSERT_TRUE(server_->Start().ok());
  }

  static void Reply(FakeBackend& backend, std::vector<int32_t> tokens) {
    backend.SetScript([tokens](const GenerationRequest&) { return FakeScript{.tokens = tokens}; });
  }

  httplib::Result Get(const std::string& path) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(10, 0);
    return client.Get(path.c_str());
  }
  httplib::Result Post(const std::string& path, const Json& body) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(10, 0);
    return client.Post(path.c_str(), body.dump(), "application/json");
  }

  // The reply's model and text, streamed (the deltas joined) or not.
  struct Answer {
    std::string model;
    std::string text;
  };
  Answer Ask(const std::string& path, Json body) {
    httplib::Result r = Post(path, body);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    const bool chat = path == "/v1/chat/completions";
    if (!body.value("stream", false)) {
      Json out = Json::parse(r->body);
      return {out["model"],
              chat ? out["choices"][0]["message"]["content"] : out["choices"][0]["text"]};
    }
    Answer answer;
    for (size_t at = r->body.find("data: {"); at != std::string::npos;
         at = r->body.find("data: {", at + 1)) {
      Json frame = Json::parse(r->body.substr(at + 6, r->body.find("\n\n", at) - at - 6));
      answer.model = frame["model"];
      const Json& choice = frame["choices"][0];
      // value(): the last frames may lack the field (a const [] must not miss).
      const Json text = chat ? choice.value("delta", Json::object()).value("content", Json())
                             : choice.value("text", Json());
      if (text.is_string()) answer.text += text.get<std::string>();
    }
    return answer;
  }

  static void ExpectModelNotFound(const httplib::Result& r) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << r->body;
    const Json error = Json::parse(r->body)["error"];
    EXPECT_EQ(error["code"], "model_not_found") << r->body;
    EXPECT_EQ(error["param"], "model") << r->body;
  }

  static Json Chat(const std::vector<std::pair<std::string, std::string>>& messages) {
    Json out = {{"messages", Json::array()}};
    for (const auto& [role, content] : messages) {
      out["messages"].push_back({{"role", role}, {"content", content}});
    }
    return out;
  }

  const Tokenizer* tokenizer_ = nullptr;
  std::unique_ptr<FakeBackend> alpha_;
  std::unique_ptr<FakeBackend> beta_;
  std::unique_ptr<ApiServer> server_;
};

TEST_F(MultiModelServerTest, EachRequestReachesTheModelItNamesOnly) {
  StartServer();
  size_t alpha_sent = 0;
  size_t beta_sent = 0;
  for (const std::string path : {"/v1/chat/completions", "/v1/completions"}) {
    for (bool stream : {false, true}) {
      for (const std::string model : {"alpha", "a2", "beta-1b"}) {
        SCOPED_TRACE(absl::StrCat(path, stream ? " streamed" : "", " for ", model));
        Json body = path == "/v1/completions" ? Json{{"prompt", "Once"}} : Chat({{"user", "x"}});
        body["model"] = model;
        body["stream"] = stream;
        const Answer answer = Ask(path, body);
        EXPECT_EQ(answer.model, model);
        const bool beta = model == "beta-1b";
        EXPECT_EQ(answer.text, beta ? " Bye" : " Hi");  // SentencePiece adds the space
        (beta ? beta_sent : alpha_sent)++;
        EXPECT_EQ(alpha_->submitted().size(), alpha_sent);
        EXPECT_EQ(beta_->submitted().size(), beta_sent);
      }
    }
  }
}

TEST_F(MultiModelServerTest, NoModelMeansTheFirstAndAnUnknownOneIs404UnlessAnyIsAccepted) {
  StartServer();
  const Answer unnamed = Ask("/v1/chat/completions", Chat({{"user", "x"}}));
  EXPECT_EQ(unnamed.model, "alpha");  // the first model's primary name
  EXPECT_EQ(unnamed.text, " Hi");

  Json unknown = Chat({{"user", "x"}});
  unknown["model"] = "gpt-4";
  httplib::Result r = Post("/v1/chat/completions", unknown);
  ExpectModelNotFound(r);
  for (const char* name : {"alpha", "a2", "beta-1b"}) {
    EXPECT_NE(r->body.find(name), std::string::npos) << r->body;  // the served names
  }
  EXPECT_EQ(alpha_->submitted().size(), 1u);
  EXPECT_TRUE(beta_->submitted().empty());

  server_->Stop();
  ApiOptions options;
  options.accept_any_model = true;
  StartServer(options);
  const Answer any = Ask("/v1/chat/completions", unknown);
  EXPECT_EQ(any.model, "alpha");
  EXPECT_EQ(any.text, " Hi");
  EXPECT_TRUE(beta_->submitted().empty());
}

TEST_F(MultiModelServerTest, ModelsListsEveryNameWithItsStateAndPlan) {
  // As ClusterBackend::TopologyJson: the node holding no layers is no stage,
  // and stages come in layer order.
  alpha_->SetTopologyJson(R"({"model":"alpha-7b","n_layers":8,"epoch":3,"ready":true,"nodes":[
      {"node_id":"head","self":true,"layers":[4,7]},{"node_id":"idle","layers":null},
      {"node_id":"n2","layers":[0,3]}]})");
  beta_->SetTopologyJson("not JSON");
  beta_->SetReady(absl::UnavailableError("loading weights"));
  StartServer();
  httplib::Result r = Get("/v1/models");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json data = Json::parse(r->body)["data"];
  ASSERT_EQ(data.size(), 3u) << r->body;
  const Json plan = {
      {"n_layers", 8},
      {"stages",
       {{{"node_id", "n2"}, {"layers", {0, 3}}}, {{"node_id", "head"}, {"layers", {4, 7}}}}}};
  EXPECT_EQ(data[0]["id"], "alpha");
  EXPECT_EQ(data[1]["id"], "a2");
  EXPECT_EQ(data[2]["id"], "beta-1b");
  for (int i : {0, 1}) {
    EXPECT_EQ(data[i]["object"], "model");
    EXPECT_EQ(data[i]["owned_by"], "ringlm");
    EXPECT_EQ(data[i]["state"], "ready");
    EXPECT_EQ(data[i]["plan"], plan);
  }
  for (int i : {0, 1}) EXPECT_EQ(data[i]["root"], "alpha");  // the primary name
  EXPECT_EQ(data[2]["root"], "beta-1b");
  EXPECT_EQ(data[2]["state"], "loading");
  EXPECT_FALSE(data[2].contains("plan"));  // its topology is not JSON

  r = Get("/v1/models/beta-1b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body), data[2]);
  r = Get("/v1/models/a2");
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body), data[1]);
  ExpectModelNotFound(Get("/v1/models/gpt-4"));
}

TEST_F(MultiModelServerTest, HealthNeedsEveryModelAndTopologyTakesAModel) {
  alpha_->SetTopologyJson(R"({"nodes":[{"node_id":"a"}]})");
  beta_->SetTopologyJson(R"({"nodes":[{"node_id":"b"}]})");
  StartServer();
  httplib::Result health = Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(Json::parse(health->body), (Json{{"status", "ok"}}));

  beta_->SetReady(absl::UnavailableError("no stage holds layers 4-5"));
  health = Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  const std::string message = Json::parse(health->body)["error"]["message"];
  EXPECT_NE(message.find("beta-1b"), std::string::npos) << message;
  EXPECT_NE(message.find("no stage holds layers 4-5"), std::string::npos) << message;

  EXPECT_EQ(Get("/v1/topology")->body, R"({"nodes":[{"node_id":"a"}]})");  // the first model
  EXPECT_EQ(Get("/v1/topology?model=a2")->body, R"({"nodes":[{"node_id":"a"}]})");
  EXPECT_EQ(Get("/v1/topology?model=beta-1b")->body, R"({"nodes":[{"node_id":"b"}]})");
  ExpectModelNotFound(Get("/v1/topology?model=gpt-4"));
}

TEST_F(MultiModelServerTest, EachModelHasItsOwnPrefixCache) {
  ApiOptions options;
  options.prefix_cache.max_sessions = 1;  // a shared cache would evict across models
  StartServer(options);
  Json turn1 = Chat({{"user", "Tell me a story"}});
  turn1["model"] = "alpha";
  const std::string reply = Ask("/v1/chat/completions", turn1).text;
  Json turn2 = Chat({{"user", "Tell me a story"}, {"assistant", reply}, {"user", "More"}});

  // The same conversation continued on beta starts afresh there.
  turn2["model"] = "beta-1b";
  Ask("/v1/chat/completions", turn2);
  ASSERT_EQ(alpha_->submitted().size(), 1u);
  ASSERT_EQ(beta_->submitted().size(), 1u);
  const PrefixReuse alpha_first = alpha_->submitted()[0].reuse;
  const PrefixReuse beta_first = beta_->submitted()[0].reuse;
  EXPECT_EQ(beta_first.reuse_len, 0u);
  EXPECT_TRUE(beta_first.fork_from.empty());
  EXPECT_NE(beta_first.session_id, alpha_first.session_id);
  EXPECT_TRUE(alpha_->dropped_sessions().empty());  // beta's session evicted none of alpha's

  // On alpha, it continues alpha's session in place.
  turn2["model"] = "a2";
  Ask("/v1/chat/completions", turn2);
  ASSERT_EQ(alpha_->submitted().size(), 2u);
  const PrefixReuse alpha_second = alpha_->submitted()[1].reuse;
  EXPECT_EQ(alpha_second.session_id, alpha_first.session_id);
  EXPECT_GT(alpha_second.reuse_len, 0u);

  // Another conversation on beta evicts beta's own session, on beta only.
  Json other = Chat({{"user", "Something else entirely"}});
  other["model"] = "beta-1b";
  Ask("/v1/chat/completions", other);
  EXPECT_EQ(beta_->dropped_sessions(), std::vector<std::string>{beta_first.session_id});
  EXPECT_TRUE(alpha_->dropped_sessions().empty());
}

TEST_F(MultiModelServerTest, ReplyIdsComeBackOnlyToTheModelThatGeneratedThem) {
  // alpha replies "Hi" one token per character, a spelling that tokenizing
  // the text never gives (see reply_ids_server_test.cc).
  std::vector<int32_t> spelled;
  for (const char c : std::string("Hi")) {
    for (int32_t id = 0; id < tokenizer_->n_vocab(); ++id) {
      if (tokenizer_->TokenToPiece(id) == std::string(1, c)) {
        spelled.push_back(id);
        break;
      }
    }
  }
  ASSERT_EQ(spelled.size(), 2u);
  ASSERT_NE(tokenizer_->Encode("Hi", false, false), spelled);
  Reply(*alpha_, spelled);
  StartServer();
  const std::string reply = Ask("/v1/chat/completions", Chat({{"user", "x"}})).text;
  ASSERT_EQ(reply, "Hi");

  Json next = Chat({{"user", "x"}, {"assistant", reply}, {"user", "y"}});
  const auto holds_spelled = [&](const std::vector<int32_t>& prompt) {
    return std::search(prompt.begin(), prompt.end(), spelled.begin(), spelled.end()) !=
           prompt.end();
  };
  next["model"] = "beta-1b";
  Ask("/v1/chat/completions", next);
  ASSERT_EQ(beta_->submitted().size(), 1u);
  EXPECT_FALSE(holds_spelled(beta_->submitted()[0].prompt));
  next["model"] = "alpha";
  Ask("/v1/chat/completions", next);
  ASSERT_EQ(alpha_->submitted().size(), 2u);
  EXPECT_TRUE(holds_spelled(alpha_->submitted()[1].prompt));
}

TEST_F(MultiModelServerTest, ANameTwoModelsClaimIsRefusedAtStart) {
  ApiOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  // beta's model id is also one of alpha's names.
  ApiServer clash(options, {{.backend = alpha_.get(), .names = {"alpha", "beta-1b"}},
                            {.backend = beta_.get(), .names = {}}});
  absl::Status started = clash.Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument) << started;
  EXPECT_NE(started.message().find("'beta-1b' is claimed by model 'alpha-7b' and by model "
                                   "'beta-1b'"),
            std::string::npos)
      << started;
  EXPECT_EQ(clash.port(), 0);

  ApiServer twice(options, {{.backend = alpha_.get(), .names = {"a", "a"}}});
  started = twice.Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument) << started;
  EXPECT_NE(started.message().find("'a' is given twice"), std::string::npos) << started;

  ApiServer none(options, std::vector<ApiModel>{});
  EXPECT_EQ(none.Start().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MultiModelServerTest, AChatTemplateAModelCannotUseIsRefusedAtStartNamingTheModel) {
  ApiOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.chat_template.builtin = "no-such-format";
  ApiServer server(options, {{.backend = alpha_.get(), .names = {"alpha"}},
                             {.backend = beta_.get(), .names = {}}});
  const absl::Status started = server.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_NE(started.message().find("model 'alpha'"), std::string::npos) << started;
}

// POST /v1/admin/models: the loader's model is served from then on; the
// key, the body and a taken name are checked first, and the loader's error
// is the answer.
TEST_F(MultiModelServerTest, ALoadedModelIsServedFromThenOn) {
  auto gamma = std::make_unique<FakeBackend>(*tokenizer_, 512, "gamma-3b");
  Reply(*gamma, tokenizer_->Encode("Gamma", false, false));
  std::vector<ModelLoadRequest> asked;
  ApiOptions options;
  options.api_key = "k";
  options.load_model = [&](const ModelLoadRequest& request) -> absl::StatusOr<ApiModel> {
    asked.push_back(request);
    if (request.path != "/models/gamma.gguf") {
      return absl::NotFoundError(absl::StrCat(request.path, ": no such file"));
    }
    return ApiModel{.backend = gamma.get(), .names = {request.name}};
  };
  StartServer(options);
  auto post = [&](const Json& body, const std::string& key) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(10, 0);
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    return client.Post("/v1/admin/models", headers, body.dump(), "application/json");
  };
  const Json load = {{"name", "gamma"}, {"path", "/models/gamma.gguf"}, {"memory_mb", 512}};
  EXPECT_EQ(post(load, "")->status, 401);
  EXPECT_EQ(post(load, "wrong")->status, 401);
  EXPECT_EQ(post({{"name", "gamma"}}, "k")->status, 400);
  EXPECT_EQ(post({{"name", "g"}, {"path", "/p"}, {"colour", 1}}, "k")->status, 400);
  EXPECT_EQ(post({{"name", "two words"}, {"path", "/p"}}, "k")->status, 400);
  EXPECT_EQ(post({{"name", "a2"}, {"path", "/models/gamma.gguf"}}, "k")->status, 409);
  httplib::Result missing = post({{"name", "gamma"}, {"path", "/models/none.gguf"}}, "k");
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(missing->body.find("/models/none.gguf: no such file"), std::string::npos);
  EXPECT_EQ(asked.size(), 1u);  // only the well-formed, untaken call reached the loader

  httplib::Result loaded = post(load, "k");
  ASSERT_EQ(loaded->status, 201) << loaded->body;
  EXPECT_EQ(Json::parse(loaded->body)["id"], "gamma");
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked.back().memory_bytes, uint64_t{512} << 20);

  httplib::Client client("127.0.0.1", server_->port());
  httplib::Headers key = {{"Authorization", "Bearer k"}};
  httplib::Result models = client.Get("/v1/models", key);
  ASSERT_EQ(models->status, 200) << models->body;
  const Json listed = Json::parse(models->body);
  std::vector<std::string> ids;
  for (const Json& m : listed["data"]) {
    ids.push_back(m["id"].get<std::string>());
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"alpha", "a2", "beta-1b", "gamma"}));
  httplib::Result reply = client.Post(
      "/v1/completions", key, Json{{"model", "gamma"}, {"prompt", "x"}, {"max_tokens", 16}}.dump(),
      "application/json");
  ASSERT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(Json::parse(reply->body)["choices"][0]["text"], " Gamma");
  EXPECT_EQ(gamma->submitted().size(), 1u);
  EXPECT_EQ(post(load, "k")->status, 409);  // loaded once
}

// Without an API key configured, nobody may make the daemon load files.
TEST_F(MultiModelServerTest, LoadingNeedsAnApiKey) {
  ApiOptions options;
  options.load_model = [](const ModelLoadRequest&) -> absl::StatusOr<ApiModel> {
    ADD_FAILURE() << "the loader was called";
    return absl::InternalError("unreachable");
  };
  StartServer(options);
  httplib::Result r = Post("/v1/admin/models", {{"name", "g"}, {"path", "/models/g.gguf"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("--api-key"), std::string::npos) << r->body;
}

// POST /v1/admin/models/{name}/unload: no request finds the model from then on,
// the unloader is told how long to drain, and the last model stays.
TEST_F(MultiModelServerTest, ARemovedModelIsNotFoundAndTheLastStays) {
  std::vector<std::pair<std::string, std::chrono::milliseconds>> unloaded;
  ApiOptions options;
  options.api_key = "k";
  options.unload_model = [&](const std::string& name,
                             std::chrono::milliseconds drain) -> absl::StatusOr<size_t> {
    unloaded.push_back({name, drain});
    return 0;
  };
  StartServer(options);
  auto unload = [&](const std::string& name, const std::string& body, const std::string& key) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(10, 0);
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    return client.Post(("/v1/admin/models/" + name + "/unload").c_str(), headers, body,
                       "application/json");
  };
  EXPECT_EQ(unload("beta-1b", "", "")->status, 401);
  EXPECT_EQ(unload("nope", "", "k")->status, 404);
  EXPECT_EQ(unload("beta-1b", R"({"drain_s": -1})", "k")->status, 400);
  EXPECT_EQ(unload("beta-1b", R"({"drain_s": "x"})", "k")->status, 400);
  EXPECT_EQ(unload("beta-1b", R"({"wait": 1})", "k")->status, 400);
  EXPECT_TRUE(unloaded.empty());

  httplib::Result removed = unload("beta-1b", R"({"drain_s": 5})", "k");
  ASSERT_EQ(removed->status, 200) << removed->body;
  EXPECT_EQ(Json::parse(removed->body)["deleted"], true);
  ASSERT_EQ(unloaded.size(), 1u);
  EXPECT_EQ(unloaded[0].first, "beta-1b");
  EXPECT_EQ(unloaded[0].second, std::chrono::seconds(5));

  httplib::Client client("127.0.0.1", server_->port());
  httplib::Headers key = {{"Authorization", "Bearer k"}};
  httplib::Result gone =
      client.Post("/v1/completions", key, Json{{"model", "beta-1b"}, {"prompt", "x"}}.dump(),
                  "application/json");
  EXPECT_EQ(gone->status, 404) << gone->body;
  EXPECT_EQ(client.Get("/v1/models/beta-1b", key)->status, 404);
  EXPECT_EQ(unload("a2", "", "k")->status, 409);  // alpha, the last model
  EXPECT_EQ(unloaded.size(), 1u);
}

}  // namespace
}  // namespace ringlm
