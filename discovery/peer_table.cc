#include "discovery/peer_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

bool IsLoopbackHost(std::string_view host) {
  return host.substr(0, 4) == "127." || host == "::1" || host == "localhost";
}

// A short printable form of a fingerprint for messages: 16 hex digits, or
// "none" for an empty one.
std::string ShortFingerprint(std::string_view fp) {
  if (fp.empty()) return "none";
  return absl::BytesToHexString(absl::string_view(fp.data(), std::min<size_t>(fp.size(), 8)));
}

}  // namespace

std::string JoinHostPort(std::string_view host, uint16_t port) {
  const absl::string_view h(host.data(), host.size());  // absl's own string_view here
  if (host.find(':') != std::string_view::npos) return absl::StrCat("[", h, "]:", port);
  return absl::StrCat(h, ":", port);
}

PeerTable::PeerTable(PeerTableOptions options) : options_(options) {}

absl::StatusOr<PeerChange> PeerTable::Observe(const Announcement& a, std::string sender_ip,
                                              SteadyTime now) {
  if (!IsValidNodeId(a.node_id)) {
    return absl::InvalidArgumentError(absl::StrCat("bad node id for peer table: ", a.node_id));
  }
  if (!a.spki_fingerprint.empty() && a.spki_fingerprint.size() != kSpkiFingerprintBytes) {
    return absl::InvalidArgumentError(absl::StrCat("peer ", a.node_id, " has a ",
                                                   a.spki_fingerprint.size(),
                                                   "-byte spki_fingerprint, want 0 or 32"));
  }
  const bool advertised = !a.grpc_host.empty();
  std::string host = advertised ? a.grpc_host : std::move(sender_ip);
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer ", a.node_id, " has neither grpc_host nor a sender address"));
  }

  absl::MutexLock lock(&mu_);
  auto it = peers_.find(a.node_id);
  // See "Identity" in the header: the pin holds whatever the instance id.
  if (it != peers_.end() && it->second.info.spki_fingerprint != a.spki_fingerprint) {
    return absl::AlreadyExistsError(absl::StrCat(
        "node id ", a.node_id, " is held by identity ",
        ShortFingerprint(it->second.info.spki_fingerprint), " at ", it->second.info.address,
        "; refusing an announcement from identity ", ShortFingerprint(a.spki_fingerprint)));
  }
  if (it == peers_.end() || it->second.info.instance_id != a.instance_id) {
    const bool restarted = it != peers_.end();
    if (!restarted && peers_.size() >= options_.max_peers) {
      return absl::ResourceExhaustedError(
          absl::StrCat("peer table full (", options_.max_peers, " peers); ignoring ", a.node_id));
    }
    Entry e;
    e.info.node_id = a.node_id;
    e.info.instance_id = a.instance_id;
    e.info.host = std::move(host);
    e.info.grpc_port = a.grpc_port;
    e.info.address = JoinHostPort(e.info.host, a.grpc_port);
    e.info.model_fingerprint = a.model_fingerprint;
    e.info.caps = a.caps;
    e.info.spki_fingerprint = a.spki_fingerprint;
    e.info.verified = false;
    e.info.first_seen = now;
    e.info.last_seen = now;
    e.host_advertised = advertised;
    e.host_last_seen = now;
    e.last_timestamp_ms = a.timestamp_ms;
    e.info.added_version = ++version_;
    peers_.insert_or_assign(a.node_id, std::move(e));
    return restarted ? PeerChange::kRestarted : PeerChange::kJoined;
  }

  Entry& e = it->second;
  if (a.timestamp_ms != 0 && e.last_timestamp_ms != 0 && a.timestamp_ms <= e.last_timestamp_ms) {
    return absl::OutOfRangeError(
        absl::StrCat("announcement of ", a.node_id, " stamped ", a.timestamp_ms,
                     " ms is not newer than the last one (", e.last_timestamp_ms, " ms)"));
  }
  e.last_timestamp_ms = std::max(e.last_timestamp_ms, a.timestamp_ms);
  bool changed = false;
  e.info.last_seen = now;
  if (host == e.info.host) {
    e.host_last_seen = now;
  } else {
    // See "Address choice" in the header.
    bool take = false;
    if (advertised || e.host_advertised) {
      take = true;  // an advertised host changed, or started/stopped being advertised
    } else if (IsLoopbackHost(e.info.host) != IsLoopbackHost(host)) {
      take = IsLoopbackHost(e.info.host);  // non-loopback beats loopback
    } else {
      take = now - e.host_last_seen > options_.expiry / 2;  // current path went quiet
    }
    if (take) {
      e.info.host = std::move(host);
      e.host_advertised = advertised;
      e.host_last_seen = now;
      changed = true;
    }
  }
  if (a.grpc_port != e.info.grpc_port) {
    e.info.grpc_port = a.grpc_port;
    changed = true;
  }
  if (a.caps != e.info.caps) {
    e.info.caps = a.caps;
    changed = true;
  }
  if (a.model_fingerprint != e.info.model_fingerprint) {
    e.info.model_fingerprint = a.model_fingerprint;
    changed = true;
  }
  if (!changed) return PeerChange::kRefreshed;
  const std::string address = JoinHostPort(e.info.host, e.info.grpc_port);
  if (address != e.info.address) {
    e.info.address = address;
    e.info.verified = false;  // the identity was proved at the old address only
  }
  ++version_;
  return PeerChange::kUpdated;
}

bool PeerTable::MarkVerified(std::string_view node_id, std::string_view spki_fingerprint,
                             std::string_view address) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(node_id);
  if (it == peers_.end()) return false;
  PeerInfo& info = it->second.info;
  if (info.spki_fingerprint != spki_fingerprint || info.address != address) return false;
  if (!info.verified) {
    info.verified = true;
    ++version_;
  }
  return true;
}

std::vector<PeerInfo> PeerTable::Expire(SteadyTime now) {
  std::vector<PeerInfo> gone;
  absl::MutexLock lock(&mu_);
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (now - it->second.info.last_seen > options_.expiry) {
      gone.push_back(std::move(it->second.info));
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
  if (!gone.empty()) ++version_;
  return gone;
}

bool PeerTable::Remove(std::string_view node_id) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(node_id);
  if (it == peers_.end()) return false;
  peers_.erase(it);
  ++version_;
  return true;
}

void PeerTable::Clear() {
  absl::MutexLock lock(&mu_);
  if (peers_.empty()) return;
  peers_.clear();
  ++version_;
}

std::vector<PeerInfo> PeerTable::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<PeerInfo> out;
  out.reserve(peers_.size());
  for (const auto& [id, e] : peers_) out.push_back(e.info);
  return out;
}

std::vector<PeerInfo> PeerTable::VerifiedSnapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<PeerInfo> out;
  for (const auto& [id, e] : peers_) {
    if (e.info.verified) out.push_back(e.info);
  }
  return out;
}

std::optional<PeerInfo> PeerTable::Find(std::string_view node_id) const {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(node_id);
  if (it == peers_.end()) return std::nullopt;
  return it->second.info;
}

size_t PeerTable::size() const {
  absl::MutexLock lock(&mu_);
  return peers_.size();
}

uint64_t PeerTable::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

uint64_t PeerTable::AwaitVersionAbove(uint64_t seen, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto above = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ > seen; };
  mu_.AwaitWithTimeout(absl::Condition(&above), timeout);
  return version_;
}

}  // namespace ringlm
