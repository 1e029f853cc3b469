// The OpenAI-compatible API on a real 3-node cluster: the prefix cache gives
// exactly the replies of an uncached run, reports the reused length, and
// recovers from lost caches; concurrent streams never cross.
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/metrics.h"
#include "chat/chat_template.h"
#include "gtest/gtest.h"
#include "inference/generator.h"
#include "inference/model.h"
#include "nlohmann/json.hpp"
#include "proto/ringlm.grpc.pb.h"
#include "tests/chat_client.h"
#include "tests/grpc_test_clients.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::LoopbackCluster;

constexpr int kMaxTokens = 24;
const char* kModel = "stories260K-f32.gguf";

using Reply = testing::ChatReply;

// `sampling` replaces the greedy default ({"temperature": 0}).
Reply Chat(uint16_t port, const json& messages, const json& sampling = {{"temperature", 0}}) {
  return testing::Chat(port, messages, kMaxTokens, sampling);
}

// What one process computes for the same chat: prompt ids, generated ids.
class LocalReference {
 public:
  LocalReference() {
    ModelOptions options;
    options.context_size = 1024;
    model_ = std::move(*Model::Load(testing::ModelPath(kModel), options));
    generator_ = std::make_unique<LocalGenerator>(*model_, nullptr);
  }

  std::vector<int32_t> PromptIds(const json& messages) const {
    std::vector<ChatMessage> chat;
    for (const json& m : messages) chat.push_back({m["role"], m["content"]});
    std::string text = *RenderChat(ChatFormat::kPlain, chat, true);
    return model_->tokenizer().Encode(text, true, true);
  }

  // Greedy, or with `seed` at temperature 1.
  std::vector<int32_t> Generate(const std::vector<int32_t>& prompt,
                                std::optional<uint64_t> seed = std::nullopt) const {
    GenerateOptions options;
    options.max_tokens = kMaxTokens;
    options.sampling.temperature = seed ? 1 : 0;
    options.sampling.seed = seed.value_or(0);
    return *generator_->Generate(prompt, options);
  }

  // The logits after each of `generated`'s positions but the last: row i is
  // what chose generated[i].
  std::vector<std::vector<float>> Logits(const std::vector<int32_t>& prompt,
                                         const std::vector<int32_t>& generated) const {
    const StageEngine& engine = generator_->engine();
    KvCache cache = engine.NewCache(1024);
    std::vector<std::vector<float>> rows(generated.size());
    std::vector<int32_t> input = prompt;
    for (size_t i = 0; i < generated.size(); ++i) {
      EXPECT_TRUE(
          engine.Forward(cache, StageInput{input, {}}, LogitsMode::kLastPosition, &rows[i]).ok());
      input = {generated[i]};
    }
    return rows;
  }

  const Tokenizer& tokenizer() const { return model_->tokenizer(); }
  const LocalGenerator& generator() const { return *generator_; }

  std::string Text(const std::vector<int32_t>& ids) const {
    StreamingDecoder decoder(model_->tokenizer());
    std::string text;
    for (int32_t id : ids) text += decoder.Push(id);
    return text + decoder.Flush();
  }

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<LocalGenerator> generator_;
};

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

LoopbackCluster::Options HeadOptions(std::vector<std::string> head_args = {}) {
  LoopbackCluster::Options o;
  o.api = true;
  o.extra_args = {"--ctx-size", "1024"};
  o.head_extra_args = std::move(head_args);
  return o;
}

const std::vector<std::string> kTurns = {"Tell me a story about a cat.", "What did the cat find?",
                                         "Was the cat happy?",           "Who came to visit?",
                                         "What did they eat?",           "How did the day end?"};

TEST(ApiClusterTest, SixTurnConversationIsTheSameWithAndWithoutTheCache) {
  LoopbackCluster cached(HeadOptions());
  LoopbackCluster uncached(HeadOptions({"--no-prefix-cache"}));
  ASSERT_TRUE(testing::WaitFor([&] { return cached.AllFormed() && uncached.AllFormed(); }, 30s))
      << cached.Logs() << uncached.Logs();
  LocalReference local;
  json messages = json::array();
  std::vector<int32_t> previous_kv;  // what the stages hold after the last turn
  for (size_t turn = 0; turn < kTurns.size(); ++turn) {
    SCOPED_TRACE(absl::StrCat("turn ", turn + 1));
    messages.push_back({{"role", "user"}, {"content", kTurns[turn]}});
    Reply a = Chat(cached.api_port(), messages);
    Reply b = Chat(uncached.api_port(), messages);
    ASSERT_EQ(a.status, 200) << a.content << cached.Logs();
    ASSERT_EQ(b.status, 200) << b.content;
    EXPECT_EQ(a.content, b.content);
    EXPECT_EQ(b.cached, 0);
    const std::vector<int32_t> prompt = local.PromptIds(messages);
    const std::vector<int32_t> generated = local.Generate(prompt);
    EXPECT_EQ(a.content, local.Text(generated));
    EXPECT_EQ(a.prompt_tokens, static_cast<int>(prompt.size()));
    if (turn > 0) {
      const size_t expected = std::min(CommonPrefix(prompt, previous_kv), prompt.size() - 1);
      EXPECT_GT(a.cached, 0);
      EXPECT_EQ(a.cached, static_cast<int>(expected));
    }
    previous_kv = prompt;
    previous_kv.insert(previous_kv.end(), generated.begin(), generated.end() - 1);
    messages.push_back({{"role", "assistant"}, {"content", a.content}});
  }
  // Editing turn 3 and resending: a shorter prefix is reused, same output.
  json edited(messages.begin(), messages.begin() + 5);
  edited[4]["content"] = "Was the dog sad?";
  Reply ea = Chat(cached.api_port(), edited);
  Reply eb = Chat(uncached.api_port(), edited);
  ASSERT_EQ(ea.status, 200);
  EXPECT_EQ(ea.content, eb.content);
  EXPECT_EQ(ea.content, local.Text(local.Generate(local.PromptIds(edited))));
  // Resending an identical request: everything but the last token is reused.
  Reply ra = Chat(cached.api_port(), edited);
  EXPECT_EQ(ra.content, eb.content);
  EXPECT_EQ(ra.cached, ra.prompt_tokens - 1);
}

// Two chats in two browser tabs, alternating turns, with one system prompt:
// each turn reuses the whole previous turn of its chat, prompt and reply
// (but the reply's last token, whose KV was never written), because a chat
// that shares only the system prompt forks it instead of truncating the
// other chat's session, and the head keeps each reply as its generated ids.
// Replies equal the local reference.
TEST(ApiClusterTest, InterleavedChatsEachReuseTheirWholePreviousTurn) {
  LoopbackCluster cluster(HeadOptions());
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  LocalReference local;
  const json system = {{"role", "system"}, {"content", "You tell short stories to children."}};
  json chats[2] = {json::array({system}), json::array({system})};
  int previous_turn[2] = {0, 0};  // prompt + completion tokens
  for (int round = 0; round < 3; ++round) {
    for (int c = 0; c < 2; ++c) {
      SCOPED_TRACE(absl::StrCat("chat ", c, ", turn ", round + 1));
      chats[c].push_back({{"role", "user"}, {"content", kTurns[2 * round + c]}});
      Reply r = Chat(cluster.api_port(), chats[c]);
      ASSERT_EQ(r.status, 200) << r.content << cluster.Logs();
      EXPECT_EQ(r.content, local.Text(local.Generate(local.PromptIds(chats[c]))));
      std::printf("chat %d turn %d: %d prompt tokens, %d cached\n", c, round + 1, r.prompt_tokens,
                  r.cached);
      if (round > 0) EXPECT_EQ(r.cached, previous_turn[c] - 1);
      previous_turn[c] = r.prompt_tokens + r.completion_tokens;
      chats[c].push_back({{"role", "assistant"}, {"content", r.content}});
    }
  }
}

// A chat's second turn continues the first through the end of its reply:
// the head kept the reply's generated ids (docs/reply-ids.md), so turn 2's
// prompt is turn 1's prompt ids, then those ids, then the new text tokenized
// as a continuation, with the prefix cache on or off. Turn 1 is sampled
// (seed 18) because that reply's ids are not what re-tokenizing its text
// gives: without the stored ids the reuse would stop inside the reply.
TEST(ApiClusterTest, ASecondTurnReusesTheFirstThroughTheEndOfItsReply) {
  LoopbackCluster cached(HeadOptions());
  LoopbackCluster uncached(HeadOptions({"--no-prefix-cache"}));
  ASSERT_TRUE(testing::WaitFor([&] { return cached.AllFormed() && uncached.AllFormed(); }, 30s))
      << cached.Logs() << uncached.Logs();
  LocalReference local;
  const Tokenizer& tokenizer = local.tokenizer();
  constexpr uint64_t kSeed = 18;
  json messages = json::array({{{"role", "user"}, {"content", kTurns[0]}}});
  const json sampled = {{"temperature", 1}, {"seed", kSeed}};
  Reply a1 = Chat(cached.api_port(), messages, sampled);
  Reply b1 = Chat(uncached.api_port(), messages, sampled);
  ASSERT_EQ(a1.status, 200) << a1.content << cached.Logs();
  ASSERT_EQ(b1.status, 200) << b1.content;
  EXPECT_EQ(a1.content, b1.content);
  // What turn 1 generated, and what the stages hold after it.
  const std::vector<int32_t> prompt1 = local.PromptIds(messages);
  const std::vector<int32_t> generated = local.Generate(prompt1, kSeed);
  ASSERT_EQ(local.Text(generated), a1.content);
  ASSERT_EQ(a1.prompt_tokens, static_cast<int>(prompt1.size()));
  ASSERT_EQ(a1.completion_tokens, static_cast<int>(generated.size()));
  std::vector<int32_t> kv = prompt1;
  kv.insert(kv.end(), generated.begin(), generated.end() - 1);
  // The reply's ids: what was generated, but an end of generation.
  std::vector<int32_t> reply_ids = generated;
  if (tokenizer.IsEndOfGeneration(reply_ids.back())) reply_ids.pop_back();

  messages.push_back({{"role", "assistant"}, {"content", a1.content}});
  messages.push_back({{"role", "user"}, {"content", kTurns[1]}});
  // Re-tokenizing the reply's text diverges from the KV inside the reply.
  const size_t retokenized_reuse = CommonPrefix(local.PromptIds(messages), kv);
  std::printf("turn 1: %zu prompt + %zu generated tokens; re-tokenized, turn 2 shares %zu\n",
              prompt1.size(), generated.size(), retokenized_reuse);
  EXPECT_LT(retokenized_reuse, kv.size());
  // The head's prompt instead: turn 1's prompt text, the reply as its ids,
  // the rest a continuation.
  std::vector<ChatMessage> chat;
  for (const json& m : messages) chat.push_back({m["role"], m["content"]});
  const std::string text1 = *RenderChat(ChatFormat::kPlain, {chat[0]}, true);
  const std::string text2 = *RenderChat(ChatFormat::kPlain, chat, true);
  ASSERT_EQ(text2.rfind(text1 + a1.content, 0), 0u) << text2;
  const std::vector<PromptSegment> segments = {
      {text1, true},
      {a1.content, false, reply_ids},
      {text2.substr(text1.size() + a1.content.size()), true}};
  const std::vector<int32_t> prompt2 = tokenizer.EncodeSegments(segments, true);
  std::vector<int32_t> turn1 = prompt1;
  turn1.insert(turn1.end(), reply_ids.begin(), reply_ids.end());
  ASSERT_EQ(std::vector<int32_t>(prompt2.begin(), prompt2.begin() + turn1.size()), turn1);

  Reply a2 = Chat(cached.api_port(), messages);
  Reply b2 = Chat(uncached.api_port(), messages);
  ASSERT_EQ(a2.status, 200) << a2.content << cached.Logs();
  ASSERT_EQ(b2.status, 200) << b2.content;
  EXPECT_EQ(a2.prompt_tokens, static_cast<int>(prompt2.size()));
  EXPECT_EQ(b2.prompt_tokens, static_cast<int>(prompt2.size()));
  // All of turn 1 but its last sampled token, whose KV was never written:
  // when it ended the reply (length) it is in prompt2 but not in the KV;
  // when it was an end of generation it is in neither.
  EXPECT_EQ(a2.cached, a1.prompt_tokens + a1.completion_tokens - 1);
  EXPECT_EQ(b2.cached, 0);
  EXPECT_EQ(a2.content, b2.content);
  EXPECT_EQ(a2.content, local.Text(local.Generate(prompt2)));
}

// Drops every session the head (node 0) holds on the node at `address`, as
// an eviction would: the head's own certificate may drop its own sessions.
void DropAllSessions(const LoopbackCluster& cluster, const std::string& address) {
  auto stub = testing::MemberStub(cluster, 0, address);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::CacheStatsRequest req;
  req.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  v1::CacheStatsReply stats;
  ASSERT_TRUE(stub->CacheStats(&ctx, req, &stats).ok());
  ASSERT_GT(stats.sessions_size(), 0);
  grpc::ClientContext drop_ctx;
  drop_ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::DropSessionRequest drop;
  drop.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  drop.set_all(true);
  v1::DropSessionReply reply;
  ASSERT_TRUE(stub->DropSession(&drop_ctx, drop, &reply).ok());
  EXPECT_TRUE(reply.dropped());
}

TEST(ApiClusterTest, LostCachesEndInADetectedMissAndTheSameOutput) {
  LoopbackCluster cluster(HeadOptions());
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  LocalReference local;
  json messages = json::array();
  auto turn = [&](const std::string& text) {
    messages.push_back({{"role", "user"}, {"content", text}});
    Reply r = Chat(cluster.api_port(), messages);
    EXPECT_EQ(r.status, 200) << r.content << cluster.Logs();
    EXPECT_EQ(r.content, local.Text(local.Generate(local.PromptIds(messages))));
    messages.push_back({{"role", "assistant"}, {"content", r.content}});
    return r;
  };
  turn(kTurns[0]);
  EXPECT_GT(turn(kTurns[1]).cached, 0);

  // A stage restarts between turns: its sessions are gone.
  json status = cluster.Status(0);
  const std::string middle = status["plan"]["stages"][1]["address"];
  size_t index = 1;
  for (size_t i = 0; i < cluster.size(); ++i) {
    if (cluster.Address(i) == middle) index = i;
  }
  cluster.KillNode(index);
  cluster.StartNode(index);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  EXPECT_EQ(turn(kTurns[2]).cached, 0) << "a restarted stage must cause a miss";
  EXPECT_GT(turn(kTurns[3]).cached, 0);

  // A stage evicts the session: the same.
  DropAllSessions(cluster, status["plan"]["stages"][2]["address"]);
  EXPECT_EQ(turn(kTurns[4]).cached, 0) << "an evicted session must cause a miss";
  EXPECT_GT(turn(kTurns[5]).cached, 0);
}

TEST(ApiClusterTest, HeadEvictionOnlyCausesAMiss) {
  LoopbackCluster cluster(HeadOptions({"--max-sessions", "1"}));
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  LocalReference local;
  json first = json::array({{{"role", "user"}, {"content", kTurns[0]}}});
  Reply r1 = Chat(cluster.api_port(), first);
  first.push_back({{"role", "assistant"}, {"content", r1.content}});
  // Another conversation takes the only session slot.
  json other = json::array({{{"role", "user"}, {"content", "Sing me a song."}}});
  Reply r2 = Chat(cluster.api_port(), other);
  EXPECT_EQ(r2.status, 200);
  first.push_back({{"role", "user"}, {"content", kTurns[1]}});
  Reply r3 = Chat(cluster.api_port(), first);
  EXPECT_EQ(r3.status, 200);
  EXPECT_EQ(r3.content, local.Text(local.Generate(local.PromptIds(first))));
}

// Reads an SSE chat stream into its text.
std::string StreamChat(uint16_t port, const std::string& prompt) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  json body = {{"messages", {{{"role", "user"}, {"content", prompt}}}},
               {"max_tokens", kMaxTokens},
               {"temperature", 0},
               {"stream", true}};
  std::string raw;
  auto res =
      client.Post("/v1/chat/completions", httplib::Headers{}, body.dump(), "application/json");
  if (!res || res->status != 200) return "<http error>";
  raw = res->body;
  std::string text;
  size_t pos = 0;
  while ((pos = raw.find("data: ", pos)) != std::string::npos) {
    const size_t end = raw.find("\n\n", pos);
    const std::string payload = raw.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") break;
    json chunk = json::parse(payload, nullptr, false);
    if (!chunk.is_object() || chunk["choices"].empty()) continue;
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) text += delta["content"];
  }
  return text;
}

// log_softmax(row)[id], in double, written out here rather than taken from
// the code under test.
double LogSoftmax(const std::vector<float>& row, int32_t id) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float v : row) sum += std::exp(v - max);
  return row[id] - max - std::log(sum);
}

TEST(ApiClusterTest, LogprobsAreTheLogSoftmaxOfTheModelsLogits) {
  LoopbackCluster cluster(HeadOptions());
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  const json messages = json::array({{{"role", "user"}, {"content", kTurns[0]}}});
  httplib::Client client("127.0.0.1", cluster.api_port());
  client.set_read_timeout(60, 0);
  json body = {{"messages", messages},
               {"max_tokens", 12},
               {"temperature", 0},
               {"logprobs", true},
               {"top_logprobs", 5}};
  auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body << cluster.Logs();
  const json content = json::parse(res->body)["choices"][0]["logprobs"]["content"];

  LocalReference local;
  const std::vector<int32_t> prompt = local.PromptIds(messages);
  std::vector<int32_t> generated = local.Generate(prompt);
  generated.resize(std::min<size_t>(generated.size(), 12));
  if (!generated.empty() && local.tokenizer().IsEndOfGeneration(generated.back())) {
    generated.pop_back();  // an end token has no entry
  }
  ASSERT_GE(generated.size(), 4u);
  const std::vector<std::vector<float>> logits = local.Logits(prompt, generated);
  ASSERT_EQ(content.size(), generated.size()) << res->body;
  for (size_t i = 0; i < generated.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("token ", i));
    EXPECT_EQ(content[i]["token"], local.tokenizer().TokenToPiece(generated[i]));
    EXPECT_NEAR(content[i]["logprob"].get<double>(), LogSoftmax(logits[i], generated[i]), 1e-5);
    // The alternatives: the 5 best of the same row, best first.
    std::vector<double> expected;
    for (size_t id = 0; id < logits[i].size(); ++id) {
      expected.push_back(LogSoftmax(logits[i], static_cast<int32_t>(id)));
    }
    std::sort(expected.rbegin(), expected.rend());
    const json& top = content[i]["top_logprobs"];
    ASSERT_EQ(top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_NEAR(top[k]["logprob"].get<double>(), expected[k], 1e-5);
      if (k > 0) {
        EXPECT_GE(top[k - 1]["logprob"], top[k]["logprob"]);
      }
    }
    // Greedy: the chosen token is the best one.
    EXPECT_EQ(top[0]["token"], content[i]["token"]);
  }
}

// A schema with most of what json_schema can say, for structured output.
const char kPersonSchema[] = R"({"type":"object","properties":{
    "name":{"type":"string","minLength":1,"maxLength":12},
    "age":{"type":"integer","minimum":0,"maximum":120},
    "role":{"enum":["king","cat","baker"]},
    "tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":3},
    "home":{"type":"object","properties":{"town":{"type":"string","maxLength":10},
            "near_sea":{"type":"boolean"}},"required":["town"],"additionalProperties":false},
    "note":{"anyOf":[{"type":"null"},{"type":"number"}]}},
  "required":["name","age","role","home"],"additionalProperties":false})";

TEST(ApiClusterTest, HundredSeededJsonSchemaRepliesAllValidate) {
  LoopbackCluster cluster(HeadOptions());
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  const json schema = json::parse(kPersonSchema);
  constexpr int kSamples = 100;
  std::vector<std::string> replies(kSamples);
  std::vector<std::string> failures;
  std::mutex mu;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      httplib::Client client("127.0.0.1", cluster.api_port());
      client.set_read_timeout(120, 0);
      for (int i = w; i < kSamples; i += 4) {
        json body = {
            {"messages", json::array({{{"role", "user"}, {"content", "A person."}}})},
            {"max_tokens", 1000},
            {"seed", i + 1},
            {"temperature", 1.0},
            {"response_format",
             {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", schema}}}}}};
        auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
        std::lock_guard<std::mutex> lock(mu);
        if (!res || res->status != 200) {
          failures.push_back(res ? res->body : "no answer");
          continue;
        }
        const json out = json::parse(res->body);
        if (out["choices"][0]["finish_reason"] != "stop") failures.push_back(res->body);
        replies[i] = out["choices"][0]["message"]["content"];
      }
    });
  }
  for (std::thread& t : workers) t.join();
  ASSERT_TRUE(failures.empty()) << failures.size() << " failed, e.g. " << failures[0];
  int parsed = 0;
  for (const std::string& r : replies) parsed += json::parse(r, nullptr, false).is_object();
  EXPECT_EQ(parsed, kSamples);

  // Validation by an independent validator: Debian's python3-jsonschema.
  if (testing::RunCommand("/usr/bin/python3 -c 'import jsonschema'").exit_code != 0) {
    GTEST_SKIP() << "python3-jsonschema is missing: the replies parsed, but were not validated";
  }
  const std::string file = cluster.dir() + "/replies.json";
  {
    std::ofstream out(file);
    out << json{{"schema", schema}, {"replies", replies}}.dump();
  }
  const std::string script = cluster.dir() + "/validate.py";
  {
    std::ofstream out(script);
    out << "import json, jsonschema, sys\n"
           "d = json.load(open(sys.argv[1]))\n"
           "v = jsonschema.Draft202012Validator(d['schema'])\n"
           "ok = sum(1 for r in d['replies'] if not list(v.iter_errors(json.loads(r))))\n"
           "print('%d/%d valid' % (ok, len(d['replies'])))\n";
  }
  testing::CommandResult v = testing::RunCommand("/usr/bin/python3 " + script + " " + file);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("100/100 valid"), std::string::npos) << v.output;
  std::printf("json_schema replies: %s", v.output.c_str());
}

TEST(ApiClusterTest, EightConcurrentStreamsEachGetTheirOwnText) {
  LoopbackCluster cluster(HeadOptions());
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  LocalReference local;
  const std::vector<std::string> prompts = {"A dog", "A red ball", "The sun", "A big tree",
                                            "Lily",  "A boat",     "Tom ran", "The park"};
  std::vector<std::string> expected;
  for (const std::string& p : prompts) {
    json m = json::array({{{"role", "user"}, {"content", p}}});
    expected.push_back(local.Text(local.Generate(local.PromptIds(m))));
  }
  std::vector<std::string> got(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { got[i] = StreamChat(cluster.api_port(), prompts[i]); });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], expected[i]) << prompts[i];
}

// A non-streaming request on a model that seldom stops (random weights),
// whose client hangs up: the head cancels it along the ring, as its metrics
// show, long before max_tokens.
TEST(ApiClusterTest, ANonStreamingRequestStopsWhenItsClientDisconnects) {
  const std::string dir = testing::MakeTempDir("ringlm-disconnect");
  const std::string model = dir + "/tiny.gguf";
  testing::CommandResult synth = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " synth --preset tiny --type f32 --out ", model), false);
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  LoopbackCluster::Options options = HeadOptions();
  options.model = model;
  options.extra_args = {"--ctx-size", "4096"};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  const MetricLabels cancelled = {{"finish", "cancelled"}};
  auto metric = [&](const char* name, const MetricLabels& labels = {}) {
    return FindSample(cluster.Metrics(0), name, labels).value_or(-1);
  };
  ASSERT_EQ(metric("ringlm_requests_total", cancelled), 0);

  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(cluster.api_port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string body = R"({"prompt":"Once upon a time","max_tokens":4000,"temperature":0})";
  const std::string request = absl::StrCat(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: ",
      body.size(), "\r\n\r\n", body);
  ASSERT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(testing::WaitFor([&] { return metric("ringlm_requests_active") == 1; }, 30s))
      << cluster.Logs();
  std::this_thread::sleep_for(300ms);  // well into its decode
  ::close(fd);                         // hang up without reading the answer
  const auto closed = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      testing::WaitFor([&] { return metric("ringlm_requests_total", cancelled) == 1; }, 30s))
      << cluster.Logs();
  std::printf("cancelled %.3f s after the client hung up\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - closed).count());
  const double generated = metric("ringlm_generated_tokens_total");
  EXPECT_LT(generated, 4000);
  // Nothing more is generated for it.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(metric("ringlm_generated_tokens_total"), generated);
  EXPECT_EQ(metric("ringlm_requests_active"), 0);
}

TEST(ApiClusterTest, MetricsParseAsPrometheusTextAndMoveWithRequests) {
  LoopbackCluster cluster(HeadOptions());
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  const auto before = cluster.Metrics(0);
  const MetricLabels length = {{"finish", "length"}};
  const double requests_before = FindSample(before, "ringlm_requests_total", length).value_or(-1);
  EXPECT_EQ(requests_before, 0);
  json messages = json::array({{{"role", "user"}, {"content", kTurns[0]}}});
  Reply first = Chat(cluster.api_port(), messages);
  messages.push_back({{"role", "assistant"}, {"content", first.content}});
  messages.push_back({{"role", "user"}, {"content", kTurns[1]}});
  Reply second = Chat(cluster.api_port(), messages);
  ASSERT_EQ(second.status, 200);
  const auto after = cluster.Metrics(0);
  EXPECT_EQ(FindSample(after, "ringlm_requests_total", length), 2);
  EXPECT_EQ(FindSample(after, "ringlm_generated_tokens_total"), 2 * kMaxTokens);
  EXPECT_EQ(FindSample(after, "ringlm_prompt_tokens_total"),
            first.prompt_tokens + second.prompt_tokens);
  EXPECT_EQ(FindSample(after, "ringlm_prefix_cache_hits_total"), 1);
  EXPECT_EQ(FindSample(after, "ringlm_prefix_cache_tokens_total"), second.cached);
  EXPECT_EQ(FindSample(after, "ringlm_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(FindSample(after, "ringlm_peers"), 2);
  for (size_t i = 0; i < cluster.size(); ++i) {
    const auto node = cluster.Metrics(i);
    EXPECT_GT(FindSample(node, "ringlm_stage_forward_seconds_count").value_or(0), 0) << i;
    EXPECT_GT(FindSample(node, "ringlm_layers_held").value_or(0), 0) << i;
  }
  // `ringlm status` shows the same figures.
  json status = cluster.Status(0);
  ASSERT_TRUE(status.is_object());
  EXPECT_EQ(status["nodes"][0]["metrics"]["requests"], 2);
  EXPECT_EQ(status["nodes"][0]["metrics"]["cache_hits"], 1);
}

}  // namespace
}  // namespace ringlm
