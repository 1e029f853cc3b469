// DiscoveryService: finds the other ringlm daemons on the LAN by UDP broadcast.
#ifndef RINGLM_DISCOVERY_DISCOVERY_SERVICE_H_
#define RINGLM_DISCOVERY_DISCOVERY_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/log_rate_limiter.h"
#include "discovery/announcement.h"
#include "discovery/clock.h"
#include "discovery/internal/replay_cache.h"
#include "discovery/peer_table.h"
#include "discovery/udp_socket.h"

namespace ringlm {

// Another process announces our node id with a different instance id.
struct DuplicateIdEvent {
  std::string node_id;
  uint64_t our_instance_id = 0;
  uint64_t other_instance_id = 0;
  std::string other_address;  // sender "ip:port" of its announcement
};

struct DiscoveryOptions {
  // Required: the 32-byte HMAC-SHA256 key of announcements, the same on every
  // node of the cluster: DeriveAnnouncementMacKey(cluster key), or
  // DeriveAnnouncementMacKey("") in insecure mode. Start() refuses any other
  // length. Datagrams under another key are dropped and counted.
  std::string mac_key;
  // An announcement whose timestamp is further than this from our wall clock
  // (either way) is dropped as stale. Bounds how long a captured datagram can
  // be replayed, and how far apart the cluster's clocks may drift (NTP).
  std::chrono::milliseconds max_clock_skew{30000};
  // UDP port every daemon of a cluster listens and announces on.
  uint16_t port = 47800;
  std::chrono::milliseconds announce_interval{1000};
  // A peer silent for longer than this leaves the table.
  std::chrono::milliseconds peer_expiry{5000};
  // Broadcast to 127.255.255.255 and (unless loopback_only) to every up,
  // non-loopback IPv4 interface's broadcast address. When false, announce
  // only to extra_broadcast_addresses.
  bool broadcast = true;
  // Announce only to 127.255.255.255 (single-host clusters, tests). Every
  // extra address must then be in 127/8.
  bool loopback_only = false;
  // More IPv4 destinations (directed broadcasts or unicast static peers),
  // sent on `port`. 255.255.255.255 is rejected.
  std::vector<std::string> extra_broadcast_addresses;
  size_t max_peers = 256;
  // Announce nothing, and accept authenticated announcements of any model
  // fingerprint: for a node that is learning which model the cluster runs
  // (model fetch, docs/model-fetch.md). Every other check still applies.
  bool listen_only = false;
  // At most one warning line per kind of ignored packet per this interval.
  std::chrono::milliseconds warning_interval{10000};
  // Time source: Now() for the peer table (last_seen, expiry), WallNow() for
  // the timestamps we send and the freshness of those we receive. Not owned;
  // must outlive the service. nullptr = SystemClock.
  Clock* clock = nullptr;
  // Called on the receiver thread, once per distinct other instance that
  // announces our node id. Must not call Stop() or destroy the service.
  std::function<void(const DuplicateIdEvent&)> on_duplicate_id;
};

// Counters since Start(); for tests and metrics.
struct DiscoveryCounters {
  uint64_t sent = 0;  // datagrams sent (one per target per interval)
  uint64_t send_errors = 0;
  uint64_t received = 0;  // every datagram read from the socket
  uint64_t accepted = 0;  // fed into the peer table
  uint64_t ignored_self = 0;
  uint64_t ignored_malformed = 0;  // too short, bad magic, bad lengths, bad fields
  uint64_t ignored_oversized = 0;  // larger than kMaxAnnouncementBytes
  uint64_t ignored_bad_mac = 0;    // corrupt, forged, or another cluster key
  uint64_t ignored_other_version = 0;
  uint64_t ignored_stale = 0;      // timestamp further than max_clock_skew from our clock
  uint64_t ignored_replayed = 0;   // nonce seen before (or too old for the replay cache)
  uint64_t ignored_reordered = 0;  // not newer than the last accepted of its instance
  uint64_t ignored_other_model = 0;
  uint64_t ignored_duplicate_id = 0;  // another process announces our node id
  uint64_t ignored_id_conflict = 0;   // a live peer's id announced with another fingerprint
  uint64_t ignored_table_full = 0;

  uint64_t ignored() const {
    return ignored_self + ignored_malformed + ignored_oversized + ignored_bad_mac +
           ignored_other_version + ignored_stale + ignored_replayed + ignored_reordered +
           ignored_other_model + ignored_duplicate_id + ignored_id_conflict + ignored_table_full;
  }
};

// The IPv4 destinations an announcer with `options` sends to, given the
// interfaces' broadcast addresses. InvalidArgument for a bad extra address,
// 255.255.255.255, or a non-loopback extra address under loopback_only.
absl::StatusOr<std::vector<std::string>> ComputeAnnounceTargets(
    const DiscoveryOptions& options, const std::vector<std::string>& interface_broadcasts);

// DiscoveryService
//
// Purpose: announces this node every announce_interval and keeps a PeerTable
// of the others that run the same model fingerprint and protocol version.
// Start() binds UDP 0.0.0.0:port (SO_REUSEADDR, SO_REUSEPORT, SO_BROADCAST,
// so several daemons on one host share the port) and starts two threads: an
// announcer and a receiver. Never sends to 255.255.255.255.
// Sending: every datagram (one per target per round) is encoded afresh with
// our wall time and a new nonce, under options.mac_key. Timestamps strictly
// increase within the instance (by 1 ms where the clock has not moved) so a
// receiver's ordering check never drops our own back-to-back datagrams.
// Receiving, in this order, each refusal counted and logged at a bounded rate:
//   1. oversized, malformed, other version, bad MAC (DecodeAnnouncement;
//      nothing of an unauthenticated body is parsed);
//   2. stale: |wall now - timestamp_ms| > max_clock_skew, or timestamp 0;
//   3. replayed: nonce seen before (internal::ReplayCache, at most 16384
//      nonces, each kept until its timestamp is stale; see there why
//      forgetting one never lets a replay in);
//   4. our own announcement (ignored_self), or our node id from another
//      instance (duplicate id: on_duplicate_id);
//   5. another model fingerprint;
//   6. the peer table's refusals: id pinned to another fingerprint
//      (ignored_id_conflict), not newer than the last of its instance
//      (ignored_reordered), table full.
// It also expires silent peers. Peers enter the table unverified; the daemon
// verifies them (PeerTable::MarkVerified) after a TLS health call.
// Ownership: owns its socket, threads and PeerTable; peers() stays valid for
// the service's lifetime. The table does not contain this node itself.
// Thread-safety: all methods are thread-safe. Start at most once; Stop (also
// run by the destructor) stops and joins both threads within about 250 ms and
// is idempotent. Callbacks run on the receiver thread without locks held.
class DiscoveryService {
 public:
  explicit DiscoveryService(DiscoveryOptions options = {});
  DiscoveryService(const DiscoveryService&) = delete;
  DiscoveryService& operator=(const DiscoveryService&) = delete;
  ~DiscoveryService();

  // Begins announcing `self` and listening. `self.instance_id` 0 is replaced
  // by a random one; `self.timestamp_ms` and `self.nonce` are ignored (set
  // per datagram). InvalidArgument for an invalid announcement or options
  // (including a mac_key that is not 32 bytes, or a non-positive
  // max_clock_skew), FailedPrecondition when already started, the socket
  // error otherwise.
  absl::Status Start(Announcement self);
  void Stop();

  // Changes what we announce (e.g. caps) and announces at once. Keeps the
  // running instance id. InvalidArgument for an invalid announcement or a
  // different node id. A new model fingerprint clears the peer table. A new
  // spki_fingerprint is refused by peers (identity pinning) until our old
  // entry has expired from their tables, about peer_expiry later.
  absl::Status UpdateSelf(Announcement self);

  PeerTable& peers() { return peers_; }
  const PeerTable& peers() const { return peers_; }
  DiscoveryCounters counters() const;
  bool duplicate_id_detected() const;
  // What we announce now (instance id filled in); empty before Start.
  Announcement self() const;
  // The port actually bound (useful with port 0); 0 before Start.
  uint16_t bound_port() const;
  // The destinations of the last announcement round.
  std::vector<std::string> announce_targets() const;

 private:
  void AnnounceLoop();
  void ReceiveLoop();
  // Handles one received datagram; `data` is empty when it was oversized.
  void HandleDatagram(std::string_view data, const UdpSocket::Received& from);
  // Counts and logs a peer table refusal of `a`.
  void IgnoreTableRefusal(const absl::Status& status, const Announcement& a,
                          const UdpSocket::Received& from);
  void Ignore(uint64_t DiscoveryCounters::*counter, std::string_view reason,
              const UdpSocket::Received& from, std::string_view detail);
  absl::StatusOr<std::vector<std::string>> CurrentTargets() const;

  const DiscoveryOptions options_;
  Clock* const clock_;
  PeerTable peers_;

  enum class State { kIdle, kRunning, kStopped };
  absl::Mutex lifecycle_mu_;  // serialises Start/Stop; held while joining
  State state_ ABSL_GUARDED_BY(lifecycle_mu_) = State::kIdle;
  std::thread announcer_ ABSL_GUARDED_BY(lifecycle_mu_);
  std::thread receiver_ ABSL_GUARDED_BY(lifecycle_mu_);
  // Self-pipe that wakes the receiver's poll() on Stop: {read end, write end}.
  int wake_fds_[2] = {-1, -1};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool announce_now_ ABSL_GUARDED_BY(mu_) = false;
  Announcement self_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> targets_ ABSL_GUARDED_BY(mu_);
  uint16_t bound_port_ ABSL_GUARDED_BY(mu_) = 0;
  DiscoveryCounters counters_ ABSL_GUARDED_BY(mu_);
  bool duplicate_id_detected_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<uint64_t> duplicate_instances_ ABSL_GUARDED_BY(mu_);

  // Set by Start before the threads exist, reset by Stop after they are
  // joined; the threads use it unlocked in between.
  std::unique_ptr<UdpSocket> socket_;
  LogRateLimiter warnings_;
  // Used by the receiver thread only (HandleDatagram), so not guarded.
  internal::ReplayCache replay_;
};

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_DISCOVERY_SERVICE_H_
