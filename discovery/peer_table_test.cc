#include "discovery/peer_table.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 32-byte fingerprints of two identities.
const std::string kIdentityA(32, 'A');
const std::string kIdentityB(32, 'B');

Announcement Peer(std::string id, uint64_t instance = 1, uint64_t usable = 1000,
                  std::string fingerprint = kIdentityA) {
  Announcement a;
  a.node_id = std::move(id);
  a.instance_id = instance;
  a.grpc_port = 5000;
  a.model_fingerprint.assign(1, 'm');  // not = "m": GCC 12 -Wrestrict false positive
  a.caps.usable_memory_bytes = usable;
  a.caps.threads = 4;
  a.spki_fingerprint = std::move(fingerprint);
  return a;
}

// `a` with another identity.
Announcement Impostor(Announcement a) {
  a.spki_fingerprint = kIdentityB;
  return a;
}

// `a` stamped `ms`.
Announcement At(Announcement a, uint64_t ms) {
  a.timestamp_ms = ms;
  return a;
}

TEST(PeerTableTest, JoinRefreshUpdateRestart) {
  FakeClock clock;
  PeerTable table;
  EXPECT_EQ(table.version(), 0u);
  const SteadyTime t0 = clock.Now();

  ASSERT_EQ(*table.Observe(Peer("b"), "10.0.0.2", t0), PeerChange::kJoined);
  EXPECT_EQ(table.version(), 1u);
  std::vector<PeerInfo> snap = table.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].node_id, "b");
  EXPECT_EQ(snap[0].address, "10.0.0.2:5000");
  EXPECT_EQ(snap[0].host, "10.0.0.2");
  EXPECT_EQ(snap[0].caps.usable_memory_bytes, 1000u);
  EXPECT_EQ(snap[0].last_seen, t0);

  clock.Advance(seconds(1));
  ASSERT_EQ(*table.Observe(Peer("b"), "10.0.0.2", clock.Now()), PeerChange::kRefreshed);
  EXPECT_EQ(table.version(), 1u);
  EXPECT_EQ(table.Find("b")->last_seen, clock.Now());
  EXPECT_EQ(table.Find("b")->first_seen, t0);

  ASSERT_EQ(*table.Observe(Peer("b", 1, 2000), "10.0.0.2", clock.Now()), PeerChange::kUpdated);
  EXPECT_EQ(table.version(), 2u);
  EXPECT_EQ(table.Find("b")->caps.usable_memory_bytes, 2000u);

  clock.Advance(seconds(1));
  ASSERT_EQ(*table.Observe(Peer("b", 2, 2000), "10.0.0.2", clock.Now()), PeerChange::kRestarted);
  EXPECT_EQ(table.version(), 3u);
  EXPECT_EQ(table.Find("b")->instance_id, 2u);
  EXPECT_EQ(table.Find("b")->first_seen, clock.Now());

  ASSERT_EQ(*table.Observe(Peer("a"), "10.0.0.1", clock.Now()), PeerChange::kJoined);
  snap = table.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].node_id, "a");  // sorted
  EXPECT_EQ(snap[1].node_id, "b");
}

TEST(PeerTableTest, ExpiryUsesTheGivenTime) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.expiry = milliseconds(5000)});
  ASSERT_TRUE(table.Observe(Peer("a"), "10.0.0.1", clock.Now()).ok());
  clock.Advance(seconds(2));
  ASSERT_TRUE(table.Observe(Peer("b"), "10.0.0.2", clock.Now()).ok());
  const uint64_t v = table.version();

  clock.Advance(seconds(3));  // a silent for exactly 5 s: still there
  EXPECT_TRUE(table.Expire(clock.Now()).empty());
  EXPECT_EQ(table.version(), v);

  clock.Advance(milliseconds(1));
  std::vector<PeerInfo> gone = table.Expire(clock.Now());
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].node_id, "a");
  EXPECT_EQ(table.version(), v + 1);
  EXPECT_EQ(table.size(), 1u);

  clock.Advance(seconds(3));
  gone = table.Expire(clock.Now());
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].node_id, "b");
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.version(), v + 2);
}

TEST(PeerTableTest, RefreshPostponesExpiry) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.expiry = milliseconds(5000)});
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(table.Observe(Peer("a"), "10.0.0.1", clock.Now()).ok());
    clock.Advance(seconds(4));
    EXPECT_TRUE(table.Expire(clock.Now()).empty()) << i;
  }
  EXPECT_EQ(table.version(), 1u);
}

TEST(PeerTableTest, RemoveAndClear) {
  FakeClock clock;
  PeerTable table;
  ASSERT_TRUE(table.Observe(Peer("a"), "10.0.0.1", clock.Now()).ok());
  ASSERT_TRUE(table.Observe(Peer("b"), "10.0.0.2", clock.Now()).ok());
  EXPECT_TRUE(table.Remove("a"));
  EXPECT_EQ(table.version(), 3u);
  EXPECT_FALSE(table.Remove("a"));
  EXPECT_EQ(table.version(), 3u);
  EXPECT_FALSE(table.Find("a").has_value());
  table.Clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.version(), 4u);
  table.Clear();
  EXPECT_EQ(table.version(), 4u);
}

TEST(PeerTableTest, BoundedSize) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.max_peers = 2});
  ASSERT_TRUE(table.Observe(Peer("a"), "10.0.0.1", clock.Now()).ok());
  ASSERT_TRUE(table.Observe(Peer("b"), "10.0.0.2", clock.Now()).ok());
  absl::StatusOr<PeerChange> r = table.Observe(Peer("c"), "10.0.0.3", clock.Now());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  // Known peers still refresh and restart.
  EXPECT_EQ(*table.Observe(Peer("b", 9), "10.0.0.2", clock.Now()), PeerChange::kRestarted);
  EXPECT_EQ(table.size(), 2u);
}

TEST(PeerTableTest, AdvertisedHostWins) {
  FakeClock clock;
  PeerTable table;
  Announcement a = Peer("a");
  a.grpc_host = "gpu-box.lan";
  ASSERT_TRUE(table.Observe(a, "10.0.0.1", clock.Now()).ok());
  EXPECT_EQ(table.Find("a")->address, "gpu-box.lan:5000");
  a.grpc_host = "fe80::1";
  EXPECT_EQ(*table.Observe(a, "10.0.0.1", clock.Now()), PeerChange::kUpdated);
  EXPECT_EQ(table.Find("a")->address, "[fe80::1]:5000");
}

TEST(PeerTableTest, PrefersLanAddressOverLoopbackWithoutFlapping) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.expiry = milliseconds(5000)});
  ASSERT_TRUE(table.Observe(Peer("a"), "127.0.0.1", clock.Now()).ok());
  EXPECT_EQ(table.Find("a")->address, "127.0.0.1:5000");
  EXPECT_EQ(*table.Observe(Peer("a"), "192.168.1.5", clock.Now()), PeerChange::kUpdated);
  const uint64_t v = table.version();
  for (int i = 0; i < 20; ++i) {
    clock.Advance(milliseconds(500));
    EXPECT_EQ(*table.Observe(Peer("a"), "127.0.0.1", clock.Now()), PeerChange::kRefreshed);
    EXPECT_EQ(*table.Observe(Peer("a"), "192.168.1.5", clock.Now()), PeerChange::kRefreshed);
  }
  EXPECT_EQ(table.version(), v);
  EXPECT_EQ(table.Find("a")->address, "192.168.1.5:5000");
}

TEST(PeerTableTest, SwitchesBetweenLanAddressesOnlyWhenTheOldOneGoesQuiet) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.expiry = milliseconds(5000)});
  ASSERT_TRUE(table.Observe(Peer("a"), "192.168.1.5", clock.Now()).ok());
  for (int i = 0; i < 10; ++i) {
    clock.Advance(milliseconds(500));
    EXPECT_EQ(*table.Observe(Peer("a"), "10.1.0.5", clock.Now()), PeerChange::kRefreshed);
    EXPECT_EQ(*table.Observe(Peer("a"), "192.168.1.5", clock.Now()), PeerChange::kRefreshed);
  }
  EXPECT_EQ(table.Find("a")->address, "192.168.1.5:5000");
  // 192.168.1.5 goes quiet (e.g. Wi-Fi dropped) for more than expiry / 2.
  for (int i = 0; i < 6; ++i) {
    clock.Advance(milliseconds(500));
    ASSERT_TRUE(table.Observe(Peer("a"), "10.1.0.5", clock.Now()).ok());
  }
  EXPECT_EQ(table.Find("a")->address, "10.1.0.5:5000");
}

TEST(PeerTableTest, RejectsUnusableAnnouncements) {
  FakeClock clock;
  PeerTable table;
  EXPECT_EQ(table.Observe(Peer("bad id"), "10.0.0.1", clock.Now()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Observe(Peer("a"), "", clock.Now()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.size(), 0u);
}

TEST(PeerTableTest, AwaitVersionAboveWakesOnChange) {
  FakeClock clock;
  PeerTable table;
  EXPECT_EQ(table.AwaitVersionAbove(0, absl::Milliseconds(10)), 0u);  // times out
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    (void)table.Observe(Peer("a"), "10.0.0.1", clock.Now());
  });
  const uint64_t v = table.AwaitVersionAbove(0, absl::Seconds(30));
  writer.join();
  EXPECT_EQ(v, 1u);
}

TEST(PeerTableTest, ConcurrentUse) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.expiry = milliseconds(100)});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string id = absl::StrCat("n", (t * 7 + i) % 10);
        (void)table.Observe(Peer(id, i % 3), "10.0.0.1", clock.Now());
        clock.Advance(milliseconds(1));
        (void)table.Snapshot();
        (void)table.Expire(clock.Now());
        if (i % 50 == 0) table.Remove(id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(table.size(), 10u);
  EXPECT_GT(table.version(), 0u);
}

TEST(PeerTableTest, PinsTheFingerprintOfALiveId) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.expiry = milliseconds(5000)});
  ASSERT_EQ(*table.Observe(Peer("a"), "10.0.0.1", clock.Now()), PeerChange::kJoined);
  EXPECT_EQ(table.Find("a")->spki_fingerprint, kIdentityA);
  const uint64_t v = table.version();
  const PeerInfo before = *table.Find("a");

  // Another identity cannot take the id: not with the same instance, not as a
  // "restart", not with an advertised host, not with an empty fingerprint.
  Announcement hijack = Impostor(Peer("a", 1, 1ull << 40));
  hijack.grpc_host = "10.6.6.6";
  for (uint64_t instance : {1, 2, 3}) {
    hijack.instance_id = instance;
    absl::StatusOr<PeerChange> r = table.Observe(hijack, "10.6.6.6", clock.Now());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists) << instance;
  }
  Announcement anonymous = Peer("a", 2, 1ull << 40, "");
  EXPECT_EQ(table.Observe(anonymous, "10.6.6.6", clock.Now()).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*table.Find("a"), before);  // address, caps, instance, last_seen untouched
  EXPECT_EQ(table.version(), v);

  // The owner still refreshes and restarts.
  clock.Advance(seconds(1));
  EXPECT_EQ(*table.Observe(Peer("a"), "10.0.0.1", clock.Now()), PeerChange::kRefreshed);
  EXPECT_EQ(*table.Observe(Peer("a", 7), "10.0.0.1", clock.Now()), PeerChange::kRestarted);
  EXPECT_EQ(table.Find("a")->spki_fingerprint, kIdentityA);
}

TEST(PeerTableTest, AnExpiredOrRemovedIdIsFreeAgain) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.expiry = milliseconds(5000)});
  ASSERT_TRUE(table.Observe(Peer("a"), "10.0.0.1", clock.Now()).ok());
  ASSERT_FALSE(table.Observe(Impostor(Peer("a")), "10.0.0.9", clock.Now()).ok());

  clock.Advance(milliseconds(5001));
  ASSERT_EQ(table.Expire(clock.Now()).size(), 1u);
  EXPECT_EQ(*table.Observe(Impostor(Peer("a")), "10.0.0.9", clock.Now()), PeerChange::kJoined);
  PeerInfo now_b = *table.Find("a");
  EXPECT_EQ(now_b.spki_fingerprint, kIdentityB);
  EXPECT_EQ(now_b.address, "10.0.0.9:5000");
  EXPECT_FALSE(now_b.verified);
  // ...and pinned to the new identity.
  EXPECT_EQ(table.Observe(Peer("a"), "10.0.0.1", clock.Now()).status().code(),
            absl::StatusCode::kAlreadyExists);

  ASSERT_TRUE(table.Remove("a"));
  EXPECT_EQ(*table.Observe(Peer("a"), "10.0.0.1", clock.Now()), PeerChange::kJoined);
  EXPECT_EQ(table.Find("a")->spki_fingerprint, kIdentityA);
}

// A restart with the same key replaces the old instance's entry at once,
// and every new entry of an id (join, restart, or back after removal)
// carries the version it was added at; other changes keep it. Another key
// still cannot replace it.
TEST(PeerTableTest, AddedVersionMarksEachNewEntryOfAnId) {
  FakeClock clock;
  PeerTable table;
  ASSERT_EQ(*table.Observe(Peer("a"), "10.0.0.1", clock.Now()), PeerChange::kJoined);
  EXPECT_EQ(table.Find("a")->added_version, table.version());
  ASSERT_EQ(*table.Observe(Peer("b"), "10.0.0.2", clock.Now()), PeerChange::kJoined);
  EXPECT_EQ(table.Find("b")->added_version, table.version());
  const uint64_t a_added = table.Find("a")->added_version;
  EXPECT_LT(a_added, table.version());

  // Refresh, new caps, proof of identity: the same entry.
  clock.Advance(milliseconds(100));
  EXPECT_EQ(*table.Observe(Peer("a"), "10.0.0.1", clock.Now()), PeerChange::kRefreshed);
  EXPECT_EQ(*table.Observe(Peer("a", 1, 2000), "10.0.0.1", clock.Now()), PeerChange::kUpdated);
  ASSERT_TRUE(table.MarkVerified("a", kIdentityA, "10.0.0.1:5000"));
  EXPECT_EQ(table.Find("a")->added_version, a_added);

  // Another key announcing a new instance is refused: the entry stays.
  const uint64_t v = table.version();
  EXPECT_EQ(table.Observe(Impostor(Peer("a", 2)), "10.0.0.9", clock.Now()).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(table.Find("a")->added_version, a_added);
  EXPECT_TRUE(table.Find("a")->verified);
  EXPECT_EQ(table.version(), v);

  // The same key with a new instance (a restart) replaces it at once,
  // unverified until its next health call.
  EXPECT_EQ(*table.Observe(Peer("a", 2), "10.0.0.1", clock.Now()), PeerChange::kRestarted);
  const PeerInfo restarted = *table.Find("a");
  EXPECT_EQ(restarted.instance_id, 2u);
  EXPECT_FALSE(restarted.verified);
  EXPECT_EQ(restarted.added_version, table.version());
  EXPECT_GT(restarted.added_version, v);

  // Removed and heard again, even as the same instance: a new entry.
  ASSERT_TRUE(table.Remove("a"));
  const uint64_t removed_at = table.version();
  EXPECT_EQ(*table.Observe(Peer("a", 2), "10.0.0.1", clock.Now()), PeerChange::kJoined);
  EXPECT_GT(table.Find("a")->added_version, removed_at);
}

TEST(PeerTableTest, RejectsABadFingerprintLength) {
  FakeClock clock;
  PeerTable table;
  EXPECT_EQ(
      table.Observe(Peer("a", 1, 1, std::string(31, 'x')), "10.0.0.1", clock.Now()).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(table.Observe(Peer("a", 1, 1, ""), "10.0.0.1", clock.Now()).ok());  // no TLS
}

TEST(PeerTableTest, MarkVerifiedNeedsTheCurrentFingerprintAndAddress) {
  FakeClock clock;
  PeerTable table;
  ASSERT_TRUE(table.Observe(Peer("a"), "10.0.0.1", clock.Now()).ok());
  ASSERT_TRUE(table.Observe(Peer("b"), "10.0.0.2", clock.Now()).ok());
  EXPECT_FALSE(table.Find("a")->verified);  // starts unverified
  EXPECT_TRUE(table.VerifiedSnapshot().empty());
  uint64_t v = table.version();

  EXPECT_FALSE(table.MarkVerified("a", kIdentityB, "10.0.0.1:5000"));  // other identity
  EXPECT_FALSE(table.MarkVerified("a", kIdentityA, "10.0.0.2:5000"));  // other address
  EXPECT_FALSE(table.MarkVerified("a", kIdentityA, "10.0.0.1"));       // not host:port
  EXPECT_FALSE(table.MarkVerified("c", kIdentityA, "10.0.0.1:5000"));  // absent
  EXPECT_FALSE(table.MarkVerified("a", "", "10.0.0.1:5000"));
  EXPECT_FALSE(table.Find("a")->verified);
  EXPECT_EQ(table.version(), v);

  EXPECT_TRUE(table.MarkVerified("a", kIdentityA, "10.0.0.1:5000"));
  EXPECT_TRUE(table.Find("a")->verified);
  EXPECT_EQ(table.version(), v + 1);  // the daemon re-partitions on it
  EXPECT_TRUE(table.MarkVerified("a", kIdentityA, "10.0.0.1:5000"));  // idempotent
  EXPECT_EQ(table.version(), v + 1);

  std::vector<PeerInfo> verified = table.VerifiedSnapshot();
  ASSERT_EQ(verified.size(), 1u);
  EXPECT_EQ(verified[0].node_id, "a");
  EXPECT_TRUE(verified[0].verified);
  EXPECT_EQ(table.Snapshot().size(), 2u);

  // A refresh or a caps change keeps it verified.
  clock.Advance(seconds(1));
  EXPECT_EQ(*table.Observe(Peer("a"), "10.0.0.1", clock.Now()), PeerChange::kRefreshed);
  EXPECT_EQ(*table.Observe(Peer("a", 1, 5555), "10.0.0.1", clock.Now()), PeerChange::kUpdated);
  EXPECT_TRUE(table.Find("a")->verified);

  ASSERT_TRUE(table.MarkVerified("b", kIdentityA, "10.0.0.2:5000"));
  verified = table.VerifiedSnapshot();
  ASSERT_EQ(verified.size(), 2u);
  EXPECT_EQ(verified[0].node_id, "a");  // sorted
  EXPECT_EQ(verified[1].node_id, "b");
}

TEST(PeerTableTest, VerifiedIsResetByAddressInstanceOrFingerprintChange) {
  FakeClock clock;
  PeerTable table(PeerTableOptions{.expiry = milliseconds(5000)});
  auto verify = [&](const std::string& fp, const std::string& address) {
    ASSERT_TRUE(table.MarkVerified("a", fp, address));
    ASSERT_TRUE(table.Find("a")->verified);
  };

  // Address: an advertised host.
  ASSERT_TRUE(table.Observe(Peer("a"), "10.0.0.1", clock.Now()).ok());
  verify(kIdentityA, "10.0.0.1:5000");
  uint64_t v = table.version();
  Announcement moved = Peer("a");
  moved.grpc_host = "10.0.0.77";
  EXPECT_EQ(*table.Observe(moved, "10.0.0.1", clock.Now()), PeerChange::kUpdated);
  EXPECT_FALSE(table.Find("a")->verified);
  EXPECT_EQ(table.Find("a")->address, "10.0.0.77:5000");
  EXPECT_GT(table.version(), v);
  EXPECT_TRUE(table.VerifiedSnapshot().empty());
  // A late MarkVerified for the old address (health call in flight) fails.
  EXPECT_FALSE(table.MarkVerified("a", kIdentityA, "10.0.0.1:5000"));
  verify(kIdentityA, "10.0.0.77:5000");

  // Address: a new port.
  Announcement port = moved;
  port.grpc_port = 5001;
  EXPECT_EQ(*table.Observe(port, "10.0.0.1", clock.Now()), PeerChange::kUpdated);
  EXPECT_FALSE(table.Find("a")->verified);
  verify(kIdentityA, "10.0.0.77:5001");

  // Instance: a restart.
  port.instance_id = 2;
  v = table.version();
  EXPECT_EQ(*table.Observe(port, "10.0.0.1", clock.Now()), PeerChange::kRestarted);
  EXPECT_FALSE(table.Find("a")->verified);
  EXPECT_GT(table.version(), v);
  verify(kIdentityA, "10.0.0.77:5001");

  // Fingerprint: only possible through a new entry, which starts unverified.
  clock.Advance(milliseconds(5001));
  ASSERT_EQ(table.Expire(clock.Now()).size(), 1u);
  Announcement other = Impostor(port);
  EXPECT_EQ(*table.Observe(other, "10.0.0.1", clock.Now()), PeerChange::kJoined);
  EXPECT_FALSE(table.Find("a")->verified);
  EXPECT_FALSE(table.MarkVerified("a", kIdentityA, "10.0.0.77:5001"));
  verify(kIdentityB, "10.0.0.77:5001");
}

TEST(PeerTableTest, RefusesAnnouncementsNotNewerThanTheLastOfTheirInstance) {
  FakeClock clock;
  PeerTable table;
  ASSERT_EQ(*table.Observe(At(Peer("a"), 1000), "10.0.0.1", clock.Now()), PeerChange::kJoined);
  ASSERT_EQ(*table.Observe(At(Peer("a", 1, 2000), 1002), "10.0.0.1", clock.Now()),
            PeerChange::kUpdated);
  const uint64_t v = table.version();
  const PeerInfo before = *table.Find("a");
  // An older datagram (delayed, or replayed) cannot roll the caps back; nor
  // can one with the same timestamp.
  for (uint64_t ts : {1001, 1002, 1000, 1}) {
    EXPECT_EQ(table.Observe(At(Peer("a", 1, 1000), ts), "10.0.0.1", clock.Now()).status().code(),
              absl::StatusCode::kOutOfRange)
        << ts;
  }
  EXPECT_EQ(*table.Find("a"), before);
  EXPECT_EQ(table.version(), v);
  EXPECT_EQ(*table.Observe(At(Peer("a", 1, 2000), 1003), "10.0.0.1", clock.Now()),
            PeerChange::kRefreshed);
  // timestamp 0 (not from the wire, e.g. a static peer) skips the check.
  EXPECT_EQ(*table.Observe(At(Peer("a", 1, 2000), 0), "10.0.0.1", clock.Now()),
            PeerChange::kRefreshed);
  EXPECT_EQ(table.Observe(At(Peer("a", 1, 2000), 1003), "10.0.0.1", clock.Now()).status().code(),
            absl::StatusCode::kOutOfRange);  // the 0 did not reset the last timestamp
  // A new instance starts its own sequence.
  EXPECT_EQ(*table.Observe(At(Peer("a", 2, 2000), 500), "10.0.0.1", clock.Now()),
            PeerChange::kRestarted);
  EXPECT_EQ(*table.Observe(At(Peer("a", 2, 2000), 501), "10.0.0.1", clock.Now()),
            PeerChange::kRefreshed);
}

TEST(JoinHostPortTest, BracketsIpv6) {
  EXPECT_EQ(JoinHostPort("10.0.0.1", 80), "10.0.0.1:80");
  EXPECT_EQ(JoinHostPort("::1", 80), "[::1]:80");
}

}  // namespace
}  // namespace ringlm
