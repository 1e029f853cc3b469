// A cluster of real ringlmd processes on 127.0.0.1 for tests, each with its
// own ports and state directory, discovering each other over loopback
// broadcast (or --peers).
#ifndef RINGLM_TESTS_LOOPBACK_CLUSTER_H_
#define RINGLM_TESTS_LOOPBACK_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "base/prometheus_text.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_harness.h"

namespace ringlm::testing {

// Starts its nodes in the constructor and stops them in the destructor.
// Node 0 is the head when `api` is set; `api_nodes` makes more heads. Not
// thread-safe.
class LoopbackCluster {
 public:
  struct Options {
    std::string model = "stories260K-f32.gguf";
    std::vector<int> memory_mb = {4000, 2000, 2000};
    bool broadcast = true;                     // else --no-broadcast with --peers
    bool api = false;                          // node 0 serves the HTTP API on api_port()
    std::vector<size_t> api_nodes;             // these serve it too, each on api_port(i)
    std::vector<std::string> extra_args;       // for every node
    std::vector<std::string> head_extra_args;  // for node 0 only
    // Per node (missing entries: none), after extra_args.
    std::vector<std::vector<std::string>> node_extra_args;
    // With a cluster key (written to key_file()); false runs --insecure.
    bool secure = true;
    // Per node (missing entries: `model`): a file in the shared models folder
    // or an absolute path, or kFromPeers for a node with no file that fetches
    // its layers from the others (--model-from-peers).
    std::vector<std::string> node_models;
    // --placement of every node. These nodes share one CPU, so the speeds
    // they measure differ only by noise; tests of the split place by memory.
    std::string placement = "memory";
  };
  static constexpr char kFromPeers[] = "<from peers>";

  explicit LoopbackCluster(Options options);

  // (Re)starts node i with the same ports and state dir, hence the same id.
  void StartNode(size_t i);
  // Stops node i with SIGKILL and reaps it.
  void KillNode(size_t i);

  std::string Address(size_t i) const;
  uint16_t api_port() const { return api_ports_[0]; }
  uint16_t api_port(size_t i) const { return api_ports_[i]; }  // 0: node i is no head
  uint16_t metrics_port(size_t i) const { return metrics_ports_[i]; }
  ChildProcess& node(size_t i) { return *nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  uint16_t discovery_port() const { return discovery_port_; }
  // The cluster key every node runs with; empty with secure = false.
  const std::string& key_file() const { return key_file_; }
  // "--cluster-key FILE" or "--insecure", for `ringlm` command lines.
  std::string SecurityArgs() const;
  const std::string& dir() const { return dir_; }
  // Node i's state directory (its node id and TLS key).
  std::string StateDir(size_t i) const;

  // GET /metrics of node i, parsed (a test failure, and empty, when that
  // fails).
  std::vector<PrometheusSample> Metrics(size_t i) const;
  // Greedy ids for `prompt` (BOS added) through the cluster, entering at
  // node `entry`: `ringlm generate --cluster ... --temp 0 -n N --json` plus
  // `extra` flags. Empty, with a test failure, when the command fails.
  std::vector<int32_t> Greedy(size_t entry, const std::string& prompt, int n,
                              const std::string& extra = "") const;
  // `ringlm status --json` against node i, about `model` (a name the node
  // serves; empty = its first); null when it fails.
  nlohmann::json Status(size_t i, const std::string& model = "") const;
  // True when node i sees `n` nodes, all ready, and a plan of `model` over
  // all of them.
  bool Formed(size_t i, size_t n, const std::string& model = "") const;
  // Every node formed with all of them.
  bool AllFormed(const std::string& model = "") const;
  std::string Logs();

 private:
  Options options_;
  std::string dir_;
  std::string key_file_;
  uint16_t discovery_port_ = 0;
  std::vector<uint16_t> api_ports_;  // per node; 0 = no API
  std::vector<uint16_t> ports_;
  std::vector<uint16_t> metrics_ports_;
  std::vector<std::unique_ptr<ChildProcess>> nodes_;
};

}  // namespace ringlm::testing

#endif  // RINGLM_TESTS_LOOPBACK_CLUSTER_H_
