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
  // The announced identity, pinned to node_id while the entry lives: 0 or 32
  // raw bytes (SHA-256 of the TLS SubjectPublicKeyInfo).
  std::string spki_fingerprint;
  // True once MarkVerified() confirmed that `address` serves
  // `spki_fingerprint` (a TLS health call); false again whenever the address,
  // fingerprint or instance changes. Only verified peers may carry traffic.
  bool verified = false;
  SteadyTime first_seen{};  // when this instance was first seen
  SteadyTime last_seen{};
  // The table's version() right after this entry was added: when the node id
  // joined, or again after it was removed, or when a new instance replaced
  // the old one. An entry with added_version > v was added after the table
  // stood at version v: it is not the entry that was there then.
  uint64_t added_version = 0;

  bool operator==(const PeerInfo&) const = default;
};

// What an Observe() did to the table.
enum class PeerChange {
  kJoined,     // a node id not in the table
  kRefreshed,  // known peer, nothing but last_seen changed
  kUpdated,    // known peer with new caps, address or model fingerprint
  kRestarted,  // known node id with a new instance id
};

// PeerTable: who is out there, with expiry and identity pinning.
//
// Purpose: keeps one entry per node id from announcements, drops peers silent
// for longer than `expiry`, and counts changes in `version()` so the daemon
// can debounce re-partitioning on it.
// Ownership: owns its entries; hands out copies only.
// Thread-safety: all methods are thread-safe.
// Time: every call takes `now` from the caller's Clock, so tests drive expiry
// with a FakeClock. Times must not go backwards across calls.
// Version: bumps when a peer joins, leaves (Expire, Remove, Clear), restarts,
// changes caps, address or model fingerprint, or its `verified` flag changes.
// A refresh does not bump it.
// Identity: the first announcement of a node id pins its spki_fingerprint.
// While that entry lives, an announcement of the id with another fingerprint
// is refused (AlreadyExists), whatever its instance id, so it cannot take the
// id, its address or its caps. Once the entry has expired or was removed the
// id is free again. A new entry, or a change of address or instance, leaves
// the peer unverified until MarkVerified() (the daemon's TLS health call).
// Ordering: within one instance, an announcement whose timestamp_ms is not
// newer than the last one accepted is refused (OutOfRange), so a delayed or
// replayed datagram cannot roll a peer back. timestamp_ms 0 means "not from
// the wire" (e.g. the daemon's static peers) and skips this check.
// Address choice: a node on this host is heard both over loopback and over
// its LAN address; the table prefers a non-loopback sender address over a
// loopback one, and otherwise keeps the current address while it is still
// heard (switching only after half the expiry without it), so two paths to
// one node do not flap the version. An advertised grpc_host always wins.
// Announcements are assumed authenticated and valid (DecodeAnnouncement
// checked them, the service checked freshness); self filtering and
// duplicate-id detection are the caller's job.
class PeerTable {
 public:
  explicit PeerTable(PeerTableOptions options = {});
  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;

  // Adds or refreshes the announcing peer. Errors, and the table unchanged:
  //   InvalidArgument   an invalid node id, a spki_fingerprint that is not 0
  //                     or 32 bytes, or an empty sender_ip without grpc_host;
  //   AlreadyExists     the id is live and pinned to another spki_fingerprint;
  //   OutOfRange        same instance, timestamp_ms not newer than the last
  //                     accepted (both nonzero);
  //   ResourceExhausted the table holds max_peers others and `a` is new.
  absl::StatusOr<PeerChange> Observe(const Announcement& a, std::string sender_ip, SteadyTime now);

  // Marks `node_id` verified if its entry still has exactly this fingerprint
  // and address ("host:port" as in PeerInfo::address); the daemon calls it
  // after a TLS health call to `address` proved the node id and fingerprint.
  // True when the peer is verified afterwards; false (and nothing changed)
  // when the id is absent or its fingerprint or address differ, e.g. because
  // the entry changed while the health call was in flight.
  bool MarkVerified(std::string_view node_id, std::string_view spki_fingerprint,
                    std::string_view address);

  // Removes peers whose last_seen is older than now - expiry; returns them.
  std::vector<PeerInfo> Expire(SteadyTime now);

  // Removes `node_id` (e.g. after a failed health call), which also frees its
  // pinned fingerprint; false if absent. A live peer comes back, unverified,
  // with its next announcement.
  bool Remove(std::string_view node_id);

  // Removes every peer.
  void Clear();

  // The peers, sorted by node id.
  std::vector<PeerInfo> Snapshot() const;
  // The verified peers only, sorted by node id: what the partition may use.
  std::vector<PeerInfo> VerifiedSnapshot() const;
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
    bool host_advertised = false;    // info.host came from grpc_host
    SteadyTime host_last_seen{};     // last packet from info.host
    uint64_t last_timestamp_ms = 0;  // newest accepted timestamp_ms of this instance
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
