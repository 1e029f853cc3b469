// DiscoveryService tests. NETWORK SAFETY: everything here sends only to
// 127.0.0.0/8 (services run with loopback_only; the raw test sender targets
// 127.255.255.255). Nothing is sent to a real interface.
#include "discovery/discovery_service.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

DiscoveryOptions LoopbackOptions(uint16_t port) {
  DiscoveryOptions o;
  o.port = port;
  o.announce_interval = milliseconds(100);
  o.loopback_only = true;
  return o;
}

Announcement Self(std::string id, uint16_t grpc_port, std::string model = "model-A") {
  Announcement a;
  a.node_id = std::move(id);
  a.grpc_port = grpc_port;
  a.model_fingerprint = std::move(model);
  a.caps.usable_memory_bytes = uint64_t{grpc_port} << 20;
  a.caps.threads = 2;
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
  EXPECT_EQ(c.ignored_malformed + c.ignored_bad_checksum + c.ignored_duplicate_id, 0u);
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
  const std::string good = EncodeAnnouncement(Self("gamma", 6003));
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
  sender.Send(flipped);  // bad checksum
  std::string v2 = good;
  v2[4] = 2;
  const uint32_t crc = Crc32(std::string_view(v2).substr(0, v2.size() - 4));
  for (int i = 0; i < 4; ++i) v2[v2.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  sender.Send(v2);                                                  // other version
  sender.Send(EncodeAnnouncement(Self("delta", 6004, "model-B")));  // other model

  for (DiscoveryService* s : {&a, &b}) {
    ASSERT_TRUE(WaitFor([&] {
      const DiscoveryCounters c = s->counters();
      return c.ignored_malformed >= kRandom + 1 && c.ignored_oversized >= 1 &&
             c.ignored_bad_checksum >= 1 && c.ignored_other_version >= 1 &&
             c.ignored_other_model >= 1;
    })) << "counters never reached the expected values";
    const DiscoveryCounters c = s->counters();
    EXPECT_EQ(c.ignored_malformed, kRandom + 1u);
    EXPECT_EQ(c.ignored_oversized, 1u);
    EXPECT_EQ(c.ignored_bad_checksum, 1u);
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

}  // namespace
}  // namespace ringlm
