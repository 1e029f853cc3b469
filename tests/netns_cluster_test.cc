// Three ringlmd hosts in network namespaces (deploy/netns-cluster.sh): they
// find each other by real subnet broadcast to 10.99.0.255 (loopback cannot
// cross namespaces), agree on one 3-stage plan, generate llama.cpp's greedy
// tokens through every entry node, and `down` leaves nothing behind.
//
// Needs root and iproute2; skips itself otherwise. Before any host starts the
// script adds `ip route add blackhole 10.99.0.0/24` in the root namespace, so
// no test traffic can leave the machine.
#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_harness.h"

#ifndef RINGLM_SOURCE_DIR
#define RINGLM_SOURCE_DIR RINGLM_BINARY_DIR "/.."
#endif

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::RunCommand;
using testing::ShellQuote;

constexpr int kHosts = 3;
constexpr char kPort[] = "47801";

std::string Script() { return std::string(RINGLM_SOURCE_DIR) + "/deploy/netns-cluster.sh"; }

std::string HostAddress(int k) { return absl::StrCat("10.99.0.", k, ":", kPort); }
std::string HostNamespace(int k) { return absl::StrCat("ringlm-h", k); }

// Lines of `ip netns list` that name one of the script's namespaces.
std::vector<std::string> RinglmNamespaces() {
  std::vector<std::string> out;
  testing::CommandResult r = RunCommand("ip netns list", false);
  for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipEmpty())) {
    std::string name(line.substr(0, line.find(' ')));
    if (absl::StartsWith(name, "ringlm-")) out.push_back(name);
  }
  return out;
}

// Why namespaces cannot be used here, or "" when they can.
std::string NamespacesUnavailable() {
  if (geteuid() != 0) return "not root: network namespaces need root";
  if (RunCommand("command -v ip >/dev/null").exit_code != 0) return "no 'ip' (iproute2)";
  const std::string probe = absl::StrCat("ringlm-probe-", getpid());
  testing::CommandResult add = RunCommand("ip netns add " + probe);
  if (add.exit_code != 0) return "'ip netns add' failed: " + add.output;
  RunCommand("ip netns del " + probe);
  if (!RinglmNamespaces().empty()) {
    return "ringlm-* namespaces already exist (a cluster from deploy/netns-cluster.sh is up?); "
           "run 'deploy/netns-cluster.sh down' first";
  }
  return "";
}

// Live (not zombie) processes whose command line contains `needle`.
std::vector<std::string> ProcessesMentioning(const std::string& needle) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = readdir(proc)) {
    const std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline_file("/proc/" + pid + "/cmdline");
    std::stringstream ss;
    ss << cmdline_file.rdbuf();
    std::string cmdline = ss.str();
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(needle) == std::string::npos) continue;
    std::ifstream stat_file("/proc/" + pid + "/stat");
    std::string stat;
    std::getline(stat_file, stat);
    const size_t paren = stat.rfind(')');
    const char state =
        paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '?';
    if (state == 'Z' || state == 'X') continue;
    found.push_back(pid + ": " + cmdline);
  }
  closedir(proc);
  return found;
}

// Runs the script with this test's binaries and run directory, and runs
// `down` when it goes out of scope unless Down() already ran.
class NetnsCluster {
 public:
  NetnsCluster() : run_dir_(testing::MakeTempDir("ringlm-netns")) {}
  ~NetnsCluster() {
    if (!down_) Down();
  }

  // `extra`: more options of `up`.
  testing::CommandResult Up(int n, const std::string& extra = "") {
    return RunCommand(absl::StrCat(Env(), " ", ShellQuote(Script()), " up ", n, " --model ",
                                   ShellQuote(testing::ModelPath("stories260K-f32.gguf")),
                                   " --daemon-args '--threads 1' ", extra));
  }

  testing::CommandResult Down() {
    down_ = true;
    return RunCommand(absl::StrCat(Env(), " ", ShellQuote(Script()), " down ", kHosts));
  }

  // `ringlm status --json` from inside host k against its own daemon.
  json Status(int k) const {
    testing::CommandResult r = RunCommand(
        absl::StrCat("ip netns exec ", HostNamespace(k), " ", ShellQuote(testing::RinglmPath()),
                     " status --json --node ", HostAddress(k), " ", KeyArgs(), " 2>/dev/null"),
        false);
    if (r.exit_code != 0) return nullptr;
    return json::parse(r.output, nullptr, false);
  }

  // Host k sees n nodes, all ready (holding their layers), and a plan over them.
  bool Formed(int k, size_t n) const {
    json s = Status(k);
    if (!s.is_object() || s["nodes"].size() != n || s["plan"]["stages"].size() != n) return false;
    for (const json& node : s["nodes"]) {
      if (node["state"] != "ready") return false;
    }
    return true;
  }

  std::string Logs() const {
    std::string all;
    for (int k = 1; k <= kHosts; ++k) {
      std::ifstream in(absl::StrCat(run_dir_, "/h", k, "/ringlmd.log"));
      std::stringstream ss;
      ss << in.rdbuf();
      absl::StrAppend(&all, "--- host ", k, " ---\n", ss.str());
    }
    return all;
  }

  const std::string& run_dir() const { return run_dir_; }
  // The script makes the cluster key in its run directory.
  std::string KeyArgs() const {
    return absl::StrCat("--cluster-key ", ShellQuote(run_dir_ + "/cluster.key"));
  }

 private:
  std::string Env() const {
    return absl::StrCat("env RINGLMD=", ShellQuote(testing::RinglmdPath()),
                        " RINGLM=", ShellQuote(testing::RinglmPath()),
                        " RINGLM_NETNS_RUN=", ShellQuote(run_dir_));
  }

  std::string run_dir_;
  bool down_ = false;
};

std::vector<int32_t> ReferenceIds(std::string* prompt) {
  std::ifstream in(std::string(RINGLM_SHARED_DIR) + "/refs/stories260k_llamacpp.json");
  json refs = json::parse(in);
  *prompt = refs["generation"][0]["prompt"].get<std::string>();
  return refs["generation"][0]["f32"]["generated_ids"].get<std::vector<int32_t>>();
}

// Everything between `up` and `down`; fatal failures return here, and the
// caller still runs `down` and checks that nothing is left.
void CheckCluster(NetnsCluster& cluster, const std::string& up_options = "") {
  testing::CommandResult up = cluster.Up(kHosts, up_options);
  ASSERT_EQ(up.exit_code, 0) << up.output;

  // The root namespace routes the test subnet only into the blackhole.
  testing::CommandResult route = RunCommand("ip -4 route show exact 10.99.0.0/24", false);
  EXPECT_TRUE(absl::StartsWith(route.output, "blackhole 10.99.0.0/24")) << route.output;

  const auto start = std::chrono::steady_clock::now();
  const bool formed = testing::WaitFor(
      [&] {
        for (int k = 1; k <= kHosts; ++k) {
          if (!cluster.Formed(k, kHosts)) return false;
        }
        return true;
      },
      60s);
  ASSERT_TRUE(formed) << up.output << cluster.Logs();
  std::printf("netns cluster formed %.2f s after up\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  // One plan, the same from every host, over the hosts' subnet addresses.
  json first = cluster.Status(1);
  ASSERT_TRUE(first.is_object());
  for (int k = 2; k <= kHosts; ++k) {
    json s = cluster.Status(k);
    ASSERT_TRUE(s.is_object()) << "host " << k;
    EXPECT_EQ(s["plan"]["stages"], first["plan"]["stages"]) << "host " << k;
  }
  std::set<std::string> expected;
  for (int k = 1; k <= kHosts; ++k) expected.insert(HostAddress(k));
  for (int k = 1; k <= kHosts; ++k) {
    json s = cluster.Status(k);
    ASSERT_TRUE(s.is_object()) << "host " << k;
    std::set<std::string> seen;
    for (const json& node : s["nodes"]) {
      const std::string address = node["address"].get<std::string>();
      EXPECT_TRUE(absl::StartsWith(address, "10.99.0.")) << "host " << k << " sees " << address;
      seen.insert(address);
      if (node["self"].get<bool>()) {
        EXPECT_EQ(address, HostAddress(k));
      }
    }
    EXPECT_EQ(seen, expected) << "host " << k << ": " << s.dump();
  }
  std::set<std::string> staged;
  for (const json& stage : first["plan"]["stages"]) {
    staged.insert(stage["address"].get<std::string>());
  }
  EXPECT_EQ(staged, expected) << first.dump();

  // Greedy generation through every entry node matches llama.cpp.
  std::string prompt;
  const std::vector<int32_t> reference = ReferenceIds(&prompt);
  ASSERT_EQ(prompt, "Once upon a time");
  for (int k = 1; k <= kHosts; ++k) {
    testing::CommandResult r = RunCommand(
        absl::StrCat("ip netns exec ", HostNamespace(k), " ", ShellQuote(testing::RinglmPath()),
                     " generate --cluster ", HostAddress(k), " ", cluster.KeyArgs(), " --prompt ",
                     ShellQuote(prompt), " --temp 0 -n 64 --json"),
        false);
    EXPECT_EQ(r.exit_code, 0) << "via host " << k << ": " << r.output;
    json out = json::parse(r.output, nullptr, false);
    ASSERT_TRUE(out.is_object() && out.contains("ids")) << "via host " << k << ": " << r.output;
    EXPECT_EQ(out["ids"].get<std::vector<int32_t>>(), reference) << "via host " << k;
  }
}

TEST(NetnsClusterTest, ThreeHostsFormByBroadcastGenerateAndTearDownCleanly) {
  const std::string why = NamespacesUnavailable();
  if (!why.empty()) GTEST_SKIP() << "netns cluster test skipped: " << why;
  ASSERT_EQ(access(Script().c_str(), X_OK), 0) << Script() << " is missing or not executable";

  NetnsCluster cluster;
  ASSERT_FALSE(cluster.run_dir().empty());
  CheckCluster(cluster);

  testing::CommandResult down = cluster.Down();
  EXPECT_EQ(down.exit_code, 0) << down.output;
  // `down` is idempotent.
  testing::CommandResult again = cluster.Down();
  EXPECT_EQ(again.exit_code, 0) << again.output;

  EXPECT_TRUE(RinglmNamespaces().empty()) << RunCommand("ip netns list").output;
  testing::CommandResult routes = RunCommand("ip -4 route show", false);
  EXPECT_EQ(routes.output.find("10.99.0.0/24"), std::string::npos) << routes.output;
  testing::CommandResult links = RunCommand("ip -o link show", false);
  EXPECT_EQ(links.output.find("vbr"), std::string::npos) << links.output;
  const std::vector<std::string> left = ProcessesMentioning(cluster.run_dir());
  EXPECT_TRUE(left.empty()) << "processes left from the run:\n" << absl::StrJoin(left, "\n");
}

// Only host 1 has the model file: hosts 2 and 3 learn the model from it over
// the bridge, fetch their layers into their own state dirs, and the ring
// generates llama.cpp's tokens as before.
TEST(NetnsClusterTest, OnlyOneHostHasTheModelFileTheOthersFetchTheirLayers) {
  const std::string why = NamespacesUnavailable();
  if (!why.empty()) GTEST_SKIP() << "netns cluster test skipped: " << why;
  NetnsCluster cluster;
  CheckCluster(cluster, "--model-only-on 1");
  for (int k = 2; k <= kHosts; ++k) {
    const std::string log = cluster.Logs();
    const std::string state = absl::StrCat(cluster.run_dir(), "/h", k, "/state/models");
    EXPECT_EQ(access(state.c_str(), F_OK), 0) << "host " << k << " has no fetched copy\n" << log;
  }
  const std::string logs = cluster.Logs();
  EXPECT_NE(logs.find("model fetch: layers"), std::string::npos) << logs;
  EXPECT_EQ(access(absl::StrCat(cluster.run_dir(), "/h1/state/models").c_str(), F_OK), -1)
      << "host 1 has the file and must fetch nothing";
  EXPECT_EQ(cluster.Down().exit_code, 0);
}

// Host 3's link goes down mid-request: nothing it sends or is sent arrives,
// and no error comes back, as with a hang. The origin finds it by its health
// calls, the other two re-form, and the request completes with exactly the
// ids of an undisturbed run.
TEST(NetnsClusterTest, AHostCutOffMidRequestIsHandledLikeAHangAndTheRequestCompletes) {
  const std::string why = NamespacesUnavailable();
  if (!why.empty()) GTEST_SKIP() << "netns cluster test skipped: " << why;
  NetnsCluster cluster;
  testing::CommandResult up =
      cluster.Up(kHosts, "--daemon-args '--threads 1 --ctx-size 1024 --announce-interval-ms 500'");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (int k = 1; k <= kHosts; ++k) {
          if (!cluster.Formed(k, kHosts)) return false;
        }
        return true;
      },
      60s))
      << cluster.Logs();
  auto generate = [&] {
    testing::CommandResult r = RunCommand(
        absl::StrCat("ip netns exec ", HostNamespace(1), " ", ShellQuote(testing::RinglmPath()),
                     " generate --cluster ", HostAddress(1), " ", cluster.KeyArgs(),
                     " --prompt 'Once upon a time' --temp 0 -n 900 --ignore-eos --json"),
        false);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    json out = json::parse(r.output, nullptr, false);
    return out.is_object() && out.contains("ids") ? out["ids"].get<std::vector<int32_t>>()
                                                  : std::vector<int32_t>{};
  };
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> undisturbed = generate();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(undisturbed.size(), 900u) << cluster.Logs();
  std::printf("undisturbed: 900 tokens in %.2f s\n", seconds);

  // The cut comes a third of the way in.
  std::thread cut([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 3));
    RunCommand("ip -n ringlm-br link set vbr3 down");
  });
  const auto disturbed_start = std::chrono::steady_clock::now();
  const std::vector<int32_t> disturbed = generate();
  cut.join();
  std::printf(
      "cut off host 3 mid-request: 900 tokens in %.2f s\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - disturbed_start).count());
  EXPECT_EQ(disturbed, undisturbed) << cluster.Logs();
  const std::string logs = cluster.Logs();
  EXPECT_NE(logs.find("recovered 1 time"), std::string::npos) << logs;
  EXPECT_EQ(cluster.Down().exit_code, 0);
}

}  // namespace
}  // namespace ringlm
