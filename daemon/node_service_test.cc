// The RingNode service over real small parts (a one-node ring on the bundled
// model: stage runtime, origin registry and the local transport between
// them, a model share, a peer table, a metrics registry) and fake hooks for
// the node's live state, served on loopback in plaintext and over mutual
// TLS. Checks who may call what, that a starting node answers UNAVAILABLE,
// the Generate call slots, and that Health and Topology report the parts.
#include "daemon/node_service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/testing/temp_dir.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/rpc/transport.h"
#include "discovery/announcement.h"
#include "gtest/gtest.h"
#include "proto/ringlm.grpc.pb.h"
#include "security/cluster_key.h"
#include "security/grpc_test_environment.h"
#include "security/tls_credentials.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kVersion = v1::PROTOCOL_VERSION_CURRENT;
constexpr uint16_t kPort = 4242;
constexpr uint64_t kInstance = 77;

// How a test client reaches the service.
struct Credentials {
  std::shared_ptr<grpc::ChannelCredentials> channel;
  std::string claimed_node;  // insecure: the kClaimedNodeMetadata claim; empty = none
  std::string bearer;        // "authorization: Bearer ..." when not empty
};

class NodeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Model>> m =
        Model::Load(std::string(RINGLM_SHARED_DIR) + "/models/stories260K-f32.gguf", {});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = *std::move(m);
    transport_ = std::make_unique<MemberTransport>(
        "self", nullptr, [](const std::string&) { return std::optional<std::string>(); });
    stage_ = std::make_unique<StageRuntime>(
        *model_, &pool_, transport_.get(), "self",
        [this](const std::string& id) { return IsMember(id); }, StageOptions{});
    ASSERT_TRUE(stage_->SetRange(LayerRange{0, model_->config().n_layer}).ok());
    OriginClusterHooks hooks;
    hooks.health = [](const v1::PlanStage&) { return absl::OkStatus(); };
    hooks.on_unreachable = [](const std::string&) {};
    hooks.await_plan = [](const std::vector<std::string>&, std::chrono::steady_clock::time_point) {
      return absl::StatusOr<v1::Plan>(absl::UnavailableError("no other plan in this test"));
    };
    hooks.serving_plan = [this]() -> absl::StatusOr<v1::Plan> { return Plan(); };
    origin_ = std::make_unique<OriginRegistry>(
        OriginOptions{}, transport_.get(), "self",
        OriginModel{.n_embd = model_->config().n_embd,
                    .context_size = model_->context_size(),
                    .n_vocab = static_cast<uint32_t>(model_->tokenizer().n_vocab())},
        std::move(hooks));
    transport_->Attach(stage_.get(), origin_.get());
    absl::StatusOr<std::unique_ptr<ModelShare>> share =
        ModelShare::ForFile(model_->path(), model_->file(), model_->fingerprint(),
                            testing::MakeTempDir("node_service_test"));
    ASSERT_TRUE(share.ok()) << share.status();
    share_ = *std::move(share);
    ASSERT_TRUE(registry_.AddCounter("ringlm_test_marker", "Shows the registry is rendered.").ok());
    // Two peers, one verified: Topology lists that one only.
    for (const char* id : {"peer-verified", "peer-unverified"}) {
      Announcement a;
      a.node_id = id;
      a.instance_id = 1;
      a.grpc_port = 5000;
      a.model_fingerprint = model_->fingerprint();
      ASSERT_TRUE(peers_.Observe(a, "10.0.0.2", std::chrono::steady_clock::now()).ok());
    }
    ASSERT_TRUE(peers_.MarkVerified("peer-verified", "", "10.0.0.2:5000"));
    auto snapshot = std::make_shared<ClusterSnapshot>();
    snapshot->epoch = 3;
    snapshot->partition.stages = {
        Stage{"self", "10.0.0.1:4242", 0, static_cast<uint32_t>(model_->config().n_layer)}};
    snapshot->plan = Plan();
    snapshot->partition.idle_node_ids = {"idle-node"};
    snapshot_ = snapshot;
  }

  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + 5s);
      server_->Wait();
    }
    origin_->Stop();
    stage_->Stop();
  }

  // The service over the parts, served on 127.0.0.1 at a free port; with
  // `identity`, over mutual TLS as a node with a cluster key.
  void StartServer(std::optional<TlsIdentity> identity = std::nullopt, int slots = 8,
                   std::string api_key = "") {
    slots_ = std::make_unique<CallSlots>(slots);
    NodeServiceParts p;
    p.node_id = "self";
    p.instance_id = kInstance;
    p.capabilities.usable_memory_bytes = 123 << 20;
    p.secure = identity.has_value();
    p.security_mode = p.secure ? "mutual-tls" : "insecure";
    p.cluster_id = p.secure ? "cluster-label" : "";
    p.api_key = std::move(api_key);
    p.model = model_.get();
    p.stage = stage_.get();
    p.origin = origin_.get();
    p.share = share_.get();
    p.peers = &peers_;
    p.metrics = &registry_;
    p.generate_slots = slots_.get();
    p.ready = [this] { return ready_.load(); };
    p.state = [this] { return state_.load(); };
    p.grpc_port = [] { return kPort; };
    p.address = [] { return std::string("10.0.0.1:4242"); };
    p.api_address = [this] {
      absl::MutexLock lock(&mu_);
      return api_address_;
    };
    p.is_pinned_member = [this](const std::string& id, const std::string& spki) {
      absl::MutexLock lock(&mu_);
      pinned_asked_.emplace_back(id, spki);
      return pinned_.count(id) > 0;
    };
    p.is_member = [this](const std::string& id) {
      EXPECT_TRUE(ready_) << "the cluster was consulted before the node was ready";
      return IsMember(id);
    };
    p.cluster = [this] {
      EXPECT_TRUE(ready_) << "the cluster was consulted before the node was ready";
      return snapshot_;
    };
    p.applied_partition = [this] {
      EXPECT_TRUE(ready_) << "the cluster was consulted before the node was ready";
      return std::string("partition-key");
    };
    service_ = MakeNodeService(std::move(p));
    grpc::ServerBuilder builder;
    builder.AddListeningPort(
        "127.0.0.1:0", identity ? ServerCredentials(*identity) : grpc::InsecureServerCredentials(),
        &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }

  bool IsMember(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return members_.count(id) > 0;
  }

  // The one-stage plan of this ring: every layer on "self".
  v1::Plan Plan() const {
    v1::Plan plan;
    plan.set_epoch(3);
    plan.set_model_fingerprint(model_->fingerprint());
    plan.set_n_layers(model_->config().n_layer);
    v1::PlanStage* s = plan.add_stages();
    s->set_node_id("self");
    s->set_first_layer(0);
    s->set_last_layer(model_->config().n_layer);
    return plan;
  }

  // A prompt step of the plan, started by `origin`.
  v1::StageStepRequest Step(const std::string& origin, const std::string& request_id) const {
    v1::StageStepRequest r;
    r.set_protocol_version(kVersion);
    r.set_request_id(request_id);
    r.set_session_id("s-" + request_id);
    r.set_origin(origin);
    *r.mutable_plan() = Plan();
    for (int32_t t : {1, 403, 407, 261}) r.add_tokens(t);
    r.mutable_limits()->set_max_tokens(2);
    r.set_sample(true);
    return r;
  }

  Credentials Insecure(std::string claimed_node = "") const {
    return {grpc::InsecureChannelCredentials(), std::move(claimed_node), ""};
  }

  std::unique_ptr<v1::RingNode::Stub> Stub(const Credentials& c) const {
    grpc::ChannelArguments args;
    AddChannelArgs(&args);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::RingNode::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_), c.channel, args));
  }

  static void Prepare(grpc::ClientContext* ctx, const Credentials& c) {
    ctx->set_deadline(std::chrono::system_clock::now() + 20s);
    if (!c.claimed_node.empty()) ctx->AddMetadata(kClaimedNodeMetadata, c.claimed_node);
    if (!c.bearer.empty()) ctx->AddMetadata("authorization", "Bearer " + c.bearer);
  }

  grpc::Status Health(const Credentials& c, v1::HealthReply* reply,
                      uint32_t version = kVersion) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::HealthRequest request;
    request.set_protocol_version(version);
    return Stub(c)->Health(&ctx, request, reply);
  }

  grpc::Status Topology(const Credentials& c, v1::TopologyReply* reply) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::TopologyRequest request;
    request.set_protocol_version(kVersion);
    return Stub(c)->Topology(&ctx, request, reply);
  }

  grpc::Status CacheStats(const Credentials& c, v1::CacheStatsReply* reply) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::CacheStatsRequest request;
    request.set_protocol_version(kVersion);
    return Stub(c)->CacheStats(&ctx, request, reply);
  }

  grpc::Status StageStep(const Credentials& c, const v1::StageStepRequest& request) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::StageStepReply reply;
    return Stub(c)->StageStep(&ctx, request, &reply);
  }

  grpc::Status DeliverToken(const Credentials& c, const std::string& request_id,
                            v1::DeliverTokenReply* reply) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::DeliverTokenRequest request;
    request.set_protocol_version(kVersion);
    request.set_request_id(request_id);
    request.set_token(5);
    return Stub(c)->DeliverToken(&ctx, request, reply);
  }

  grpc::Status Cancel(const Credentials& c, const std::string& request_id) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::CancelRequest request;
    request.set_protocol_version(kVersion);
    request.set_request_id(request_id);
    v1::CancelReply reply;
    return Stub(c)->Cancel(&ctx, request, &reply);
  }

  grpc::Status DropSession(const Credentials& c, const std::string& session_id,
                           v1::DropSessionReply* reply) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::DropSessionRequest request;
    request.set_protocol_version(kVersion);
    request.set_session_id(session_id);
    return Stub(c)->DropSession(&ctx, request, reply);
  }

  grpc::Status GetModel(const Credentials& c, const std::string& fingerprint) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::GetModelRequest request;
    request.set_protocol_version(kVersion);
    request.set_model_fingerprint(fingerprint);
    v1::GetModelReply reply;
    return Stub(c)->GetModel(&ctx, request, &reply);
  }

  // One Generate call to its end: its events, and its status.
  grpc::Status Generate(const Credentials& c, std::vector<v1::GenerateEvent>* events,
                        int32_t max_tokens = 4) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, c);
    v1::GenerateRequest request;
    request.set_protocol_version(kVersion);
    request.set_prompt("Once upon a time");
    request.mutable_limits()->set_max_tokens(max_tokens);
    request.mutable_limits()->set_ignore_eos(true);
    request.mutable_sampling()->set_temperature(0);
    std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader =
        Stub(c)->Generate(&ctx, request);
    v1::GenerateEvent event;
    while (reader->Read(&event)) events->push_back(event);
    return reader->Finish();
  }

  // Waits until every Generate slot is given back (a call's OnDone may run
  // just after its client saw the status).
  bool SlotsFree() const {
    for (int i = 0; i < 500 && slots_->in_use() != 0; ++i) std::this_thread::sleep_for(10ms);
    return slots_->in_use() == 0;
  }

  std::unique_ptr<Model> model_;
  ThreadPool pool_{1};
  std::unique_ptr<MemberTransport> transport_;
  std::unique_ptr<StageRuntime> stage_;
  std::unique_ptr<OriginRegistry> origin_;
  std::unique_ptr<ModelShare> share_;
  PeerTable peers_;
  MetricsRegistry registry_;
  std::shared_ptr<const ClusterSnapshot> snapshot_;
  std::atomic<bool> ready_{false};
  std::atomic<v1::NodeState> state_{v1::NODE_STATE_STARTING};
  mutable absl::Mutex mu_;
  std::set<std::string> members_ ABSL_GUARDED_BY(mu_) = {"self", "peer"};
  std::set<std::string> pinned_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> pinned_asked_ ABSL_GUARDED_BY(mu_);
  std::string api_address_ ABSL_GUARDED_BY(mu_);  // empty: not a head
  std::unique_ptr<CallSlots> slots_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(NodeServiceTest, HealthReportsTheNodeAndItsStateFromTheHooks) {
  StartServer();
  v1::HealthReply reply;
  grpc::Status s = Health(Insecure(), &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.node_id(), "self");
  EXPECT_EQ(reply.state(), v1::NODE_STATE_STARTING);
  EXPECT_EQ(reply.grpc_port(), kPort);
  EXPECT_EQ(reply.instance_id(), kInstance);
  EXPECT_EQ(reply.security(), "insecure");
  EXPECT_EQ(reply.model_fingerprint(), model_->fingerprint());
  EXPECT_EQ(reply.capabilities().usable_memory_bytes(), uint64_t{123} << 20);
  EXPECT_EQ(reply.partition(), "");  // starting: no cluster view to ask

  ready_ = true;
  state_ = v1::NODE_STATE_FETCHING;
  reply.Clear();
  s = Health(Insecure(), &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.state(), v1::NODE_STATE_FETCHING);
  EXPECT_EQ(reply.partition(), "partition-key");

  EXPECT_EQ(Health(Insecure(), &reply, kVersion + 1).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(NodeServiceTest, AStartingNodeAnswersUnavailableWithoutTouchingItsParts) {
  StartServer();
  const Credentials member = Insecure("peer");
  v1::TopologyReply topology;
  EXPECT_EQ(Topology(Insecure(), &topology).error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::CacheStatsReply stats;
  EXPECT_EQ(CacheStats(Insecure(), &stats).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(StageStep(member, Step("peer", "r1")).error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::DeliverTokenReply deliver;
  EXPECT_EQ(DeliverToken(member, "r1#0", &deliver).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Cancel(member, "r1").error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::DropSessionReply drop;
  EXPECT_EQ(DropSession(member, "s1", &drop).error_code(), grpc::StatusCode::UNAVAILABLE);
  std::vector<v1::GenerateEvent> events;
  EXPECT_EQ(Generate(Insecure(), &events).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(SlotsFree());
  EXPECT_EQ(stage_->queued(), 0u);
  // Model distribution needs no cluster view: the share answers (here: it
  // serves another model than the one asked for).
  EXPECT_EQ(GetModel(member, "another-model").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(NodeServiceTest, TopologyReportsTheNodeItsVerifiedPeersThePlanAndTheMetrics) {
  StartServer();
  ready_ = true;
  state_ = v1::NODE_STATE_READY;
  v1::TopologyReply reply;
  grpc::Status s = Topology(Insecure(), &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.node_id(), "self");
  EXPECT_EQ(reply.state(), v1::NODE_STATE_READY);
  EXPECT_EQ(reply.security(), "insecure");
  ASSERT_EQ(reply.peers_size(), 2);
  EXPECT_TRUE(reply.peers(0).is_self());
  EXPECT_EQ(reply.peers(0).node_id(), "self");
  EXPECT_EQ(reply.peers(0).address(), "10.0.0.1:4242");
  EXPECT_EQ(reply.peers(0).state(), v1::NODE_STATE_READY);
  EXPECT_EQ(reply.peers(1).node_id(), "peer-verified");
  EXPECT_EQ(reply.peers(1).address(), "10.0.0.2:5000");
  EXPECT_FALSE(reply.peers(1).is_self());
  EXPECT_EQ(reply.plan().epoch(), 3u);
  ASSERT_EQ(reply.plan().stages_size(), 1);
  EXPECT_EQ(reply.plan().stages(0).node_id(), "self");
  ASSERT_EQ(reply.idle_node_ids_size(), 1);
  EXPECT_EQ(reply.idle_node_ids(0), "idle-node");
  EXPECT_EQ(reply.model().fingerprint(), model_->fingerprint());
  EXPECT_EQ(reply.model().n_layers(), model_->config().n_layer);
  EXPECT_EQ(reply.model().file_name(), "stories260K-f32.gguf");
  EXPECT_EQ(reply.cache().bytes_per_token(),
            uint64_t{model_->config().n_layer} * model_->config().n_embd_kv() * 4);
  EXPECT_NE(reply.metrics().find("ringlm_test_marker"), std::string::npos);
}

TEST_F(NodeServiceTest, HealthAndTopologyReportTheApiAddressOfAHead) {
  StartServer();
  ready_ = true;
  v1::HealthReply health;
  ASSERT_TRUE(Health(Insecure(), &health).ok());
  EXPECT_EQ(health.api_address(), "");  // no API (yet): not a head
  v1::TopologyReply topology;
  ASSERT_TRUE(Topology(Insecure(), &topology).ok());
  ASSERT_GE(topology.peers_size(), 1);
  EXPECT_EQ(topology.peers(0).api_address(), "");

  {
    absl::MutexLock lock(&mu_);
    api_address_ = "10.0.0.1:8080";  // the API started after the service
  }
  health.Clear();
  ASSERT_TRUE(Health(Insecure(), &health).ok());
  EXPECT_EQ(health.api_address(), "10.0.0.1:8080");
  topology.Clear();
  ASSERT_TRUE(Topology(Insecure(), &topology).ok());
  ASSERT_EQ(topology.peers_size(), 2);
  EXPECT_TRUE(topology.peers(0).is_self());
  EXPECT_EQ(topology.peers(0).api_address(), "10.0.0.1:8080");
  // A peer's API is its own to report (`ringlm status` asks each node).
  EXPECT_EQ(topology.peers(1).api_address(), "");
}

TEST_F(NodeServiceTest, InsecureRingMethodsAdmitMembersOnly) {
  StartServer();
  ready_ = true;
  // A caller that claims no node is a client.
  grpc::Status s = StageStep(Insecure(), Step("peer", "r1"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  s = StageStep(Insecure("stranger"), Step("stranger", "r1"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("stranger is unknown"), std::string::npos);
  v1::DeliverTokenReply deliver;
  EXPECT_EQ(DeliverToken(Insecure("stranger"), "r1#0", &deliver).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Cancel(Insecure(), "r1").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::DropSessionReply drop;
  EXPECT_EQ(DropSession(Insecure("stranger"), "s1", &drop).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(stage_->queued(), 0u);

  // A member's calls reach the stage and the origin, whose rules then apply.
  const Credentials member = Insecure("peer");
  s = StageStep(member, Step("peer", "r2"));
  EXPECT_TRUE(s.ok()) << s.error_message();
  v1::StageStepRequest malformed = Step("peer", "r3");
  malformed.clear_tokens();
  EXPECT_EQ(StageStep(member, malformed).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Not a request this node started: the origin tells the stage to stop.
  s = DeliverToken(member, "unknown#0", &deliver);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(deliver.cancel());
  EXPECT_TRUE(Cancel(member, "r4").ok());
  s = DropSession(member, "no-such-session", &drop);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(drop.dropped());
  // Clients may read the cache stats, but not fetch the model.
  v1::CacheStatsReply stats;
  EXPECT_TRUE(CacheStats(Insecure(), &stats).ok());
  EXPECT_EQ(GetModel(Insecure(), model_->fingerprint()).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(NodeServiceTest, GenerateStreamsTheTokensOfTheRing) {
  StartServer();
  ready_ = true;
  std::vector<v1::GenerateEvent> events;
  grpc::Status s = Generate(Insecure(), &events, /*max_tokens=*/4);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(events.size(), 2u);
  EXPECT_FALSE(events.front().request_id().empty());
  EXPECT_GT(events.front().prompt_ids_size(), 0);
  EXPECT_EQ(events.front().plan().stages_size(), 1);
  int tokens = 0;
  for (const v1::GenerateEvent& e : events) tokens += e.has_token() ? 1 : 0;
  EXPECT_EQ(tokens, 4);
  EXPECT_EQ(events.back().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_TRUE(SlotsFree());
}

TEST_F(NodeServiceTest, GenerateBeyondTheCallSlotsIsRefused) {
  StartServer(std::nullopt, /*slots=*/1);
  ready_ = true;
  ASSERT_TRUE(slots_->TryAcquire());  // a call in progress holds the only slot
  std::vector<v1::GenerateEvent> events;
  grpc::Status s = Generate(Insecure(), &events);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(slots_->in_use(), 1);  // the refused call took none
  slots_->Release();
  events.clear();
  s = Generate(Insecure(), &events, /*max_tokens=*/1);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(SlotsFree());
}

// Over mutual TLS: callers are who their certificates say.
class SecureNodeServiceTest : public NodeServiceTest {
 protected:
  void SetUp() override {
    NodeServiceTest::SetUp();
    if (HasFatalFailure()) return;
    absl::StatusOr<TlsIdentity> self =
        MakeNodeIdentity(key_, testing::MakeTempDir("node_service_test"), "self");
    absl::StatusOr<TlsIdentity> peer =
        MakeNodeIdentity(key_, testing::MakeTempDir("node_service_test"), "peer");
    absl::StatusOr<TlsIdentity> client = MakeClientIdentity(key_);
    ASSERT_TRUE(self.ok() && peer.ok() && client.ok());
    self_ = *self;
    peer_ = *peer;
    client_ = *client;
  }

  Credentials As(const TlsIdentity& identity) const {
    return {ChannelCredentials(identity), "", ""};
  }
  // TLS that trusts the cluster's CA, without a certificate of its own.
  Credentials Anonymous(std::string bearer = "") const {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = self_.ca_pem;
    return {grpc::SslCredentials(options), "", std::move(bearer)};
  }

  ClusterKey key_ = *ClusterKey::FromBytes(std::string(32, 'k'));
  TlsIdentity self_, peer_, client_;
};

TEST_F(SecureNodeServiceTest, ACallerWithoutACertificateIsUnauthenticated) {
  StartServer(self_);
  ready_ = true;
  v1::HealthReply health;
  EXPECT_EQ(Health(Anonymous(), &health).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::TopologyReply topology;
  EXPECT_EQ(Topology(Anonymous(), &topology).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // A claimed node id proves nothing with a cluster key.
  Credentials claim = Anonymous();
  claim.claimed_node = "peer";
  EXPECT_EQ(StageStep(claim, Step("peer", "r1")).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status s = Health(As(client_), &health);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(health.security(), "mutual-tls");
  EXPECT_EQ(health.cluster_id(), "cluster-label");
}

TEST_F(SecureNodeServiceTest, RingMethodsNeedANodeCertificatePinnedToItsId) {
  StartServer(self_);
  ready_ = true;
  grpc::Status s = Cancel(As(client_), "r1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("clients may not"), std::string::npos);

  // A node of the cluster, but not (yet) proven to be "peer" with this key.
  s = Cancel(As(peer_), "r1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  {
    absl::MutexLock lock(&mu_);
    ASSERT_EQ(pinned_asked_.size(), 1u);
    EXPECT_EQ(pinned_asked_[0].first, "peer");
    EXPECT_EQ(pinned_asked_[0].second, peer_.spki_fingerprint);
    pinned_.insert("peer");
  }
  EXPECT_TRUE(Cancel(As(peer_), "r1").ok());
  s = StageStep(As(peer_), Step("peer", "r2"));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(SecureNodeServiceTest, TheApiKeyAdmitsAGenerateCallerWithoutACertificate) {
  StartServer(self_, /*slots=*/8, "sekrit");
  ready_ = true;
  std::vector<v1::GenerateEvent> events;
  grpc::Status s = Generate(Anonymous("wrong"), &events);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  events.clear();
  s = Generate(Anonymous("sekrit"), &events, /*max_tokens=*/2);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(events.back().finish_reason(), v1::FINISH_REASON_LENGTH);
  // The key admits Generate only.
  v1::TopologyReply topology;
  EXPECT_EQ(Topology(Anonymous("sekrit"), &topology).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(SlotsFree());
}

}  // namespace
}  // namespace ringlm
