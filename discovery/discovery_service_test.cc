// DiscoveryService tests. NETWORK SAFETY: everything here sends only to
// 127.0.0.0/8 (services run with loopback_only; the raw test sender targets
// 127.255.255.255). Nothing is sent to a real interface.
#include "discovery/discovery_service.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/crypto.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;

constexpr char kLoopbackBroadcast[] = "127.255.255.255";

// Polls `done` every 10 ms for up to `timeout` (generous: these wait on the
// network on a shared, loaded machine).
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

// A UDP port that was free a moment ago.
uint16_t PickFreePort() {
  absl::StatusOr<UdpSocket> s = UdpSocket::BindAny(0);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s->LocalPort() : 0;
}

const std::string& ClusterKey() {
  static const std::string* const key = new std::string(DeriveAnnouncementMacKey("test cluster"));
  return *key;
}
const std::string& OtherClusterKey() {
  static const std::string* const key = new std::string(DeriveAnnouncementMacKey("not ours"));
  return *key;
}

DiscoveryOptions LoopbackOptions(uint16_t port) {
  DiscoveryOptions o;
  o.mac_key = ClusterKey();
  o.port = port;
  o.announce_interval = milliseconds(100);
  o.loopback_only = true;
  return o;
}

// The SPKI fingerprint of a node's (pretend) TLS key.
std::string Identity(const std::string& who) { return Sha256(absl::StrCat("public key of ", who)); }

Announcement Self(std::string id, uint16_t grpc_port, std::string model = "model-A") {
  Announcement a;
  a.spki_fingerprint = Identity(id);
  a.node_id = std::move(id);
  a.grpc_port = grpc_port;
  a.model_fingerprint = std::move(model);
  a.caps.usable_memory_bytes = uint64_t{grpc_port} << 20;
  a.caps.threads = 2;
  return a;
}

// `a` stamped with the wall time of `clock` (+ offset), as a sender would.
Announcement Stamped(Announcement a, const Clock& clock = *SystemClock::Get(),
                     std::chrono::milliseconds offset = milliseconds(0)) {
  a.timestamp_ms = UnixMillis(clock.WallNow() + offset);
  return a;
}

bool Knows(const DiscoveryService& s, const std::string& id) {
  return s.peers().Find(id).has_value();
}

// Sends raw datagrams to the loopback broadcast address only.
class LoopbackSender {
 public:
  explicit LoopbackSender(uint16_t port) : port_(port), sock_(*UdpSocket::Unbound()) {}
  void Send(std::string_view data) {
    absl::Status s = sock_.SendTo(data, kLoopbackBroadcast, port_);
    ASSERT_TRUE(s.ok()) << s;
  }

 private:
  uint16_t port_;
  UdpSocket sock_;
};

// Listens on the discovery port beside the services (SO_REUSEPORT: every
// socket on the port gets each broadcast), like an eavesdropper on the LAN.
class Eavesdropper {
 public:
  explicit Eavesdropper(uint16_t port) : sock_(*UdpSocket::BindAny(port)) {}

  // The next datagram that decodes under `key` as an announcement of
  // `node_id`, or nullopt after `timeout`.
  std::optional<std::string> Capture(std::string_view node_id, std::string_view key = ClusterKey(),
                                     absl::Duration timeout = absl::Seconds(20)) {
    std::string buf(kMaxAnnouncementBytes + 1, '\0');
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      absl::StatusOr<std::optional<UdpSocket::Received>> r = sock_.Receive(buf.data(), buf.size());
      if (!r.ok() || !r->has_value()) {
        absl::SleepFor(absl::Milliseconds(5));
        continue;
      }
      if ((*r)->size > kMaxAnnouncementBytes) continue;
      std::string datagram = buf.substr(0, (*r)->size);
      absl::StatusOr<Announcement> a = DecodeAnnouncement(datagram, key);
      if (a.ok() && a->node_id == node_id) return datagram;
    }
    return std::nullopt;
  }

 private:
  UdpSocket sock_;
};

TEST(AnnounceTargetsTest, LoopbackOnly) {
  DiscoveryOptions o;
  o.loopback_only = true;
  absl::StatusOr<std::vector<std::string>> t = ComputeAnnounceTargets(o, {"192.168.1.255"});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(*t, ElementsAre("127.255.255.255"));

  o.extra_broadcast_addresses = {"127.0.0.2"};
  t = ComputeAnnounceTargets(o, {});
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(*t, ElementsAre("127.0.0.2", "127.255.255.255"));

  o.extra_broadcast_addresses = {"10.0.0.255"};
  EXPECT_EQ(ComputeAnnounceTargets(o, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AnnounceTargetsTest, InterfacesAndExtras) {
  DiscoveryOptions o;
  absl::StatusOr<std::vector<std::string>> t = ComputeAnnounceTargets(
      o, {"192.168.1.255", "255.255.255.255", "127.0.0.255", "10.1.255.255"});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(*t, ElementsAre("10.1.255.255", "127.255.255.255", "192.168.1.255"));

  o.broadcast = false;
  o.extra_broadcast_addresses = {"10.0.0.9"};
  t = ComputeAnnounceTargets(o, {"192.168.1.255"});
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(*t, ElementsAre("10.0.0.9"));

  o.extra_broadcast_addresses = {"255.255.255.255"};
  EXPECT_EQ(ComputeAnnounceTargets(o, {}).status().code(), absl::StatusCode::kInvalidArgument);
  o.extra_broadcast_addresses = {"host.lan"};
  EXPECT_EQ(ComputeAnnounceTargets(o, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AnnounceTargetsTest, InterfaceListNeverHoldsLimitedBroadcastOrLoopback) {
  // Reads this machine's interfaces; sends nothing.
  for (const std::string& b : InterfaceBroadcastAddresses()) {
    EXPECT_NE(b, "255.255.255.255");
    EXPECT_FALSE(IsLoopbackIpv4(b)) << b;
    EXPECT_TRUE(ParseIpv4(b).has_value()) << b;
  }
}

TEST(DiscoveryServiceTest, TwoServicesFindEachOtherButNotThemselves) {
  const uint16_t port = PickFreePort();
  DiscoveryService a(LoopbackOptions(port)), b(LoopbackOptions(port));
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  EXPECT_THAT(a.announce_targets(), ElementsAre("127.255.255.255"));
  EXPECT_NE(a.self().instance_id, 0u);

  ASSERT_TRUE(WaitFor([&] { return Knows(a, "beta") && Knows(b, "alpha"); }));
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_self > 0; }));
  EXPECT_FALSE(Knows(a, "alpha"));
  EXPECT_FALSE(Knows(b, "beta"));
  EXPECT_EQ(a.peers().size(), 1u);

  const PeerInfo beta = *a.peers().Find("beta");
  EXPECT_EQ(beta.address, "127.0.0.1:6002");
  EXPECT_EQ(beta.instance_id, b.self().instance_id);
  EXPECT_EQ(beta.caps.usable_memory_bytes, uint64_t{6002} << 20);
  EXPECT_FALSE(a.duplicate_id_detected());
  const DiscoveryCounters c = a.counters();
  EXPECT_GT(c.sent, 0u);
  EXPECT_GT(c.accepted, 0u);
  EXPECT_EQ(c.ignored_malformed + c.ignored_bad_mac + c.ignored_duplicate_id + c.ignored_stale +
                c.ignored_replayed + c.ignored_reordered + c.ignored_id_conflict,
            0u);
  EXPECT_EQ(beta.spki_fingerprint, Identity("beta"));
  EXPECT_FALSE(beta.verified);  // until the daemon's TLS health call
  EXPECT_TRUE(a.peers().VerifiedSnapshot().empty());
}

// A node learning the cluster's model hears members of any model, under the
// cluster key only, and announces nothing itself.
TEST(DiscoveryServiceTest, ListenOnlyHearsEveryModelAndSendsNothing) {
  const uint16_t port = PickFreePort();
  DiscoveryOptions listen = LoopbackOptions(port);
  listen.listen_only = true;
  DiscoveryOptions other = LoopbackOptions(port);
  other.mac_key = OtherClusterKey();
  DiscoveryService learner(listen), a(LoopbackOptions(port)), b(LoopbackOptions(port)),
      stranger(other);
  ASSERT_TRUE(learner.Start(Self("learner", 6000, "")).ok());
  ASSERT_TRUE(a.Start(Self("alpha", 6001, "model-A")).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002, "model-B")).ok());
  ASSERT_TRUE(stranger.Start(Self("gamma", 6003, "model-A")).ok());
  ASSERT_TRUE(WaitFor([&] { return Knows(learner, "alpha") && Knows(learner, "beta"); }));
  ASSERT_TRUE(WaitFor([&] { return learner.counters().ignored_bad_mac >= 2; }));
  EXPECT_FALSE(Knows(learner, "gamma"));
  EXPECT_EQ(learner.counters().sent, 0u);
  // Nobody ever hears the learner.
  ASSERT_TRUE(WaitFor([&] { return a.counters().received >= 6; }));
  EXPECT_FALSE(Knows(a, "learner"));
  EXPECT_FALSE(Knows(b, "learner"));
}

TEST(DiscoveryServiceTest, ThreeServicesFormOneView) {
  const uint16_t port = PickFreePort();
  std::vector<std::unique_ptr<DiscoveryService>> services;
  for (int i = 0; i < 3; ++i) {
    services.push_back(std::make_unique<DiscoveryService>(LoopbackOptions(port)));
    ASSERT_TRUE(services.back()->Start(Self(absl::StrCat("n", i), 7000 + i)).ok());
  }
  ASSERT_TRUE(WaitFor([&] {
    for (auto& s : services) {
      if (s->peers().size() != 2) return false;
    }
    return true;
  }));
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(Knows(*services[i], absl::StrCat("n", j)), i != j) << i << " " << j;
    }
  }
}

TEST(DiscoveryServiceTest, UpdateSelfPropagatesCaps) {
  const uint16_t port = PickFreePort();
  DiscoveryService a(LoopbackOptions(port)), b(LoopbackOptions(port));
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "beta"); }));
  const uint64_t v = a.peers().version();

  Announcement updated = Self("beta", 6002);
  updated.caps.usable_memory_bytes = 123456789;
  const uint64_t instance = b.self().instance_id;
  ASSERT_TRUE(b.UpdateSelf(updated).ok());
  EXPECT_EQ(b.self().instance_id, instance);
  ASSERT_TRUE(
      WaitFor([&] { return a.peers().Find("beta")->caps.usable_memory_bytes == 123456789u; }));
  EXPECT_GT(a.peers().version(), v);

  EXPECT_EQ(b.UpdateSelf(Self("other", 6002)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.UpdateSelf(Self("beta", 0)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DiscoveryServiceTest, GarbageIsCountedAndIgnored) {
  const uint16_t port = PickFreePort();
  DiscoveryService a(LoopbackOptions(port)), b(LoopbackOptions(port));
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "beta") && Knows(b, "alpha"); }));

  LoopbackSender sender(port);
  std::mt19937 rng(1234);
  const std::string good = EncodeAnnouncement(Stamped(Self("gamma", 6003)), ClusterKey());
  constexpr int kRandom = 20;
  for (int i = 0; i < kRandom; ++i) {
    std::string junk(1 + rng() % 1100, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (junk.size() >= 4 && junk.compare(0, 4, "RLMA") == 0) junk[0] = 'X';
    sender.Send(junk);
  }
  sender.Send(good.substr(0, good.size() - 1));  // truncated: bad length
  sender.Send(std::string(60 * 1024, 'R'));      // oversized
  std::string flipped = good;
  flipped[20] ^= 0x10;
  sender.Send(flipped);  // bad MAC
  std::string v1 = good;
  v1[4] = 1;
  sender.Send(v1);  // other version
  sender.Send(EncodeAnnouncement(Stamped(Self("delta", 6004, "model-B")), ClusterKey()));

  for (DiscoveryService* s : {&a, &b}) {
    ASSERT_TRUE(WaitFor([&] {
      const DiscoveryCounters c = s->counters();
      return c.ignored_malformed >= kRandom + 1 && c.ignored_oversized >= 1 &&
             c.ignored_bad_mac >= 1 && c.ignored_other_version >= 1 && c.ignored_other_model >= 1;
    })) << "counters never reached the expected values";
    const DiscoveryCounters c = s->counters();
    EXPECT_EQ(c.ignored_malformed, kRandom + 1u);
    EXPECT_EQ(c.ignored_oversized, 1u);
    EXPECT_EQ(c.ignored_bad_mac, 1u);
    EXPECT_EQ(c.ignored_other_version, 1u);
    EXPECT_EQ(c.ignored_other_model, 1u);
    EXPECT_FALSE(Knows(*s, "delta"));
    EXPECT_FALSE(Knows(*s, "gamma"));
  }

  // Still working: a newcomer is found, and a well-formed raw one is accepted.
  DiscoveryService c(LoopbackOptions(port));
  ASSERT_TRUE(c.Start(Self("gamma2", 6005)).ok());
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "gamma2") && Knows(c, "alpha"); }));
  sender.Send(good);
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "gamma") && Knows(b, "gamma"); }));
}

TEST(DiscoveryServiceTest, WarningsAreRateLimited) {
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  struct Restore {
    std::shared_ptr<spdlog::logger> logger;
    ~Restore() { spdlog::set_default_logger(logger); }
  } restore{previous};

  const uint16_t port = PickFreePort();
  DiscoveryOptions o = LoopbackOptions(port);
  o.warning_interval = milliseconds(3600 * 1000);
  DiscoveryService a(o);
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  LoopbackSender sender(port);
  constexpr int kPackets = 200;
  for (int i = 0; i < kPackets; ++i) sender.Send("garbage " + std::to_string(i));
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_malformed >= kPackets; }));
  a.Stop();
  int warnings = 0;
  for (absl::string_view line : absl::StrSplit(log.str(), '\n')) {
    if (line.find("ignoring") != absl::string_view::npos) ++warnings;
  }
  EXPECT_EQ(warnings, 1) << log.str();
}

TEST(DiscoveryServiceTest, DuplicateNodeIdIsDetected) {
  const uint16_t port = PickFreePort();
  std::atomic<int> callbacks_a{0};
  std::string other_address;  // written on a's receiver thread, read after Stop
  DiscoveryOptions oa = LoopbackOptions(port);
  oa.on_duplicate_id = [&](const DuplicateIdEvent& e) {
    other_address = e.other_address;
    ++callbacks_a;
  };
  DiscoveryService a(oa), b(LoopbackOptions(port)), c(LoopbackOptions(port));
  Announcement self_a = Self("twin", 6001);
  self_a.instance_id = 111;
  Announcement self_b = Self("twin", 6002);
  self_b.instance_id = 222;
  ASSERT_TRUE(a.Start(self_a).ok());
  ASSERT_TRUE(b.Start(self_b).ok());
  ASSERT_TRUE(c.Start(Self("witness", 6003)).ok());
  ASSERT_TRUE(WaitFor([&] { return a.duplicate_id_detected() && b.duplicate_id_detected(); }));
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_duplicate_id >= 3; }));
  EXPECT_FALSE(c.duplicate_id_detected());
  EXPECT_FALSE(Knows(a, "twin"));
  EXPECT_FALSE(Knows(b, "twin"));
  a.Stop();
  EXPECT_EQ(callbacks_a.load(), 1);  // once per other instance, not per packet
  EXPECT_THAT(other_address, ::testing::StartsWith("127.0.0.1:"));
}

TEST(DiscoveryServiceTest, PeersExpireOnTheInjectedClock) {
  FakeClock clock;
  const uint16_t port = PickFreePort();
  DiscoveryOptions o = LoopbackOptions(port);
  o.clock = &clock;
  DiscoveryService a(o), b(o);
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "beta"); }));
  b.Stop();
  const uint64_t v = a.peers().version();

  // Real time passes but the fake clock does not: beta stays.
  absl::SleepFor(absl::Milliseconds(700));
  EXPECT_TRUE(Knows(a, "beta"));

  // Once the fake clock passes the expiry, the receiver's periodic sweep drops
  // beta. Advance repeatedly, in case a last in-flight packet refreshed it.
  ASSERT_TRUE(WaitFor([&] {
    clock.Advance(std::chrono::seconds(6));
    return !Knows(a, "beta");
  }));
  EXPECT_GT(a.peers().version(), v);
}

TEST(DiscoveryServiceTest, StopIsPromptAndIdempotent) {
  DiscoveryOptions o = LoopbackOptions(PickFreePort());
  o.announce_interval = milliseconds(60 * 1000);  // the announcer sleeps long
  o.peer_expiry = milliseconds(60 * 1000);
  auto s = std::make_unique<DiscoveryService>(o);
  ASSERT_TRUE(s->Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(WaitFor([&] { return s->counters().sent > 0; }));
  const auto t0 = std::chrono::steady_clock::now();
  s->Stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  // Designed to take a few ms; the bound is loose for loaded machines.
  EXPECT_LT(took, std::chrono::seconds(5));
  s->Stop();
  EXPECT_EQ(s->Start(Self("alpha", 6001)).code(), absl::StatusCode::kFailedPrecondition);
  s.reset();  // destructor after Stop is fine
}

TEST(DiscoveryServiceTest, StartRequiresA32ByteMacKeyAndAPositiveSkew) {
  for (std::string key : {std::string(), std::string(31, 'k'), std::string(33, 'k')}) {
    DiscoveryOptions o = LoopbackOptions(PickFreePort());
    o.mac_key = key;
    DiscoveryService s(o);
    absl::Status st = s.Start(Self("alpha", 6001));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << key.size();
    EXPECT_THAT(st.message(), ::testing::HasSubstr("mac_key")) << key.size();
  }
  DiscoveryOptions o = LoopbackOptions(PickFreePort());
  o.max_clock_skew = milliseconds(0);
  DiscoveryService s(o);
  EXPECT_EQ(s.Start(Self("alpha", 6001)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DiscoveryServiceTest, StartValidates) {
  DiscoveryService s(LoopbackOptions(PickFreePort()));
  EXPECT_EQ(s.Start(Self("bad id", 6001)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Start(Self("alpha", 0)).code(), absl::StatusCode::kInvalidArgument);
  DiscoveryOptions bad = LoopbackOptions(PickFreePort());
  bad.extra_broadcast_addresses = {"192.168.1.255"};  // not loopback: rejected, never sent
  DiscoveryService t(bad);
  EXPECT_EQ(t.Start(Self("alpha", 6001)).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Start(Self("alpha", 6001)).ok());
  EXPECT_EQ(s.Start(Self("alpha", 6001)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DiscoveryServiceTest, DestructorStopsARunningService) {
  const uint16_t port = PickFreePort();
  DiscoveryService a(LoopbackOptions(port));
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  {
    DiscoveryService b(LoopbackOptions(port));
    ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
    ASSERT_TRUE(WaitFor([&] { return Knows(a, "beta"); }));
  }                               // b destroyed while running
  EXPECT_TRUE(Knows(a, "beta"));  // expiry has not passed yet (5 s on a real clock)
}

// ---- Hostile senders on the LAN (all on loopback here). ----

TEST(DiscoveryServiceSecurityTest, EveryDatagramHasAFreshTimestampAndNonce) {
  const uint16_t port = PickFreePort();
  Eavesdropper ear(port);
  DiscoveryService b(LoopbackOptions(port));
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  std::set<std::string> nonces;
  uint64_t last_ts = 0;
  for (int i = 0; i < 4; ++i) {
    std::optional<std::string> d = ear.Capture("beta");
    ASSERT_TRUE(d.has_value()) << i;
    absl::StatusOr<Announcement> a = DecodeAnnouncement(*d, ClusterKey());
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->spki_fingerprint, Identity("beta"));
    EXPECT_GT(a->timestamp_ms, last_ts) << i;
    const uint64_t now = UnixMillis(std::chrono::system_clock::now());
    EXPECT_LE(a->timestamp_ms, now + 1000);
    EXPECT_GE(a->timestamp_ms + 20000, now);
    last_ts = a->timestamp_ms;
    nonces.insert(a->nonce);
  }
  EXPECT_EQ(nonces.size(), 4u);
}

TEST(DiscoveryServiceSecurityTest, TimestampsIncreaseEvenWhenTheWallClockStandsStill) {
  FakeClock clock;  // never advanced: every datagram is sent in "the same ms"
  const uint16_t port = PickFreePort();
  DiscoveryOptions o = LoopbackOptions(port);
  o.clock = &clock;
  Eavesdropper ear(port);
  DiscoveryService a(o), b(o);
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  uint64_t last_ts = 0;
  for (int i = 0; i < 4; ++i) {
    std::optional<std::string> d = ear.Capture("beta");
    ASSERT_TRUE(d.has_value()) << i;
    const uint64_t ts = DecodeAnnouncement(*d, ClusterKey())->timestamp_ms;
    EXPECT_GT(ts, last_ts) << i;
    EXPECT_LT(ts, UnixMillis(clock.WallNow()) + 1000);
    last_ts = ts;
  }
  // So the receiver's per-instance ordering check accepts each of them.
  ASSERT_TRUE(WaitFor([&] { return a.counters().accepted >= 4; }));
  EXPECT_EQ(a.counters().ignored_reordered, 0u);
}

TEST(DiscoveryServiceSecurityTest, AnOlderAnnouncementOfTheSameInstanceIsReordered) {
  const uint16_t port = PickFreePort();
  DiscoveryService a(LoopbackOptions(port));
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  LoopbackSender sender(port);
  Announcement gamma = Stamped(Self("gamma", 6003));
  gamma.instance_id = 77;
  gamma.caps.usable_memory_bytes = 2000;
  sender.Send(EncodeAnnouncement(gamma, ClusterKey()));
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "gamma"); }));
  const uint64_t v = a.peers().version();
  // A datagram stamped earlier (held back, then delivered) with other caps.
  gamma.timestamp_ms -= 500;
  gamma.caps.usable_memory_bytes = 1;
  sender.Send(EncodeAnnouncement(gamma, ClusterKey()));
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_reordered >= 1; }));
  EXPECT_EQ(a.peers().Find("gamma")->caps.usable_memory_bytes, 2000u);
  EXPECT_EQ(a.peers().version(), v);
}

TEST(DiscoveryServiceSecurityTest, ForgedAnnouncementsNeverEnterTheTable) {
  const uint16_t port = PickFreePort();
  DiscoveryService a(LoopbackOptions(port)), b(LoopbackOptions(port));
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "beta"); }));
  const PeerInfo beta = *a.peers().Find("beta");
  const uint64_t v = a.peers().version();

  // Without the key: a 1 TB newcomer, and beta with 1 TB at another address.
  LoopbackSender sender(port);
  Announcement big = Stamped(Self("evil", 6666));
  big.caps.usable_memory_bytes = big.caps.total_memory_bytes = 1ull << 40;
  Announcement hijack = Stamped(Self("beta", 6666));
  hijack.instance_id = b.self().instance_id;
  hijack.caps.usable_memory_bytes = 1ull << 40;
  hijack.grpc_host = "127.0.0.66";
  sender.Send(EncodeAnnouncement(big, OtherClusterKey()));
  sender.Send(EncodeAnnouncement(hijack, OtherClusterKey()));
  sender.Send(EncodeAnnouncement(hijack, DeriveAnnouncementMacKey("")));  // an insecure node

  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_bad_mac >= 3; }));
  EXPECT_EQ(a.counters().ignored_bad_mac, 3u);
  EXPECT_FALSE(Knows(a, "evil"));
  const PeerInfo after = *a.peers().Find("beta");
  EXPECT_EQ(after.address, beta.address);
  EXPECT_EQ(after.caps, beta.caps);
  EXPECT_EQ(a.peers().version(), v);
}

TEST(DiscoveryServiceSecurityTest, ClustersWithDifferentKeysDoNotMix) {
  const uint16_t port = PickFreePort();
  DiscoveryOptions other = LoopbackOptions(port);
  other.mac_key = OtherClusterKey();
  DiscoveryService a(LoopbackOptions(port)), b(other), c(LoopbackOptions(port));
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  ASSERT_TRUE(c.Start(Self("gamma", 6003)).ok());
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "gamma") && Knows(c, "alpha"); }));
  ASSERT_TRUE(WaitFor(
      [&] { return a.counters().ignored_bad_mac >= 3 && b.counters().ignored_bad_mac >= 3; }));
  EXPECT_FALSE(Knows(a, "beta"));
  EXPECT_FALSE(Knows(c, "beta"));
  EXPECT_EQ(b.peers().size(), 0u);
}

TEST(DiscoveryServiceSecurityTest, ReplayedDatagramIsCountedAndChangesNothing) {
  const uint16_t port = PickFreePort();
  DiscoveryOptions o = LoopbackOptions(port);
  o.peer_expiry = milliseconds(60 * 1000);  // beta stays while we replay
  Eavesdropper ear(port);
  DiscoveryService a(o), b(o);
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  // A datagram of beta's that `a` has received: captured while `a` is already
  // listening, and `a` has heard beta since.
  std::optional<std::string> captured = ear.Capture("beta");
  ASSERT_TRUE(captured.has_value());
  const uint64_t accepted = a.counters().accepted;
  ASSERT_TRUE(WaitFor([&] { return a.counters().accepted > accepted; }));
  b.Stop();
  absl::SleepFor(absl::Milliseconds(200));  // beta's last datagrams arrive
  const PeerInfo before = *a.peers().Find("beta");
  const uint64_t v = a.peers().version();
  const DiscoveryCounters c0 = a.counters();

  LoopbackSender sender(port);
  sender.Send(*captured);
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_replayed >= 1; }));
  EXPECT_EQ(*a.peers().Find("beta"), before);  // not even last_seen moved
  EXPECT_EQ(a.peers().version(), v);

  // Not the peer table's ordering check: with beta gone, the replay still
  // cannot bring it back.
  ASSERT_TRUE(a.peers().Remove("beta"));
  sender.Send(*captured);
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_replayed >= 2; }));
  EXPECT_FALSE(Knows(a, "beta"));
  const DiscoveryCounters c1 = a.counters();
  EXPECT_EQ(c1.ignored_replayed, 2u);
  EXPECT_EQ(c1.accepted, c0.accepted);
}

TEST(DiscoveryServiceSecurityTest, StaleAnnouncementsAreDropped) {
  const uint16_t port = PickFreePort();
  DiscoveryService a(LoopbackOptions(port));
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  LoopbackSender sender(port);
  // Correctly MAC'd, but an hour old, or an hour ahead.
  const Announcement gamma = Self("gamma", 6003);
  sender.Send(EncodeAnnouncement(Stamped(gamma, *SystemClock::Get(), -std::chrono::hours(1)),
                                 ClusterKey()));
  sender.Send(
      EncodeAnnouncement(Stamped(gamma, *SystemClock::Get(), std::chrono::hours(1)), ClusterKey()));
  sender.Send(EncodeAnnouncement(gamma, ClusterKey()));  // timestamp 0
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_stale >= 3; }));
  EXPECT_EQ(a.counters().ignored_stale, 3u);
  EXPECT_FALSE(Knows(a, "gamma"));
  EXPECT_EQ(a.peers().version(), 0u);
  // The same announcement stamped now is accepted: it was the timestamp.
  sender.Send(EncodeAnnouncement(Stamped(gamma), ClusterKey()));
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "gamma"); }));
}

TEST(DiscoveryServiceSecurityTest, StalenessFollowsTheInjectedWallClock) {
  FakeClock clock;
  const uint16_t port = PickFreePort();
  DiscoveryOptions o = LoopbackOptions(port);
  o.clock = &clock;
  o.max_clock_skew = milliseconds(5000);
  DiscoveryService a(o);
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  LoopbackSender sender(port);
  // 4 s behind the fake clock: within 5 s.
  sender.Send(
      EncodeAnnouncement(Stamped(Self("gamma", 6003), clock, milliseconds(-4000)), ClusterKey()));
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "gamma"); }));
  // 6 s behind: stale.
  sender.Send(
      EncodeAnnouncement(Stamped(Self("delta", 6004), clock, milliseconds(-6000)), ClusterKey()));
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_stale >= 1; }));
  EXPECT_FALSE(Knows(a, "delta"));
}

TEST(DiscoveryServiceSecurityTest, ASecondAnnouncerCannotTakeALiveIdUntilItExpires) {
  FakeClock clock;
  const uint16_t port = PickFreePort();
  DiscoveryOptions o = LoopbackOptions(port);
  o.clock = &clock;
  DiscoveryService a(o), b(o);
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  ASSERT_TRUE(b.Start(Self("beta", 6002)).ok());
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "beta"); }));
  ASSERT_TRUE(a.peers().MarkVerified("beta", Identity("beta"), "127.0.0.1:6002"));
  const PeerInfo beta = *a.peers().Find("beta");

  // A key holder with another TLS identity claims beta: same instance, a
  // "restart", an advertised address, more memory. Freshly stamped, new nonces.
  LoopbackSender sender(port);
  Announcement impostor = Self("beta", 6666);
  impostor.spki_fingerprint = Identity("mallory");
  impostor.grpc_host = "127.0.0.66";
  impostor.caps.usable_memory_bytes = 1ull << 40;
  constexpr int kTries = 6;
  for (int i = 0; i < kTries; ++i) {
    impostor.instance_id = i % 2 == 0 ? b.self().instance_id : 1000 + i;
    sender.Send(EncodeAnnouncement(Stamped(impostor, clock), ClusterKey()));
  }
  ASSERT_TRUE(WaitFor([&] { return a.counters().ignored_id_conflict >= kTries; }));
  EXPECT_EQ(a.counters().ignored_id_conflict, static_cast<uint64_t>(kTries));
  const PeerInfo after = *a.peers().Find("beta");
  EXPECT_EQ(after.address, "127.0.0.1:6002");
  EXPECT_EQ(after.spki_fingerprint, Identity("beta"));
  EXPECT_EQ(after.instance_id, beta.instance_id);
  EXPECT_EQ(after.caps, beta.caps);
  EXPECT_TRUE(after.verified);
  ASSERT_EQ(a.peers().VerifiedSnapshot().size(), 1u);

  // Beta leaves; once its entry has expired the id is free.
  b.Stop();
  ASSERT_TRUE(WaitFor([&] {
    clock.Advance(std::chrono::seconds(6));
    return !Knows(a, "beta");
  }));
  impostor.instance_id = 4242;
  sender.Send(EncodeAnnouncement(Stamped(impostor, clock), ClusterKey()));
  ASSERT_TRUE(WaitFor([&] { return Knows(a, "beta"); }));
  const PeerInfo taken = *a.peers().Find("beta");
  EXPECT_EQ(taken.spki_fingerprint, Identity("mallory"));
  EXPECT_EQ(taken.address, "127.0.0.66:6666");
  EXPECT_FALSE(taken.verified);  // and the daemon's TLS check decides whether it is used
  EXPECT_TRUE(a.peers().VerifiedSnapshot().empty());
}

TEST(DiscoveryServiceSecurityTest, TwoThousandForgedDatagramsLeaveTheTableEmpty) {
  const uint16_t port = PickFreePort();
  DiscoveryOptions o = LoopbackOptions(port);
  o.warning_interval = milliseconds(3600 * 1000);
  DiscoveryService a(o);
  ASSERT_TRUE(a.Start(Self("alpha", 6001)).ok());
  LoopbackSender sender(port);
  std::mt19937 rng(99);
  constexpr int kForged = 2000;
  constexpr int kBatch = 50;  // paced so the socket buffer never overflows
  for (int sent = 0; sent < kForged;) {
    for (int i = 0; i < kBatch; ++i, ++sent) {
      // New ids with 1 TB; our own id (which must not look like a duplicate);
      // and one id over and over with ever more memory and threads.
      Announcement f = Self(sent % 3 == 0   ? absl::StrCat("evil-", sent)
                            : sent % 3 == 1 ? std::string("alpha")
                                            : std::string("victim"),
                            static_cast<uint16_t>(1000 + sent % 50000));
      f.instance_id = rng();
      f.caps.total_memory_bytes = f.caps.usable_memory_bytes = (1ull << 40) + sent;
      f.caps.threads = 1000 + sent;
      f.spki_fingerprint = Identity(absl::StrCat("forger ", sent));
      // A random wrong key each time, not just one.
      std::string key(32, '\0');
      for (char& c : key) c = static_cast<char>(rng());
      sender.Send(EncodeAnnouncement(Stamped(f), key));
    }
    ASSERT_TRUE(WaitFor([&] {
      return a.counters().ignored_bad_mac >= static_cast<uint64_t>(sent);
    })) << "receiver saw "
        << a.counters().ignored_bad_mac << " of " << sent;
  }
  const DiscoveryCounters c = a.counters();
  EXPECT_EQ(c.ignored_bad_mac, static_cast<uint64_t>(kForged));
  EXPECT_EQ(c.accepted, 0u);
  EXPECT_EQ(c.ignored_duplicate_id, 0u);
  EXPECT_FALSE(a.duplicate_id_detected());
  EXPECT_EQ(c.received, c.ignored_bad_mac + c.ignored_self);  // nothing else arrived
  EXPECT_EQ(c.ignored(), c.received);
  EXPECT_EQ(a.peers().size(), 0u);
  EXPECT_EQ(a.peers().version(), 0u);
}

}  // namespace
}  // namespace ringlm
