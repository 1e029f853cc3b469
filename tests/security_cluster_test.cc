// The attacker's view of a real 3-node cluster with a cluster key
// (docs/security.md): outsiders without the key, with a wrong key, or with
// TLS but no certificate; forged and replayed announcements; and an insider
// (a member's own certificate) that breaks the rules of its role. Every
// attack must fail, and the cluster must go on answering correctly.
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/prometheus_text.h"
#include "cli/cluster_client.h"
#include "discovery/announcement.h"
#include "discovery/udp_socket.h"
#include "gtest/gtest.h"
#include "inference/generator.h"
#include "inference/model.h"
#include "nlohmann/json.hpp"
#include "security/cluster_key.h"
#include "security/crypto.h"
#include "tests/daemon_harness.h"
#include "tests/grpc_test_clients.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::LoopbackCluster;
using testing::Outsider;

constexpr char kPrompt[] = "Once upon a time";

constexpr uint32_t kContext = 8192;

std::vector<int32_t> LocalGreedy(int n, bool ignore_eos = false) {
  ModelOptions model_options;
  model_options.context_size = kContext;
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Load(testing::ModelPath("stories260K-f32.gguf"), model_options);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  LocalGenerator generator(**model, nullptr);
  GenerateOptions options;
  options.max_tokens = n;
  options.ignore_eos = ignore_eos;
  options.sampling.temperature = 0;
  auto ids = generator.Generate((*model)->tokenizer().Encode(kPrompt, true, false), options);
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

// Greedy ids through the cluster, entering at node `entry`, as a client.
std::vector<int32_t> ClusterGreedy(const LoopbackCluster& cluster, size_t entry, int n) {
  ClusterClient client(cluster.Address(entry), testing::ClientSecurityFor(cluster));
  v1::GenerateRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.set_prompt(kPrompt);
  request.mutable_limits()->set_max_tokens(n);
  std::vector<int32_t> ids;
  absl::Status s = client.Generate(request, 60s, [&](const v1::GenerateEvent& e) {
    if (e.has_token()) ids.push_back(e.token());
  });
  EXPECT_TRUE(s.ok()) << s;
  return ids;
}

grpc::StatusCode Code(const grpc::Status& s) { return s.error_code(); }

template <typename Call>
grpc::StatusCode Unary(Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  return Code(call(&ctx));
}

// Calls every method of the service once; method name -> status code.
std::map<std::string, grpc::StatusCode> CallEveryMethod(v1::RingNode::Stub& stub,
                                                        const std::string& bearer = "") {
  const uint32_t v = v1::PROTOCOL_VERSION_CURRENT;
  std::map<std::string, grpc::StatusCode> codes;
  codes["Health"] = Unary([&](grpc::ClientContext* c) {
    v1::HealthRequest r;
    r.set_protocol_version(v);
    v1::HealthReply out;
    return stub.Health(c, r, &out);
  });
  codes["Topology"] = Unary([&](grpc::ClientContext* c) {
    v1::TopologyRequest r;
    r.set_protocol_version(v);
    v1::TopologyReply out;
    return stub.Topology(c, r, &out);
  });
  codes["StageStep"] = Unary([&](grpc::ClientContext* c) {
    v1::StageStepRequest r;
    r.set_protocol_version(v);
    r.set_request_id("x");
    v1::StageStepReply out;
    return stub.StageStep(c, r, &out);
  });
  codes["DeliverToken"] = Unary([&](grpc::ClientContext* c) {
    v1::DeliverTokenRequest r;
    r.set_protocol_version(v);
    r.set_request_id("x#0");
    v1::DeliverTokenReply out;
    return stub.DeliverToken(c, r, &out);
  });
  codes["Cancel"] = Unary([&](grpc::ClientContext* c) {
    v1::CancelRequest r;
    r.set_protocol_version(v);
    r.set_request_id("x#0");
    v1::CancelReply out;
    return stub.Cancel(c, r, &out);
  });
  codes["CacheStats"] = Unary([&](grpc::ClientContext* c) {
    v1::CacheStatsRequest r;
    r.set_protocol_version(v);
    v1::CacheStatsReply out;
    return stub.CacheStats(c, r, &out);
  });
  codes["DropSession"] = Unary([&](grpc::ClientContext* c) {
    v1::DropSessionRequest r;
    r.set_protocol_version(v);
    r.set_all(true);
    v1::DropSessionReply out;
    return stub.DropSession(c, r, &out);
  });
  codes["AdoptPrefix"] = Unary([&](grpc::ClientContext* c) {
    v1::AdoptPrefixRequest r;
    r.set_protocol_version(v);
    r.set_session_id("s");
    r.add_lengths(1);
    r.add_digests(std::string(32, 'd'));
    v1::AdoptPrefixReply out;
    return stub.AdoptPrefix(c, r, &out);
  });
  codes["Generate"] = Unary([&](grpc::ClientContext* c) {
    if (!bearer.empty()) c->AddMetadata("authorization", "Bearer " + bearer);
    v1::GenerateRequest r;
    r.set_protocol_version(v);
    r.set_prompt(kPrompt);
    r.mutable_limits()->set_max_tokens(4);
    auto reader = stub.Generate(c, r);
    v1::GenerateEvent e;
    while (reader->Read(&e)) {
    }
    return reader->Finish();
  });
  return codes;
}

std::vector<PrometheusSample> Scrape(uint16_t port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return {};
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(res->body);
  return samples.ok() ? *samples : std::vector<PrometheusSample>{};
}

double Ignored(const LoopbackCluster& cluster, size_t i, const char* reason) {
  return FindSample(Scrape(cluster.metrics_port(i)), "ringlm_discovery_ignored",
                    {{"reason", reason}})
      .value_or(-1);
}

// Resident memory of a process, from /proc.
double RssMb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

std::vector<std::string> NodeIds(const json& status) {
  std::vector<std::string> ids;
  for (const json& n : status["nodes"]) ids.push_back(n["node_id"]);
  std::sort(ids.begin(), ids.end());
  return ids;
}

class SecurityClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoopbackCluster::Options options;
    options.extra_args = {"--ctx-size", std::to_string(kContext)};
    cluster_ = std::make_unique<LoopbackCluster>(options);
    ASSERT_TRUE(testing::WaitFor([&] { return cluster_->AllFormed(); }, 30s)) << cluster_->Logs();
    status_ = cluster_->Status(0);
    for (size_t i = 0; i < cluster_->size(); ++i) ids_.push_back(testing::NodeIdOf(*cluster_, i));
  }

  // The process index that runs plan stage `s`.
  size_t ProcessOfStage(int s) {
    const std::string id = status_["plan"]["stages"][s]["node_id"];
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (ids_[i] == id) return i;
    }
    ADD_FAILURE() << "no process runs stage " << s;
    return 0;
  }

  void ExpectClusterUnchanged() {
    for (size_t i = 0; i < cluster_->size(); ++i) {
      EXPECT_TRUE(cluster_->node(i).Running()) << "node " << i;
      json s = cluster_->Status(i);
      ASSERT_TRUE(s.is_object()) << cluster_->Logs();
      EXPECT_EQ(NodeIds(s), NodeIds(status_)) << "node " << i;
      EXPECT_EQ(s["plan"]["stages"], status_["plan"]["stages"]) << "node " << i;
    }
    EXPECT_EQ(ClusterGreedy(*cluster_, 1, 32), LocalGreedy(32));
  }

  std::unique_ptr<LoopbackCluster> cluster_;
  json status_;
  std::vector<std::string> ids_;
};

TEST_F(SecurityClusterTest, OutsidersGetNoAnswerFromAnyMethod) {
  EXPECT_EQ(status_["security"], "mutual-tls");
  for (size_t i = 0; i < cluster_->size(); ++i) {
    for (Outsider kind : {Outsider::kPlaintext, Outsider::kNoCertificate, Outsider::kWrongKey}) {
      auto stub = testing::OutsiderStub(*cluster_, kind, cluster_->Address(i));
      // Without a certificate the TLS handshake completes and every handler
      // refuses; plaintext and a foreign CA never get through the handshake.
      const grpc::StatusCode expected = kind == Outsider::kNoCertificate
                                            ? grpc::StatusCode::UNAUTHENTICATED
                                            : grpc::StatusCode::UNAVAILABLE;
      for (const auto& [method, code] : CallEveryMethod(*stub)) {
        EXPECT_EQ(code, expected) << method << " on node " << i << ", outsider "
                                  << static_cast<int>(kind);
      }
    }
  }
  ExpectClusterUnchanged();
}

TEST_F(SecurityClusterTest, ForgedAndReplayedAnnouncementsNeverEnterThePeerTable) {
  // Capture a real announcement off the shared discovery port.
  absl::StatusOr<UdpSocket> listener = UdpSocket::BindAny(cluster_->discovery_port());
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::string captured;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        char buf[2048];
        absl::StatusOr<std::optional<UdpSocket::Received>> r = listener->Receive(buf, sizeof buf);
        if (r.ok() && r->has_value() && (*r)->size <= sizeof buf) captured.assign(buf, (*r)->size);
        return !captured.empty();
      },
      10s));
  absl::StatusOr<UdpSocket> sender = UdpSocket::Unbound();
  ASSERT_TRUE(sender.ok());
  auto broadcast = [&](const std::string& datagram) {
    EXPECT_TRUE(sender->SendTo(datagram, "127.255.255.255", cluster_->discovery_port()).ok());
  };
  const double bad_mac_before = Ignored(*cluster_, 0, "bad_mac");

  // 1. A stranger with another key claims 1 TB of memory, and node 1's id
  //    at another address.
  absl::StatusOr<ClusterKey> other_key = ClusterKey::Generate();
  ASSERT_TRUE(other_key.ok());
  Announcement forged;
  forged.node_id = "rogue-1tb";
  forged.instance_id = 42;
  forged.grpc_port = 1;
  forged.model_fingerprint = status_["model"]["fingerprint"];
  forged.caps.total_memory_bytes = forged.caps.usable_memory_bytes = uint64_t{1} << 40;
  forged.caps.threads = 64;
  forged.spki_fingerprint = RandomBytes(32);
  forged.grpc_host = "127.0.0.9";
  for (int i = 0; i < 20; ++i) {
    forged.timestamp_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
    broadcast(EncodeAnnouncement(forged, other_key->AnnounceMacKey()));
    Announcement takeover = forged;
    takeover.node_id = ids_[1];
    broadcast(EncodeAnnouncement(takeover, other_key->AnnounceMacKey()));
  }
  // 2. The captured datagram, replayed as it is.
  for (int i = 0; i < 20; ++i) broadcast(captured);
  // 3. An insider (it holds the key) announces node 1's live id with
  //    another certificate key: the id stays with its first holder.
  absl::StatusOr<ClusterKey> key = ClusterKey::LoadFile(cluster_->key_file());
  ASSERT_TRUE(key.ok());
  Announcement insider = forged;
  insider.node_id = ids_[1];
  insider.grpc_host = "127.0.0.1";
  for (int i = 0; i < 5; ++i) {
    insider.timestamp_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
    broadcast(EncodeAnnouncement(insider, key->AnnounceMacKey()));
  }

  std::this_thread::sleep_for(3s);  // several announcement and health rounds
  EXPECT_GE(Ignored(*cluster_, 0, "bad_mac") - bad_mac_before, 40);
  EXPECT_GE(Ignored(*cluster_, 0, "replayed") + Ignored(*cluster_, 0, "reordered"), 20);
  EXPECT_GE(Ignored(*cluster_, 0, "id_conflict"), 5);
  for (size_t i = 0; i < cluster_->size(); ++i) {
    json s = cluster_->Status(i);
    for (const json& n : s["nodes"]) {
      EXPECT_NE(n["node_id"], "rogue-1tb");
      EXPECT_EQ(n["address"].get<std::string>().rfind("127.0.0.1:", 0), 0u) << n;
    }
  }
  ExpectClusterUnchanged();
}

TEST_F(SecurityClusterTest, AnInsiderCannotActOutsideItsRole) {
  constexpr int kLong = 2000;
  // A long request (several seconds) entering at stage 0's node, whose
  // middle stage is the insider: it sees the request's id in its steps.
  const size_t origin = ProcessOfStage(0), insider = ProcessOfStage(1), last = ProcessOfStage(2);
  const std::string origin_id = ids_[origin], last_id = ids_[last];
  std::atomic<bool> done{false};
  std::string request_id;
  absl::Mutex mu;
  std::vector<int32_t> ids;
  absl::Status result;
  std::jthread generation([&] {
    ClusterClient client(cluster_->Address(origin), testing::ClientSecurityFor(*cluster_));
    v1::GenerateRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    request.set_prompt(kPrompt);
    request.mutable_limits()->set_max_tokens(kLong);
    request.mutable_limits()->set_ignore_eos(true);
    result = client.Generate(request, 120s, [&](const v1::GenerateEvent& e) {
      absl::MutexLock lock(&mu);
      if (!e.request_id().empty()) request_id = e.request_id();
      if (e.has_token()) ids.push_back(e.token());
    });
    done = true;
  });
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        absl::MutexLock lock(&mu);
        return (!request_id.empty() && !ids.empty()) || done;
      },
      20s));
  ASSERT_FALSE(done.load()) << result;
  const std::string stage_id = absl::StrCat(request_id, "#0");
  auto as_insider = [&](size_t target) {
    return testing::MemberStub(*cluster_, insider, cluster_->Address(target));
  };
  // A token for the request, as the last stage would deliver it.
  auto deliver = [&](v1::RingNode::Stub& stub) {
    return Unary([&](grpc::ClientContext* c) {
      v1::DeliverTokenRequest d;
      d.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
      d.set_request_id(stage_id);
      d.set_token(13);
      d.set_index(1);
      v1::DeliverTokenReply out;
      return stub.DeliverToken(c, d, &out);
    });
  };
  // It delivers a token to the origin for a request it does not sample.
  EXPECT_EQ(deliver(*as_insider(origin)), grpc::StatusCode::PERMISSION_DENIED);
  // It cancels, at the last stage, a request it did not start.
  EXPECT_EQ(Unary([&](grpc::ClientContext* c) {
              v1::CancelRequest r;
              r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
              r.set_request_id(stage_id);
              v1::CancelReply out;
              return as_insider(last)->Cancel(c, r, &out);
            }),
            grpc::StatusCode::PERMISSION_DENIED);
  // It sends stage 0 a step that names the last stage as its origin: it is
  // neither stage 0's previous stage nor that origin.
  EXPECT_EQ(Unary([&](grpc::ClientContext* c) {
              v1::StageStepRequest r;
              r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
              r.set_request_id("forged-1");
              r.set_session_id("forged-1");
              r.set_origin(last_id);
              v1::Plan* plan = r.mutable_plan();
              plan->set_model_fingerprint(status_["model"]["fingerprint"]);
              plan->set_n_layers(status_["model"]["n_layers"]);
              for (const json& st : status_["plan"]["stages"]) {
                v1::PlanStage* s = plan->add_stages();
                s->set_node_id(st["node_id"]);
                s->set_first_layer(st["first_layer"]);
                s->set_last_layer(st["last_layer"]);
              }
              r.add_tokens(1);
              v1::StageStepReply out;
              return as_insider(origin)->StageStep(c, r, &out);
            }),
            grpc::StatusCode::PERMISSION_DENIED);
  // A certificate made from the key under the last stage's id, but with a
  // key of its own, cannot pass for that stage.
  absl::StatusOr<ClusterKey> key = ClusterKey::LoadFile(cluster_->key_file());
  ASSERT_TRUE(key.ok());
  absl::StatusOr<TlsIdentity> impostor =
      MakeNodeIdentity(*key, testing::MakeTempDir("impostor"), last_id);
  ASSERT_TRUE(impostor.ok());
  grpc::ChannelArguments args;
  AddChannelArgs(&args);
  auto impostor_stub = v1::RingNode::NewStub(
      grpc::CreateCustomChannel(cluster_->Address(origin), ChannelCredentials(*impostor), args));
  EXPECT_EQ(deliver(*impostor_stub), grpc::StatusCode::PERMISSION_DENIED);

  // The request finishes undisturbed, with the tokens of a solo run.
  ASSERT_TRUE(testing::WaitFor([&] { return done.load(); }, 120s));
  generation.join();
  EXPECT_TRUE(result.ok()) << result << cluster_->Logs();
  std::vector<int32_t> expected = LocalGreedy(kLong, /*ignore_eos=*/true);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ids, expected);
}

TEST_F(SecurityClusterTest, AHiddenStateFloodIsRefusedWithoutGrowingMemory) {
  const size_t target = ProcessOfStage(1), insider = ProcessOfStage(0);
  const double before = RssMb(cluster_->node(target).pid());
  auto stub = testing::MemberStub(*cluster_, insider, cluster_->Address(target));
  v1::StageStepRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  r.set_request_id("flood");
  r.set_session_id("flood");
  r.set_origin(ids_[insider]);
  r.set_stage_index(1);
  r.add_tokens(1);
  r.mutable_hidden()->set_dtype(v1::DTYPE_F32);
  r.mutable_hidden()->add_shape(1);
  r.mutable_hidden()->add_shape(64);
  r.mutable_hidden()->set_data(std::string(16 << 20, '\x7f'));
  for (int i = 0; i < 24; ++i) {
    grpc::StatusCode code = Unary([&](grpc::ClientContext* c) {
      v1::StageStepReply out;
      return stub->StageStep(c, r, &out);
    });
    EXPECT_EQ(code, grpc::StatusCode::RESOURCE_EXHAUSTED) << "step " << i;
  }
  const double after = RssMb(cluster_->node(target).pid());
  std::printf("RSS of the flooded node: %.1f MB before, %.1f MB after 24 x 16 MiB steps\n", before,
              after);
  EXPECT_LT(after - before, 50.0);
  ExpectClusterUnchanged();
}

TEST(SecurityTest, ADaemonWithoutAKeyRefusesToStart) {
  testing::CommandResult r = testing::RunCommand(
      absl::StrCat(testing::RinglmdPath(), " --model ",
                   testing::ShellQuote(testing::ModelPath("stories260K-f32.gguf")),
                   " --grpc-host 127.0.0.1 --grpc-port 0 --loopback-only --state-dir ",
                   testing::MakeTempDir("nokey"), " --discovery-port ", testing::FreeUdpPort()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--cluster-key"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--insecure"), std::string::npos) << r.output;
}

// /v1/topology of the head's API, as JSON.
json ApiTopology(uint16_t port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/v1/topology");
  return res && res->status == 200 ? json::parse(res->body, nullptr, false) : json();
}

TEST(SecurityTest, AnInsecureClusterSaysSoAndWarns) {
  LoopbackCluster::Options options;
  options.secure = false;
  options.api = true;
  options.memory_mb = {4000, 2000};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  EXPECT_EQ(cluster.Status(0)["security"], "insecure");
  EXPECT_EQ(ApiTopology(cluster.api_port())["security"], "insecure");
  EXPECT_NE(cluster.node(0).Log().find("INSECURE"), std::string::npos);
  testing::CommandResult r = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " status --insecure --node ", cluster.Address(0)));
  EXPECT_NE(r.output.find("INSECURE"), std::string::npos) << r.output;
}

TEST(SecurityTest, TheApiKeyAdmitsAGenerateCallerWithoutACertificate) {
  LoopbackCluster::Options options;
  options.memory_mb = {4000, 2000};
  options.head_extra_args = {"--api-key", "sesame"};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  auto stub = testing::OutsiderStub(cluster, Outsider::kNoCertificate, cluster.Address(0));
  std::map<std::string, grpc::StatusCode> with_key = CallEveryMethod(*stub, "sesame");
  EXPECT_EQ(with_key["Generate"], grpc::StatusCode::OK);
  EXPECT_EQ(with_key["Topology"], grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallEveryMethod(*stub, "wrong")["Generate"], grpc::StatusCode::UNAUTHENTICATED);
}

int HealthCode(uint16_t port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/health");
  return res ? res->status : -1;
}

TEST(HealthTest, HealthSays503WhileAMemberOfThePlanIsNotAnswering) {
  LoopbackCluster::Options options;
  options.api = true;
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  ASSERT_TRUE(testing::WaitFor([&] { return HealthCode(cluster.api_port()) == 200; }, 10s));
  EXPECT_EQ(ApiTopology(cluster.api_port())["security"], "mutual-tls");
  // A stage that hangs (SIGSTOP) fails its health calls: the head says so.
  cluster.node(2).Signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  const bool unhealthy =
      testing::WaitFor([&] { return HealthCode(cluster.api_port()) == 503; }, 15s);
  std::printf("/health turned 503 %.2f s after the stage stopped\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count());
  cluster.node(2).Signal(SIGCONT);
  EXPECT_TRUE(unhealthy) << cluster.Logs();
  // Back, it proves itself again and the cluster serves with all three.
  EXPECT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  EXPECT_TRUE(testing::WaitFor([&] { return HealthCode(cluster.api_port()) == 200; }, 10s));
}

}  // namespace
}  // namespace ringlm
