// The set of live peers as seen through discovery announcements.
#ifndef RINGLM_DISCOVERY_PEER_TABLE_H_
#define RINGLM_DISCOVERY_PEER_TABLE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "discovery/announcement.h"
#include "discovery/clock.h"
#include "partition/capabilities.h"

namespace ringlm {

struct PeerTableOptions {
  // A peer not heard from for longer than this is dropped by Expire().
  std::chrono::milliseconds expiry{5000};
  // Bound on the table, since announcements are untrusted input.
  size_t max_peers = 256;
};

// One peer, by value.
struct PeerInfo {
  std::string node_id;
  uint64_t instance_id = 0;
  std::string host;  // advertised grpc_host, else the sender's IP
  uint16_t grpc_port = 0;
  std::string address;  // "host:port" ("[v6]:port" when host holds a ':')
  std::string model_fingerprint;
  DeviceCapabilities caps;
  SteadyTime first_seen{};  // when this instance was first seen
  SteadyTime last_seen{};

  bool operator==(const PeerInfo&) const = default;
};

// What an Observe() did to the table.
enum class PeerChange {
  kJoined,     // a node id not in the table
  kRefreshed,  // known peer, nothing but last_seen changed
  kUpdated,    // known peer with new caps, address or fingerprint
  kRestarted,  // known node id with a new instance id
};

// PeerTable: who is out there, with expiry.
//
// Purpose: keeps one entry per node id from announcements, drops peers silent
// for longer than `expiry`, and counts changes in `version()` so the daemon
// can debounce re-partitioning on it.
// Ownership: owns its entries; hands out copies only.
// Thread-safety: all methods are thread-safe.
// Time: every call takes `now` from the caller's Clock, so tests drive expiry
// with a FakeClock. Times must not go backwards across calls.
// Version: bumps when a peer joins, leaves (Expire, Remove, Clear), restarts,
// or changes caps, address or model fingerprint. A refresh does not bump it.
// Address choice: a node on this host is heard both over loopback and over
// its LAN address; the table prefers a non-loopback sender address over a
// loopback one, and otherwise keeps the current address while it is still
// heard (switching only after half the expiry without it), so two paths to
// one node do not flap the version. An advertised grpc_host always wins.
// Announcements are assumed valid (DecodeAnnouncement checked them); self
// filtering and duplicate-id detection are the caller's job.
class PeerTable {
 public:
  explicit PeerTable(PeerTableOptions options = {});
  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;

  // Adds or refreshes the announcing peer. ResourceExhausted when the table
  // holds max_peers others and `a` is new; InvalidArgument for an invalid
  // node id or an empty sender_ip without a grpc_host.
  absl::StatusOr<PeerChange> Observe(const Announcement& a, std::string sender_ip, SteadyTime now);

  // Removes peers whose last_seen is older than now - expiry; returns them.
  std::vector<PeerInfo> Expire(SteadyTime now);

  // Removes `node_id` (e.g. after a failed health call); false if absent. A
  // live peer comes back with its next announcement.
  bool Remove(std::string_view node_id);

  // Removes every peer.
  void Clear();

  // The peers, sorted by node id.
  std::vector<PeerInfo> Snapshot() const;
  std::optional<PeerInfo> Find(std::string_view node_id) const;
  size_t size() const;
  uint64_t version() const;

  // Blocks until version() > `seen` or `timeout` passes (real time); returns
  // the version then.
  uint64_t AwaitVersionAbove(uint64_t seen, absl::Duration timeout) const;

  std::chrono::milliseconds expiry() const { return options_.expiry; }

 private:
  struct Entry {
    PeerInfo info;
    bool host_advertised = false;  // info.host came from grpc_host
    SteadyTime host_last_seen{};   // last packet from info.host
  };

  const PeerTableOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> peers_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

// "host:port", bracketing an IPv6 host.
std::string JoinHostPort(std::string_view host, uint16_t port);

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_PEER_TABLE_H_
