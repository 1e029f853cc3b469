// Several models on one cluster (issue 42): three real daemons on loopback
// each serve stories260K and a synthetic tinyllama-shaped model. Each model
// gets its own plan over the three nodes within its part of each node's
// memory, and interleaved requests to both get exactly the ids one process
// gives for each model alone; a model that does not fit says by how much;
// a model loaded while the others stream disturbs none of them.
#include <httplib.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "inference/model.h"
#include "tests/daemon_harness.h"
#include "tests/generation_stream.h"
#include "tests/local_generation.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using testing::GenerationStream;
using testing::LoopbackCluster;
using testing::Sampling;

constexpr int kTokens = 24;
const std::vector<std::string> kPrompts = {"Once upon a time", "Lily and Tom", "The cat",
                                           "One day"};

// A small synthetic model (about 18 MiB): the one given 1 MiB per node,
// which cannot fit, and the one loaded while the daemons serve.
const std::string& TinyModel() {
  static const std::string* path = [] {
    auto* p = new std::string(testing::MakeTempDir("ringlm-multi") + "/unfit.gguf");
    testing::CommandResult synth = testing::RunCommand(
        absl::StrCat(testing::RinglmPath(), " synth --preset tiny --type f32 --out ", *p), false);
    EXPECT_EQ(synth.exit_code, 0) << synth.output;
    return p;
  }();
  return *path;
}

// The synthetic model, written once per test process.
const std::string& LargeModel() {
  static const std::string* path = [] {
    auto* p = new std::string(testing::MakeTempDir("ringlm-multi") + "/tinyllama.gguf");
    testing::CommandResult synth =
        testing::RunCommand(absl::StrCat(testing::RinglmPath(),
                                         " synth --preset tinyllama-1.1b --type q4_0 --out ", *p),
                            false);
    EXPECT_EQ(synth.exit_code, 0) << synth.output;
    return p;
  }();
  return *path;
}

class MultiModelClusterTest : public ::testing::Test {
 protected:
  static LoopbackCluster::Options Options(const std::vector<int>& memory_mb) {
    LoopbackCluster::Options options;
    options.model = "stories260K-f32.gguf";
    options.memory_mb = memory_mb;
    options.extra_args = {"--model",        "large=" + LargeModel(),
                          "--model",        "unfit=" + TinyModel(),
                          "--model-memory", "unfit=1",
                          "--ctx-size",     "256"};
    return options;
  }
};

TEST_F(MultiModelClusterTest, InterleavedRequestsToTwoModelsGetEachModelsOwnIds) {
  const std::vector<int> memory_mb = {4000, 2000, 2000};
  LoopbackCluster cluster(Options(memory_mb));
  ASSERT_TRUE(testing::WaitFor(
      [&] { return cluster.AllFormed("stories260K-f32") && cluster.AllFormed("large"); }, 60s))
      << cluster.Logs();

  // Each node's parts of memory for the two models sum to its --memory-mb,
  // and the layers each holds of each model fit its part.
  for (size_t n = 0; n < cluster.size(); ++n) {
    uint64_t offered = 0;
    for (const std::string& model : {"stories260K-f32", "large"}) {
      const nlohmann::json status = cluster.Status(n, model);
      ASSERT_TRUE(status.is_object()) << model;
      EXPECT_EQ(status["served_models"],
                nlohmann::json(std::vector<std::string>{"stories260K-f32", "large", "unfit"}));
      for (const nlohmann::json& node : status["nodes"]) {
        if (!node["self"].get<bool>()) continue;
        const uint64_t usable = node["usable_memory_bytes"].get<uint64_t>();
        offered += usable;
        ASSERT_FALSE(node["layers_bytes"].is_null()) << model;
        EXPECT_LE(node["layers_bytes"].get<uint64_t>(), usable) << "node " << n << " " << model;
        std::printf("node %zu %s: layers [%d, %d), %.1f MiB of %.1f MiB\n", n, model.c_str(),
                    node["layers"][0].get<int>(), node["layers"][1].get<int>(),
                    node["layers_bytes"].get<uint64_t>() / 1048576.0, usable / 1048576.0);
      }
    }
    offered += 1 << 20;  // unfit's
    EXPECT_LE(offered, uint64_t(memory_mb[n]) << 20) << "node " << n;
    EXPECT_GE(offered, (uint64_t(memory_mb[n]) << 20) - 2) << "node " << n;  // rounding only
  }

  // Greedy and seeded requests to both models, all at once: each model's
  // greedy ids are one process's, and seeded ones what they are alone.
  auto stream = [&](size_t i) {
    const std::string model = i % 2 == 0 ? "stories260K-f32" : "large";
    const Sampling sampling =
        i % 4 >= 2 ? Sampling{.temperature = 0.8f, .seed = 7 + i} : Sampling{};
    return std::make_unique<GenerationStream>(cluster, sampling, kTokens, kPrompts[i / 2 % 4],
                                              model);
  };
  constexpr size_t kRequests = 8;
  std::vector<std::vector<int32_t>> alone;
  for (size_t i = 0; i < kRequests; ++i) {
    auto [ids, status] = stream(i)->Finish();
    ASSERT_TRUE(status.ok()) << "request " << i << ": " << status;
    alone.push_back(ids);
  }
  for (size_t i = 0; i < kRequests; i += 4) {
    EXPECT_EQ(alone[i], testing::LocalGreedy(testing::ModelPath("stories260K-f32.gguf"),
                                             kPrompts[i / 2 % 4], kTokens))
        << "request " << i;
    EXPECT_EQ(alone[i + 1], testing::LocalGreedy(LargeModel(), kPrompts[(i + 1) / 2 % 4], kTokens))
        << "request " << i + 1;
  }
  std::vector<std::unique_ptr<GenerationStream>> together;
  for (size_t i = 0; i < kRequests; ++i) together.push_back(stream(i));
  for (size_t i = 0; i < kRequests; ++i) {
    auto [ids, status] = together[i]->Finish();
    EXPECT_TRUE(status.ok()) << "request " << i << ": " << status;
    EXPECT_EQ(ids, alone[i]) << "request " << i;
  }
  // The model that does not fit: its ring says by how many MiB, and so does
  // a request for it; the others keep serving.
  const nlohmann::json unfit = cluster.Status(0, "unfit");
  ASSERT_TRUE(unfit.is_object());
  EXPECT_NE(unfit.value("partition_error", "").find("MiB short"), std::string::npos) << unfit;
  testing::CommandResult refused = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " generate --cluster ", cluster.Address(0),
                   " --prompt hi -n 2 --model unfit ", cluster.SecurityArgs(), " 2>&1"),
      false);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("MiB short"), std::string::npos) << refused.output;
  // `ringlm generate --model NAME` reaches the model by name; an unknown
  // name is refused.
  EXPECT_EQ(cluster.Greedy(1, kPrompts[0], kTokens, "--model large"), alone[1]);
  testing::CommandResult unknown = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " generate --cluster ", cluster.Address(0),
                   " --prompt hi -n 2 --model nope ", cluster.SecurityArgs(), " 2>&1"),
      false);
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("does not serve the model 'nope'"), std::string::npos)
      << unknown.output;
}

// POST /v1/admin/models on node `i`'s API, with `key` ("" = none): the
// status and the body.
std::pair<int, std::string> LoadModel(const LoopbackCluster& cluster, size_t i,
                                      const nlohmann::json& body, const std::string& key) {
  httplib::Client client("127.0.0.1", cluster.api_port(i));
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(60, 0);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
  auto res = client.Post("/v1/admin/models", headers, body.dump(), "application/json");
  if (!res) return {-1, "no answer"};
  return {res->status, res->body};
}

// POST /v1/admin/models/`name`/unload on node `i`'s API with `body` and
// `key`: the status.
int UnloadModel(const LoopbackCluster& cluster, size_t i, const std::string& name,
                const std::string& body, const std::string& key) {
  httplib::Client client("127.0.0.1", cluster.api_port(i));
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(120, 0);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
  auto res = client.Post(("/v1/admin/models/" + name + "/unload").c_str(), headers, body,
                         "application/json");
  return res ? res->status : -1;
}

// A model loaded while four streams run to the other two: none of them is
// disturbed (each ends with its ids alone), the new one serves once every
// node has loaded it, and bad load calls get clear errors. Removed, it
// first lets its running requests finish; then requests to it get 404.
TEST_F(MultiModelClusterTest, AModelLoadedWhileOthersStreamServesDisturbsNoneAndDrainsOnRemoval) {
  constexpr char kKey[] = "admin-key-for-tests";
  LoopbackCluster::Options options;
  options.model = "stories260K-f32.gguf";
  options.api = true;
  options.api_nodes = {1, 2};
  // Parts fixed at start leave memory free for the model loaded later.
  options.extra_args = {"--model",        "large=" + LargeModel(),
                        "--model-memory", "stories260K-f32=16",
                        "--model-memory", "large=1500",
                        "--api-key",      kKey,
                        "--ctx-size",     "256"};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return cluster.AllFormed("stories260K-f32") && cluster.AllFormed("large"); }, 60s))
      << cluster.Logs();

  auto stream = [&](size_t i) {
    return std::make_unique<GenerationStream>(cluster, Sampling{}, 48, kPrompts[i % 4],
                                              i % 2 == 0 ? "stories260K-f32" : "large");
  };
  std::vector<std::vector<int32_t>> alone;
  for (size_t i = 0; i < 4; ++i) {
    auto [ids, status] = stream(i)->Finish();
    ASSERT_TRUE(status.ok()) << status;
    alone.push_back(ids);
  }

  // Refused: no key, a file that is not there, a file that is no GGUF, a
  // taken name, more memory than is left.
  const std::string not_gguf = cluster.dir() + "/not.gguf";
  ASSERT_TRUE(testing::RunCommand("echo not a model > " + not_gguf, false).exit_code == 0);
  auto [no_key, no_key_body] =
      LoadModel(cluster, 0, {{"name", "third"}, {"path", TinyModel()}}, "");
  EXPECT_EQ(no_key, 401) << no_key_body;
  auto [missing, missing_body] =
      LoadModel(cluster, 0, {{"name", "third"}, {"path", "/nonexistent/x.gguf"}}, kKey);
  EXPECT_GE(missing, 400) << missing_body;
  EXPECT_NE(missing_body.find("/nonexistent/x.gguf"), std::string::npos) << missing_body;
  auto [bad, bad_body] = LoadModel(cluster, 0, {{"name", "third"}, {"path", not_gguf}}, kKey);
  EXPECT_GE(bad, 400) << bad_body;
  EXPECT_LT(bad, 500) << bad_body;
  auto [taken, taken_body] =
      LoadModel(cluster, 0, {{"name", "large"}, {"path", TinyModel()}}, kKey);
  EXPECT_EQ(taken, 409) << taken_body;
  auto [greedy, greedy_body] = LoadModel(
      cluster, 1, {{"name", "third"}, {"path", TinyModel()}, {"memory_mb", 100000}}, kKey);
  EXPECT_EQ(greedy, 409) << greedy_body;
  EXPECT_NE(greedy_body.find("MiB left"), std::string::npos) << greedy_body;

  // Four streams run while every node loads the third model.
  std::vector<std::unique_ptr<GenerationStream>> running;
  for (size_t i = 0; i < 4; ++i) running.push_back(stream(i));
  for (auto& s : running) s->WaitFor(2);
  for (size_t n = 0; n < cluster.size(); ++n) {
    auto [code, body] =
        LoadModel(cluster, n, {{"name", "third"}, {"path", TinyModel()}, {"memory_mb", 200}}, kKey);
    EXPECT_EQ(code, 201) << "node " << n << ": " << body;
  }
  for (size_t i = 0; i < 4; ++i) {
    auto [ids, status] = running[i]->Finish();
    EXPECT_TRUE(status.ok()) << "stream " << i << ": " << status;
    EXPECT_EQ(ids, alone[i]) << "stream " << i;
  }
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed("third"); }, 60s)) << cluster.Logs();
  EXPECT_EQ(cluster.Greedy(0, kPrompts[0], kTokens, "--model third"),
            testing::LocalGreedy(TinyModel(), kPrompts[0], kTokens));
  // The others still serve as before.
  auto [after, status] = stream(1)->Finish();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(after, alone[1]);

  // Removing it drains its running requests first; later ones are refused.
  auto third = [&] {
    return std::make_unique<GenerationStream>(cluster, Sampling{}, 200, kPrompts[2], "third");
  };
  auto [third_alone, third_status] = third()->Finish();
  ASSERT_TRUE(third_status.ok()) << third_status;
  std::vector<std::unique_ptr<GenerationStream>> draining;
  for (int i = 0; i < 2; ++i) draining.push_back(third());
  for (auto& s : draining) s->WaitFor(2);
  // Reported only: how far the streams were when the removal began.
  std::printf("removing 'third' with its streams at %d and %d of 200 tokens\n",
              draining[0]->tokens(), draining[1]->tokens());
  EXPECT_EQ(UnloadModel(cluster, 0, "third", "", ""), 401);
  EXPECT_EQ(UnloadModel(cluster, 0, "third", R"({"drain_s": 60})", kKey), 200);
  for (auto& s : draining) {
    auto [ids, st] = s->Finish();
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(ids, third_alone);
  }
  httplib::Client api("127.0.0.1", cluster.api_port(0));
  auto refused =
      api.Post("/v1/completions", {{"Authorization", std::string("Bearer ") + kKey}},
               R"({"model": "third", "prompt": "Once", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 404) << refused->body;
  testing::CommandResult cli = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " generate --cluster ", cluster.Address(0),
                   " --prompt hi -n 2 --model third ", cluster.SecurityArgs(), " 2>&1"),
      false);
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_NE(cli.output.find("does not serve the model 'third'"), std::string::npos) << cli.output;
  for (size_t n = 1; n < cluster.size(); ++n) {
    EXPECT_EQ(UnloadModel(cluster, n, "third", R"({"drain_s": 0})", kKey), 200) << "node " << n;
  }
  // The last two models still serve.
  auto [last, last_status] = stream(1)->Finish();
  EXPECT_TRUE(last_status.ok()) << last_status;
  EXPECT_EQ(last, alone[1]);
}

// The ids /v1/models lists on node `i`'s API.
std::vector<std::string> ListedModels(const LoopbackCluster& cluster, size_t i,
                                      const std::string& key) {
  httplib::Client client("127.0.0.1", cluster.api_port(i));
  client.set_read_timeout(10, 0);
  auto res = client.Get("/v1/models", {{"Authorization", "Bearer " + key}});
  std::vector<std::string> ids;
  if (!res || res->status != 200) return ids;
  const nlohmann::json listed = nlohmann::json::parse(res->body, nullptr, false);
  if (!listed.is_object()) return ids;
  for (const nlohmann::json& m : listed["data"]) ids.push_back(m["id"].get<std::string>());
  return ids;
}

// --models-file, re-read on SIGHUP: a model added to it is loaded (one that
// cannot be is logged, and nothing else stops); a model taken out of it is
// removed; the --model one is left alone.
TEST_F(MultiModelClusterTest, TheModelsFileIsReReadOnSighup) {
  constexpr char kKey[] = "admin-key-for-tests";
  LoopbackCluster::Options options;
  options.model = "stories260K-f32.gguf";
  options.memory_mb = {2000};
  options.api = true;
  const std::string models_file = testing::MakeTempDir("ringlm-models") + "/models.txt";
  auto write = [&](const std::string& text) {
    FILE* f = std::fopen(models_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  write("# nothing yet\n");
  options.extra_args = {"--models-file",      models_file, "--model-memory",
                        "stories260K-f32=16", "--api-key", kKey};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  EXPECT_EQ(ListedModels(cluster, 0, kKey), std::vector<std::string>{"stories260K-f32"});

  write(absl::StrCat("tiny=", TinyModel(), " memory_mb=64\nbad=/nonexistent/bad.gguf\n"));
  cluster.node(0).Signal(SIGHUP);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed("tiny"); }, 30s)) << cluster.Logs();
  EXPECT_EQ(ListedModels(cluster, 0, kKey), (std::vector<std::string>{"stories260K-f32", "tiny"}));
  EXPECT_EQ(cluster.Greedy(0, kPrompts[0], kTokens, "--model tiny"),
            testing::LocalGreedy(TinyModel(), kPrompts[0], kTokens));
  EXPECT_NE(cluster.node(0).Log().find("cannot load bad from /nonexistent/bad.gguf"),
            std::string::npos);

  write("# tiny is gone\n");
  cluster.node(0).Signal(SIGHUP);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return ListedModels(cluster, 0, kKey) == std::vector<std::string>{"stories260K-f32"}; },
      30s))
      << cluster.Logs();
  EXPECT_EQ(cluster.Greedy(0, kPrompts[0], kTokens),
            testing::LocalGreedy(testing::ModelPath("stories260K-f32.gguf"), kPrompts[0], kTokens));
}

// A node with no model files fetches both models' layers from the members
// (--model-from-peers with two --model-fingerprint), and each model's ring
// through it gives one process's ids.
TEST_F(MultiModelClusterTest, ANodeFetchesTwoModelsFromPeers) {
  std::string fingerprints[2];
  const std::string files[2] = {testing::ModelPath("stories260K-f32.gguf"), LargeModel()};
  for (int m = 0; m < 2; ++m) {
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(files[m], {});
    ASSERT_TRUE(model.ok()) << model.status();
    fingerprints[m] = (*model)->fingerprint();
  }
  LoopbackCluster::Options options;
  options.model = "stories260K-f32.gguf";
  options.node_models = {"stories260K-f32.gguf", "stories260K-f32.gguf",
                         LoopbackCluster::kFromPeers};
  options.node_extra_args = {
      {"--model", "large=" + LargeModel()},
      {"--model", "large=" + LargeModel()},
      {"--model-fingerprint", fingerprints[0], "--model-fingerprint", fingerprints[1]}};
  options.extra_args = {"--ctx-size", "256"};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return cluster.AllFormed(fingerprints[0]) && cluster.AllFormed(fingerprints[1]); },
      120s))
      << cluster.Logs();
  for (int m = 0; m < 2; ++m) {
    EXPECT_EQ(cluster.Greedy(2, kPrompts[m], kTokens, "--model " + fingerprints[m]),
              testing::LocalGreedy(files[m], kPrompts[m], kTokens))
        << files[m];
  }
}

}  // namespace
}  // namespace ringlm
