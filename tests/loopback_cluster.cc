#include "tests/loopback_cluster.h"

#include <signal.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "security/cluster_key.h"

namespace ringlm::testing {

LoopbackCluster::LoopbackCluster(Options options) : options_(std::move(options)) {
  dir_ = MakeTempDir("ringlm-cluster");
  if (options_.secure) {
    key_file_ = dir_ + "/cluster.key";
    absl::StatusOr<ClusterKey> key = ClusterKey::Generate();
    if (!key.ok() || !key->WriteFile(key_file_, false).ok()) key_file_ = dir_ + "/no-key";
  }
  discovery_port_ = FreeUdpPort();
  for (size_t i = 0; i < options_.memory_mb.size(); ++i) {
    ports_.push_back(FreeTcpPort());
    metrics_ports_.push_back(FreeTcpPort());
  }
  api_ports_.assign(ports_.size(), 0);
  if (options_.api) api_ports_[0] = FreeTcpPort();
  for (size_t i : options_.api_nodes) {
    if (i < api_ports_.size() && api_ports_[i] == 0) api_ports_[i] = FreeTcpPort();
  }
  nodes_.resize(ports_.size());
  for (size_t i = 0; i < ports_.size(); ++i) StartNode(i);
}

void LoopbackCluster::StartNode(size_t i) {
  const std::string model =
      i < options_.node_models.size() ? options_.node_models[i] : options_.model;
  std::vector<std::string> argv = {RinglmdPath(),
                                   "--grpc-host",
                                   "127.0.0.1",
                                   "--grpc-port",
                                   std::to_string(ports_[i]),
                                   "--discovery-port",
                                   std::to_string(discovery_port_),
                                   "--memory-mb",
                                   std::to_string(options_.memory_mb[i]),
                                   "--state-dir",
                                   StateDir(i),
                                   "--threads",
                                   "1",
                                   "--metrics-port",
                                   std::to_string(metrics_ports_[i]),
                                   "--loopback-only",
                                   "--placement",
                                   options_.placement};
  if (model == kFromPeers) {
    argv.push_back("--model-from-peers");
  } else {
    argv.insert(argv.end(), {"--model", model.front() == '/' ? model : ModelPath(model)});
  }
  if (options_.secure) {
    argv.insert(argv.end(), {"--cluster-key", key_file_});
  } else {
    argv.push_back("--insecure");
  }
  if (!options_.broadcast) {
    std::vector<std::string> peers;
    for (size_t j = 0; j < ports_.size(); ++j) {
      if (j != i) peers.push_back(absl::StrCat("127.0.0.1:", ports_[j]));
    }
    argv.insert(argv.end(), {"--no-broadcast", "--peers", absl::StrJoin(peers, ",")});
  }
  if (api_ports_[i] != 0) {
    argv.insert(argv.end(),
                {"--api-host", "127.0.0.1", "--api-port", std::to_string(api_ports_[i])});
  }
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  if (i == 0) {
    argv.insert(argv.end(), options_.head_extra_args.begin(), options_.head_extra_args.end());
  }
  if (i < options_.node_extra_args.size()) {
    argv.insert(argv.end(), options_.node_extra_args[i].begin(), options_.node_extra_args[i].end());
  }
  nodes_[i].reset();
  auto child = ChildProcess::Start(argv, absl::StrCat(dir_, "/node", i, ".log"));
  if (child.ok()) nodes_[i] = std::move(*child);
}

void LoopbackCluster::KillNode(size_t i) {
  if (nodes_[i] == nullptr) return;
  nodes_[i]->Signal(SIGKILL);
  nodes_[i]->Wait(std::chrono::seconds(5));
}

std::string LoopbackCluster::SecurityArgs() const {
  return options_.secure ? absl::StrCat("--cluster-key ", ShellQuote(key_file_)) : "--insecure";
}

std::string LoopbackCluster::StateDir(size_t i) const { return absl::StrCat(dir_, "/state", i); }

std::string LoopbackCluster::Address(size_t i) const {
  return absl::StrCat("127.0.0.1:", ports_[i]);
}

std::vector<PrometheusSample> LoopbackCluster::Metrics(size_t i) const {
  httplib::Client client("127.0.0.1", metrics_ports_[i]);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  EXPECT_TRUE(res && res->status == 200) << "node " << i;
  if (!res) return {};
  EXPECT_EQ(res->get_header_value("Content-Type"), kPrometheusContentType);
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(res->body);
  EXPECT_TRUE(samples.ok()) << samples.status() << "\n" << res->body;
  return samples.ok() ? *samples : std::vector<PrometheusSample>{};
}

std::vector<int32_t> LoopbackCluster::Greedy(size_t entry, const std::string& prompt, int n,
                                             const std::string& extra) const {
  CommandResult r = RunCommand(
      absl::StrCat(RinglmPath(), " generate --cluster ", Address(entry), " --prompt ",
                   ShellQuote(prompt), " --temp 0 -n ", n, " --json ", SecurityArgs(), " ", extra),
      false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output, nullptr, false);
  if (!out.is_object() || !out.contains("ids")) return {};
  return out["ids"].get<std::vector<int32_t>>();
}

nlohmann::json LoopbackCluster::Status(size_t i, const std::string& model) const {
  CommandResult r = RunCommand(
      absl::StrCat(RinglmPath(), " status --json --node ", Address(i), " ", SecurityArgs(),
                   model.empty() ? "" : " --model " + ShellQuote(model), " 2>/dev/null"),
      false);
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.output, nullptr, false);
}

bool LoopbackCluster::Formed(size_t i, size_t n, const std::string& model) const {
  nlohmann::json s = Status(i, model);
  if (!s.is_object() || s["nodes"].size() != n || s["plan"]["stages"].size() != n) return false;
  // Every stage holds its layers (a node fetching them is not ready yet).
  for (const nlohmann::json& node : s["nodes"]) {
    if (node["state"] != "ready") return false;
  }
  return true;
}

bool LoopbackCluster::AllFormed(const std::string& model) const {
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (!Formed(i, ports_.size(), model)) return false;
  }
  return true;
}

std::string LoopbackCluster::Logs() {
  std::string all;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]) absl::StrAppend(&all, "--- node ", i, " ---\n", nodes_[i]->Log());
  }
  return all;
}

}  // namespace ringlm::testing
