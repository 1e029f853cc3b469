// A packet capture of node-to-node traffic holds no prompt text: tcpdump on
// loopback records every gRPC port of a 3-node cluster while a client
// generates from a prompt with a marker in it. With a cluster key the marker
// is nowhere in the capture; on an --insecure cluster it is (so the test can
// fail). Needs root and tcpdump (deploy/install-deps.sh --test-tools); skips
// otherwise.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cluster_client.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/grpc_test_clients.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using testing::LoopbackCluster;

constexpr char kMarker[] = "Quixotic zebras juggle marmalade";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Captures the cluster's gRPC traffic during one generation; returns the
// capture file's bytes.
std::string CaptureGeneration(bool secure) {
  LoopbackCluster::Options options;
  options.secure = secure;
  LoopbackCluster cluster(options);
  EXPECT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  std::vector<std::string> ports;
  for (size_t i = 0; i < cluster.size(); ++i) {
    const std::string a = cluster.Address(i);
    ports.push_back("tcp port " + a.substr(a.rfind(':') + 1));
  }
  const std::string pcap = cluster.dir() + "/capture.pcap";
  auto tcpdump = testing::ChildProcess::Start(
      // --immediate-mode: packets reach the file as they come, not in
      // blocks that an early SIGINT would leave unread.
      {"/usr/bin/tcpdump", "-i", "lo", "--immediate-mode", "-U", "-n", "-s", "0", "-w", pcap,
       absl::StrJoin(ports, " or ")},
      cluster.dir() + "/tcpdump.log");
  EXPECT_TRUE(tcpdump.ok());
  if (!tcpdump.ok()) return "";
  EXPECT_TRUE(testing::WaitFor(
      [&] { return (*tcpdump)->Log().find("listening on") != std::string::npos; }, 10s))
      << (*tcpdump)->Log();

  ClusterClient client(cluster.Address(1), testing::ClientSecurityFor(cluster));
  v1::GenerateRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.set_prompt(kMarker);
  request.mutable_limits()->set_max_tokens(16);
  int tokens = 0;
  absl::Status s = client.Generate(request, 60s, [&](const v1::GenerateEvent& e) {
    if (e.has_token()) ++tokens;
  });
  EXPECT_TRUE(s.ok()) << s << cluster.Logs();
  EXPECT_EQ(tokens, 16);
  // The last packets (the end of the stream) are in the file within moments.
  const size_t before = ReadAll(pcap).size();
  testing::WaitFor([&] { return ReadAll(pcap).size() > before; }, 1s);
  (*tcpdump)->Signal(SIGINT);
  EXPECT_TRUE((*tcpdump)->Wait(10s));
  const std::string bytes = ReadAll(pcap);
  std::printf("%s cluster: captured %zu bytes of gRPC traffic\n", secure ? "secure" : "insecure",
              bytes.size());
  EXPECT_GT(bytes.size(), 1000u) << (*tcpdump)->Log();
  return bytes;
}

std::string CannotCapture() {
  if (geteuid() != 0) return "needs root to capture on loopback";
  if (access("/usr/bin/tcpdump", X_OK) != 0) return "tcpdump is not installed";
  return "";
}

TEST(CaptureTest, NodeToNodeTrafficCarriesNoPromptText) {
  if (const std::string why = CannotCapture(); !why.empty()) GTEST_SKIP() << why;
  const std::string secure = CaptureGeneration(true);
  EXPECT_EQ(secure.find(kMarker), std::string::npos) << "prompt text in a TLS capture";
  // The same capture of an insecure cluster does show it: the check works.
  const std::string insecure = CaptureGeneration(false);
  EXPECT_NE(insecure.find(kMarker), std::string::npos);
}

}  // namespace
}  // namespace ringlm
