// Model distribution on real ringlmd processes on loopback: nodes without
// the model file fetch just their layers from the members that hold them,
// verified, keep them across restarts, fetch only what a re-partition adds,
// and avoid a member that serves bad bytes (docs/model-fetch.md).
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/prometheus_text.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "inference/model.h"
#include "model_store/tensor_manifest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_harness.h"
#include "tests/local_generation.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::LoopbackCluster;

constexpr char kPrompt[] = "Once upon a time";

// A metric of node i, or -1 when it cannot be read.
double Metric(const LoopbackCluster& cluster, size_t i, const std::string& name) {
  httplib::Client client("127.0.0.1", cluster.metrics_port(i));
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return -1;
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(res->body);
  if (!samples.ok()) return -1;
  return FindSample(*samples, name, {}).value_or(-1);
}

// Node i's layer range in the plan, as [first, last); {0, 0} when none.
LayerRange RangeOf(const LoopbackCluster& cluster, size_t i) {
  json status = cluster.Status(i);
  if (!status.is_object()) return {};
  const std::string id = status["node_id"].get<std::string>();
  for (const json& st : status["plan"]["stages"]) {
    if (st["node_id"] == id)
      return {st["first_layer"].get<uint32_t>(), st["last_layer"].get<uint32_t>()};
  }
  return {};
}

// Tensor bytes a node running `range` of the model at `path` holds.
uint64_t TensorBytes(const std::string& path, LayerRange range) {
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(path, {LayerRange{0, 0}, 0});
  EXPECT_TRUE(model.ok());
  if (!model.ok()) return 0;
  absl::StatusOr<StageWeights> w = (*model)->LoadStage(range);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? w->bytes() : 0;
}

uint64_t HeaderBytes(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok());
  return file.ok() ? (*file)->data_offset() : 0;
}

// Disk space (allocated blocks) under `dir`.
uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    struct stat st {};
    if (e.is_regular_file() && ::stat(e.path().c_str(), &st) == 0) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

// A synthetic model with tensors of some size (so block rounding on disk is
// small against a share), written into `dir`.
std::string SynthModel(const std::string& dir) {
  const std::string path = dir + "/tiny-f32.gguf";
  testing::CommandResult r = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " synth --preset tiny --type f32 --out ", path), false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return path;
}

TEST(ModelFetchClusterTest, TwoNodesWithoutTheFileFetchTheirLayersAndGenerateTheReference) {
  LoopbackCluster::Options options;
  options.node_models = {"stories260K-f32.gguf", LoopbackCluster::kFromPeers,
                         LoopbackCluster::kFromPeers};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 40s)) << cluster.Logs();
  std::ifstream in(std::string(RINGLM_SHARED_DIR) + "/refs/stories260k_llamacpp.json");
  const json refs = json::parse(in);
  for (const json& g : refs["generation"]) {
    if (g["prompt"] != kPrompt) continue;
    const std::vector<int32_t> expected = g["f32"]["generated_ids"].get<std::vector<int32_t>>();
    for (size_t entry = 0; entry < cluster.size(); ++entry) {
      EXPECT_EQ(cluster.Greedy(entry, kPrompt, static_cast<int>(expected.size())), expected)
          << "via node " << entry << "\n"
          << cluster.Logs();
    }
  }
  // Each fetching node brought in its share. The file's holder sent the
  // header to each, and the tensors; a fetching node may also have sent one
  // it held already (a partial copy serves what it verified).
  const double fetched1 = Metric(cluster, 1, "ringlm_model_fetch_bytes_total");
  const double fetched2 = Metric(cluster, 2, "ringlm_model_fetch_bytes_total");
  EXPECT_GT(fetched1, 0);
  EXPECT_GT(fetched2, 0);
  EXPECT_EQ(Metric(cluster, 0, "ringlm_model_fetch_bytes_total"), 0);
  const double served = Metric(cluster, 0, "ringlm_model_served_bytes_total") +
                        Metric(cluster, 1, "ringlm_model_served_bytes_total") +
                        Metric(cluster, 2, "ringlm_model_served_bytes_total");
  EXPECT_EQ(served,
            fetched1 + fetched2 + 2 * HeaderBytes(testing::ModelPath("stories260K-f32.gguf")));
  EXPECT_EQ(Metric(cluster, 1, "ringlm_model_fetch_bad_chunks_total"), 0);
}

TEST(ModelFetchClusterTest, DiskStaysNearTheShareARestartFetchesNothingARepartitionOnlyTheRest) {
  const std::string dir = testing::MakeTempDir("ringlm-fetch");
  const std::string model = SynthModel(dir);
  LoopbackCluster::Options options;
  // 4 layers: 1 on the file's holder, 3 between the fetching nodes; without
  // node 2, node 1 takes 3.
  options.memory_mb = {1000, 4000, 4000};
  options.node_models = {model, LoopbackCluster::kFromPeers, LoopbackCluster::kFromPeers};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 40s)) << cluster.Logs();
  const std::vector<int32_t> local = testing::LocalGreedy(model, kPrompt, 24);
  EXPECT_EQ(cluster.Greedy(1, kPrompt, 24), local) << cluster.Logs();

  for (size_t i : {1, 2}) {
    const LayerRange range = RangeOf(cluster, i);
    ASSERT_GT(range.size(), 0u);
    const uint64_t tensors = TensorBytes(model, range);
    const uint64_t share = HeaderBytes(model) + tensors;
    const uint64_t disk = DiskBytes(cluster.StateDir(i) + "/models");
    std::printf("node %zu: layers [%u, %u), share %.2f MB, disk %.2f MB (%.3fx)\n", i, range.first,
                range.last, share / 1e6, disk / 1e6, static_cast<double>(disk) / share);
    EXPECT_LE(disk, share * 1.1) << "node " << i;
    // Exactly the tensor bytes of its range came over the network.
    EXPECT_EQ(Metric(cluster, i, "ringlm_model_fetch_bytes_total"), tensors) << "node " << i;
  }

  // A restart finds its layers on disk.
  cluster.KillNode(1);
  cluster.StartNode(1);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 40s)) << cluster.Logs();
  EXPECT_EQ(Metric(cluster, 1, "ringlm_model_fetch_bytes_total"), 0) << cluster.Logs();
  EXPECT_EQ(cluster.Greedy(1, kPrompt, 24), local);

  // Node 2 leaves: node 1 takes more layers and fetches only those.
  const LayerRange before = RangeOf(cluster, 1);
  cluster.KillNode(2);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        json s = cluster.Status(1);
        return s.is_object() && s["plan"]["stages"].size() == 2 && cluster.Formed(0, 2);
      },
      40s))
      << cluster.Logs();
  const LayerRange after = RangeOf(cluster, 1);
  ASSERT_GT(after.size(), before.size());
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(model, {LayerRange{0, 0}, 0});
  ASSERT_TRUE(m.ok());
  absl::StatusOr<StageWeights> old_w = (*m)->LoadStage(before);
  absl::StatusOr<StageWeights> new_w = (*m)->LoadStage(after);
  ASSERT_TRUE(old_w.ok() && new_w.ok());
  uint64_t added = 0;
  for (const GgufTensorInfo* t : new_w->tensors()) {
    if (std::find(old_w->tensors().begin(), old_w->tensors().end(), t) == old_w->tensors().end()) {
      added += t->n_bytes;
    }
  }
  EXPECT_EQ(Metric(cluster, 1, "ringlm_model_fetch_bytes_total"), added) << cluster.Logs();
  EXPECT_EQ(cluster.Greedy(0, kPrompt, 24), local);
}

TEST(ModelFetchClusterTest, AMemberServingCorruptBytesIsAvoidedAndTheGoodOneUsed) {
  const std::string dir = testing::MakeTempDir("ringlm-fetch");
  const std::string good = SynthModel(dir);
  // The bad member's copy rotted on disk after its manifest was made: one
  // byte flipped in every tensor, the modification time kept, so the cached
  // manifest (of the good bytes) still looks valid to it.
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(good);
  ASSERT_TRUE(file.ok());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(good, {LayerRange{0, 0}, 0});
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(
      LoadOrComputeManifest(good, **file, (*model)->fingerprint(), dir + "/manifests").ok());
  const std::string bad = dir + "/rotten.gguf";
  std::filesystem::copy_file(good, bad);
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    for (const GgufTensorInfo& t : (*file)->tensors()) {
      const uint64_t at = (*file)->data_offset() + t.offset + t.n_bytes / 2;
      f.seekg(at);
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x40);
      f.seekp(at);
      f.write(&c, 1);
    }
  }
  std::filesystem::last_write_time(bad, std::filesystem::last_write_time(good));
  std::filesystem::copy_file(good + ".ringlm-manifest", bad + ".ringlm-manifest");

  LoopbackCluster::Options options;
  // The fetching node gets the most memory, so it holds most layers.
  options.memory_mb = {2000, 2000, 4000};
  options.node_models = {good, bad, LoopbackCluster::kFromPeers};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return Metric(cluster, 2, "ringlm_model_fetch_bytes_total") > 0 &&
               Metric(cluster, 2, "ringlm_model_fetch_pending_bytes") == 0;
      },
      40s))
      << cluster.Logs();
  EXPECT_GE(Metric(cluster, 2, "ringlm_model_fetch_bad_chunks_total"), 1) << cluster.Logs();
  EXPECT_NE(cluster.node(2).Log().find("avoid"), std::string::npos) << cluster.node(2).Log();
  // Its layers are the good bytes: a single process on the good file agrees
  // with the first stage's view ... the bad member computes with its own
  // rotten layers, so compare the fetching node's bytes directly.
  const std::string cached = cluster.StateDir(2) + "/models";
  bool compared = false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cached)) {
    if (e.path().filename() != "model.gguf") continue;
    absl::StatusOr<std::unique_ptr<GgufFile>> partial = GgufFile::Open(e.path().string());
    ASSERT_TRUE(partial.ok());
    const LayerRange range = RangeOf(cluster, 2);
    ASSERT_GT(range.size(), 0u);
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(good, {LayerRange{0, 0}, 0});
    ASSERT_TRUE(m.ok());
    absl::StatusOr<StageWeights> w = (*m)->LoadStage(range);
    ASSERT_TRUE(w.ok());
    for (const GgufTensorInfo* t : w->tensors()) {
      const GgufTensorInfo* p = (*partial)->FindTensor(t->name);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(0, std::memcmp(p->data, t->data, t->n_bytes)) << t->name;
    }
    compared = true;
  }
  EXPECT_TRUE(compared);
}

}  // namespace
}  // namespace ringlm
