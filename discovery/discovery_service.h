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
#include "discovery/announcement.h"
#include "discovery/clock.h"
#include "discovery/internal/log_rate_limiter.h"
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
  // At most one warning line per kind of ignored packet per this interval.
  std::chrono::milliseconds warning_interval{10000};
  // Time source for the peer table (last_seen, expiry). Not owned; must
  // outlive the service. nullptr = SystemClock.
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
  uint64_t ignored_bad_checksum = 0;
  uint64_t ignored_other_version = 0;
  uint64_t ignored_other_model = 0;
  uint64_t ignored_duplicate_id = 0;
  uint64_t ignored_table_full = 0;

  uint64_t ignored() const {
    return ignored_self + ignored_malformed + ignored_oversized + ignored_bad_checksum +
           ignored_other_version + ignored_other_model + ignored_duplicate_id + ignored_table_full;
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
// announcer and a receiver. The receiver ignores our own packets, ignores and
// counts garbage, oversized, corrupt, other-version and other-model packets
// (with rate-limited warnings), detects another process using our node id,
// and expires silent peers. Never sends to 255.255.255.255.
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
  // by a random one. InvalidArgument for an invalid announcement or options,
  // FailedPrecondition when already started, the socket error otherwise.
  absl::Status Start(Announcement self);
  void Stop();

  // Changes what we announce (e.g. caps) and announces at once. Keeps the
  // running instance id. InvalidArgument for an invalid announcement or a
  // different node id. A new model fingerprint clears the peer table.
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
  std::string self_datagram_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> targets_ ABSL_GUARDED_BY(mu_);
  uint16_t bound_port_ ABSL_GUARDED_BY(mu_) = 0;
  DiscoveryCounters counters_ ABSL_GUARDED_BY(mu_);
  bool duplicate_id_detected_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<uint64_t> duplicate_instances_ ABSL_GUARDED_BY(mu_);

  // Set by Start before the threads exist, reset by Stop after they are
  // joined; the threads use it unlocked in between.
  std::unique_ptr<UdpSocket> socket_;
  internal::LogRateLimiter warnings_;
};

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_DISCOVERY_SERVICE_H_
