#include "discovery/discovery_service.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "discovery/node_identity.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr std::string_view kLoopbackBroadcast = "127.255.255.255";
// How often the announcer re-reads the interfaces' broadcast addresses.
constexpr auto kTargetRefreshInterval = std::chrono::seconds(10);
// Datagrams drained per wake-up before checking for Stop and expiry again.
constexpr int kMaxDatagramsPerWake = 64;

absl::Duration ToAbsl(steady_clock::duration d) { return absl::FromChrono(d); }

// The timestamp of our next datagram: the wall time, but strictly after the
// previous one so receivers' per-instance ordering check does not drop our
// own datagrams sent in the same millisecond (one per target). Never more
// than 1 s ahead of the wall clock, so a clock stepped back does not leave us
// stamping the future (receivers would then refuse us as stale); after such a
// step receivers refuse us as reordered until our entry expires and restarts.
uint64_t NextTimestamp(uint64_t now_ms, uint64_t last_ms) {
  if (now_ms > last_ms) return now_ms;
  if (last_ms - now_ms < 1000) return last_ms + 1;
  return now_ms;
}

// |a - b| without overflow.
uint64_t AbsDiff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

// " (N similar suppressed)" when N > 0, for rate-limited log lines.
std::string Suppressed(uint64_t n) {
  return n == 0 ? std::string() : absl::StrCat(" (", n, " similar suppressed)");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ComputeAnnounceTargets(
    const DiscoveryOptions& options, const std::vector<std::string>& interface_broadcasts) {
  std::vector<std::string> targets;
  if (options.broadcast) {
    targets.emplace_back(kLoopbackBroadcast);
    if (!options.loopback_only) {
      for (const std::string& b : interface_broadcasts) {
        std::optional<in_addr> ip = ParseIpv4(b);
        // Defence in depth: InterfaceBroadcastAddresses already drops these.
        if (!ip || ip->s_addr == INADDR_BROADCAST || IsLoopbackIpv4(b)) continue;
        targets.push_back(b);
      }
    }
  }
  for (const std::string& extra : options.extra_broadcast_addresses) {
    std::optional<in_addr> ip = ParseIpv4(extra);
    if (!ip) {
      return absl::InvalidArgumentError(
          absl::StrCat("extra broadcast address \"", extra, "\" is not an IPv4 address"));
    }
    if (ip->s_addr == INADDR_BROADCAST) {
      return absl::InvalidArgumentError(
          "extra broadcast address 255.255.255.255 is not allowed: it leaves through an "
          "arbitrary interface; use the interface's directed broadcast address");
    }
    if (options.loopback_only && !IsLoopbackIpv4(extra)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extra broadcast address ", extra, " is not in 127.0.0.0/8 but loopback_only is set"));
    }
    targets.push_back(extra);
  }
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  return targets;
}

DiscoveryService::DiscoveryService(DiscoveryOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      peers_(PeerTableOptions{.expiry = options_.peer_expiry, .max_peers = options_.max_peers}),
      warnings_(options_.warning_interval),
      replay_(options_.max_clock_skew) {}

DiscoveryService::~DiscoveryService() { Stop(); }

absl::StatusOr<std::vector<std::string>> DiscoveryService::CurrentTargets() const {
  const bool scan = options_.broadcast && !options_.loopback_only;
  return ComputeAnnounceTargets(options_,
                                scan ? InterfaceBroadcastAddresses() : std::vector<std::string>{});
}

absl::Status DiscoveryService::Start(Announcement self) {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (state_ != State::kIdle) {
    return absl::FailedPreconditionError("DiscoveryService::Start called twice");
  }
  if (options_.announce_interval <= milliseconds(0) || options_.peer_expiry <= milliseconds(0) ||
      options_.max_clock_skew <= milliseconds(0)) {
    return absl::InvalidArgumentError(
        "announce_interval, peer_expiry and max_clock_skew must be positive");
  }
  if (options_.mac_key.size() != kAnnouncementMacKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("discovery mac_key is ", options_.mac_key.size(), " bytes, want ",
                     kAnnouncementMacKeyBytes, " (DeriveAnnouncementMacKey of the cluster key)"));
  }
  if (self.instance_id == 0) self.instance_id = RandomU64();
  if (absl::Status s = ValidateAnnouncement(self); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> targets = CurrentTargets();
  if (!targets.ok()) return targets.status();

  absl::StatusOr<UdpSocket> sock = UdpSocket::BindAny(options_.port);
  if (!sock.ok()) return sock.status();
  absl::StatusOr<uint16_t> port = sock->LocalPort();
  if (!port.ok()) return port.status();
  if (pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::ErrnoToStatus(errno, "pipe2 for the discovery receiver");
  }
  socket_ = std::make_unique<UdpSocket>(*std::move(sock));
  {
    absl::MutexLock lock(&mu_);
    self.timestamp_ms = 0;
    self.nonce.clear();
    self_ = std::move(self);
    targets_ = *std::move(targets);
    bound_port_ = *port;
    if (options_.listen_only) {
      spdlog::info("discovery: {} listening on UDP port {} for the cluster's members",
                   self_.node_id, bound_port_);
    } else {
      spdlog::info("discovery: {} (instance {:016x}) on UDP port {}, announcing to {} every {} ms",
                   self_.node_id, self_.instance_id, bound_port_,
                   targets_.empty() ? std::string("nobody") : absl::StrJoin(targets_, ", "),
                   options_.announce_interval.count());
    }
  }
  state_ = State::kRunning;
  receiver_ = std::thread([this] { ReceiveLoop(); });
  if (!options_.listen_only) announcer_ = std::thread([this] { AnnounceLoop(); });
  return absl::OkStatus();
}

void DiscoveryService::Stop() {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (state_ != State::kRunning) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  const char byte = 1;
  while (write(wake_fds_[1], &byte, 1) < 0 && errno == EINTR) {
  }
  if (announcer_.joinable()) announcer_.join();
  receiver_.join();
  socket_.reset();
  close(wake_fds_[0]);
  close(wake_fds_[1]);
  wake_fds_[0] = wake_fds_[1] = -1;
  state_ = State::kStopped;
}

absl::Status DiscoveryService::UpdateSelf(Announcement self) {
  bool clear_peers = false;
  {
    absl::MutexLock lock(&mu_);
    if (self_.node_id.empty()) {
      return absl::FailedPreconditionError("DiscoveryService::UpdateSelf before Start");
    }
    if (self.node_id != self_.node_id) {
      return absl::InvalidArgumentError(absl::StrCat("UpdateSelf cannot change the node id from ",
                                                     self_.node_id, " to ", self.node_id));
    }
    self.instance_id = self_.instance_id;
    if (absl::Status s = ValidateAnnouncement(self); !s.ok()) return s;
    clear_peers = self.model_fingerprint != self_.model_fingerprint;
    self.timestamp_ms = 0;
    self.nonce.clear();
    self_ = std::move(self);
    announce_now_ = true;
  }
  // Peers of the old model are not peers of the new one.
  if (clear_peers) peers_.Clear();
  return absl::OkStatus();
}

DiscoveryCounters DiscoveryService::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

bool DiscoveryService::duplicate_id_detected() const {
  absl::MutexLock lock(&mu_);
  return duplicate_id_detected_;
}

Announcement DiscoveryService::self() const {
  absl::MutexLock lock(&mu_);
  return self_;
}

uint16_t DiscoveryService::bound_port() const {
  absl::MutexLock lock(&mu_);
  return bound_port_;
}

std::vector<std::string> DiscoveryService::announce_targets() const {
  absl::MutexLock lock(&mu_);
  return targets_;
}

void DiscoveryService::AnnounceLoop() {
  auto next_refresh = steady_clock::now() + kTargetRefreshInterval;
  uint64_t last_timestamp_ms = 0;
  while (true) {
    Announcement self;
    std::vector<std::string> targets;
    uint16_t port = 0;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      announce_now_ = false;
      self = self_;
      targets = targets_;
      port = bound_port_;
    }
    uint64_t sent = 0, errors = 0;
    for (const std::string& target : targets) {
      // A fresh timestamp and nonce per datagram: a receiver hearing us on
      // two paths must not take the second copy for a replay.
      self.timestamp_ms = NextTimestamp(UnixMillis(clock_->WallNow()), last_timestamp_ms);
      last_timestamp_ms = self.timestamp_ms;
      const std::string datagram = EncodeAnnouncement(self, options_.mac_key);
      absl::Status s = socket_->SendTo(datagram, target, port);
      if (s.ok()) {
        ++sent;
        continue;
      }
      ++errors;
      uint64_t suppressed = 0;
      if (warnings_.Allow(absl::StrCat("send ", target), steady_clock::now(), &suppressed)) {
        spdlog::warn("discovery: announcing to {}:{} failed: {}{}", target, port, s.ToString(),
                     Suppressed(suppressed));
      }
    }

    absl::MutexLock lock(&mu_);
    counters_.sent += sent;
    counters_.send_errors += errors;
    auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || announce_now_; };
    mu_.AwaitWithTimeout(absl::Condition(&wake), ToAbsl(options_.announce_interval));
    if (stopping_) return;
    if (steady_clock::now() >= next_refresh) {
      // Interfaces come and go (DHCP, Wi-Fi); getifaddrs runs unlocked.
      mu_.Unlock();
      absl::StatusOr<std::vector<std::string>> fresh = CurrentTargets();
      mu_.Lock();
      if (fresh.ok()) targets_ = *std::move(fresh);
      next_refresh = steady_clock::now() + kTargetRefreshInterval;
    }
  }
}

void DiscoveryService::ReceiveLoop() {
  // Expiry runs a few times per peer_expiry, but at least every 250 ms.
  const steady_clock::duration check_every = std::clamp<steady_clock::duration>(
      options_.peer_expiry / 4, milliseconds(10), milliseconds(250));
  auto next_expire = steady_clock::now() + check_every;
  // MSG_TRUNC reports the real size of a larger datagram, so one byte more
  // than the limit is enough to tell an oversized one apart.
  std::string buf(kMaxAnnouncementBytes + 1, '\0');
  pollfd fds[2] = {{socket_->fd(), POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
  while (true) {
    const auto wait = std::chrono::duration_cast<milliseconds>(next_expire - steady_clock::now());
    const int rc = poll(fds, 2, static_cast<int>(std::max<int64_t>(wait.count(), 0)) + 1);
    if (rc < 0 && errno != EINTR) {
      spdlog::error("discovery: poll failed: {}", absl::ErrnoToStatus(errno, "poll").ToString());
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (rc > 0 && fds[1].revents != 0) return;  // Stop()
    if (rc > 0 && fds[0].revents != 0) {
      for (int i = 0; i < kMaxDatagramsPerWake; ++i) {
        absl::StatusOr<std::optional<UdpSocket::Received>> r =
            socket_->Receive(buf.data(), buf.size());
        if (!r.ok()) {
          uint64_t suppressed = 0;
          if (warnings_.Allow("recv", steady_clock::now(), &suppressed)) {
            spdlog::warn("discovery: {}{}", r.status().ToString(), Suppressed(suppressed));
          }
          break;
        }
        if (!r->has_value()) break;
        const UdpSocket::Received& from = **r;
        HandleDatagram(from.size > kMaxAnnouncementBytes ? std::string_view()
                                                         : std::string_view(buf.data(), from.size),
                       from);
      }
    }
    if (steady_clock::now() >= next_expire) {
      for (const PeerInfo& gone : peers_.Expire(clock_->Now())) {
        spdlog::info("discovery: peer {} at {} left (silent for more than {} ms)", gone.node_id,
                     gone.address, options_.peer_expiry.count());
      }
      next_expire = steady_clock::now() + check_every;
    }
  }
}

void DiscoveryService::Ignore(uint64_t DiscoveryCounters::*counter, std::string_view reason,
                              const UdpSocket::Received& from, std::string_view detail) {
  {
    absl::MutexLock lock(&mu_);
    ++(counters_.*counter);
  }
  uint64_t suppressed = 0;
  if (warnings_.Allow(reason, steady_clock::now(), &suppressed)) {
    spdlog::warn("discovery: ignoring {}-byte datagram from {}:{}: {}{}", from.size, from.sender_ip,
                 from.sender_port, detail, Suppressed(suppressed));
  }
}

void DiscoveryService::IgnoreTableRefusal(const absl::Status& status, const Announcement& a,
                                          const UdpSocket::Received& from) {
  switch (status.code()) {
    case absl::StatusCode::kAlreadyExists:
      Ignore(&DiscoveryCounters::ignored_id_conflict, "id conflict", from,
             absl::StrCat(status.message(),
                          " (a second announcer of a live id: a misconfigured copy of a state "
                          "dir, or an impostor)"));
      return;
    case absl::StatusCode::kOutOfRange:
      Ignore(&DiscoveryCounters::ignored_reordered, "reordered", from,
             std::string(status.message()));
      return;
    case absl::StatusCode::kResourceExhausted:
      Ignore(&DiscoveryCounters::ignored_table_full, "table", from, std::string(status.message()));
      return;
    default:
      Ignore(&DiscoveryCounters::ignored_malformed, "malformed", from,
             absl::StrCat("peer ", a.node_id, ": ", status.message()));
      return;
  }
}

void DiscoveryService::HandleDatagram(std::string_view data, const UdpSocket::Received& from) {
  Announcement self;
  {
    absl::MutexLock lock(&mu_);
    ++counters_.received;
    self.node_id = self_.node_id;
    self.instance_id = self_.instance_id;
    self.model_fingerprint = self_.model_fingerprint;
  }
  if (from.size > kMaxAnnouncementBytes) {
    Ignore(&DiscoveryCounters::ignored_oversized, "oversized", from,
           absl::StrCat("larger than ", kMaxAnnouncementBytes, " bytes"));
    return;
  }
  DecodeFailure failure = DecodeFailure::kNone;
  absl::StatusOr<Announcement> a = DecodeAnnouncement(data, options_.mac_key, &failure);
  if (!a.ok()) {
    switch (failure) {
      case DecodeFailure::kBadMac:
        Ignore(&DiscoveryCounters::ignored_bad_mac, "mac", from, a.status().ToString());
        break;
      case DecodeFailure::kOtherVersion:
        Ignore(&DiscoveryCounters::ignored_other_version, "version", from, a.status().ToString());
        break;
      case DecodeFailure::kTooLong:
        Ignore(&DiscoveryCounters::ignored_oversized, "oversized", from, a.status().ToString());
        break;
      default:
        Ignore(&DiscoveryCounters::ignored_malformed, "malformed", from, a.status().ToString());
        break;
    }
    return;
  }

  // Authenticated from here on, but maybe old: check freshness.
  const uint64_t now_ms = UnixMillis(clock_->WallNow());
  const uint64_t skew_ms = static_cast<uint64_t>(options_.max_clock_skew.count());
  // timestamp 0 is always stale: the peer table reads it as "not from the
  // wire" and skips its ordering check, so none may come from the wire.
  if (a->timestamp_ms == 0 || AbsDiff(a->timestamp_ms, now_ms) > skew_ms) {
    Ignore(&DiscoveryCounters::ignored_stale, "stale", from,
           absl::StrCat("announcement of ", a->node_id, " is stamped ",
                        AbsDiff(a->timestamp_ms, now_ms), " ms ",
                        a->timestamp_ms > now_ms ? "ahead of" : "behind",
                        " our clock, more than max_clock_skew ", skew_ms,
                        " ms (a replay, or clocks out of sync: check NTP)"));
    return;
  }
  switch (replay_.Admit(a->nonce, a->timestamp_ms, now_ms)) {
    case internal::ReplayCache::Verdict::kFresh:
      break;
    case internal::ReplayCache::Verdict::kReplayed:
      Ignore(&DiscoveryCounters::ignored_replayed, "replay", from,
             absl::StrCat("announcement of ", a->node_id, " was received before (a replay)"));
      return;
    case internal::ReplayCache::Verdict::kTooOld:
      Ignore(&DiscoveryCounters::ignored_replayed, "replay", from,
             absl::StrCat("announcement of ", a->node_id,
                          " is older than the replay cache remembers (flooded?)"));
      return;
  }

  if (a->node_id == self.node_id) {
    if (a->instance_id == self.instance_id) {
      absl::MutexLock lock(&mu_);
      ++counters_.ignored_self;
      return;
    }
    DuplicateIdEvent event{.node_id = self.node_id,
                           .our_instance_id = self.instance_id,
                           .other_instance_id = a->instance_id,
                           .other_address = absl::StrCat(from.sender_ip, ":", from.sender_port)};
    bool first_for_instance = false;
    {
      absl::MutexLock lock(&mu_);
      ++counters_.ignored_duplicate_id;
      duplicate_id_detected_ = true;
      auto& seen = duplicate_instances_;
      if (std::find(seen.begin(), seen.end(), a->instance_id) == seen.end() && seen.size() < 64) {
        seen.push_back(a->instance_id);
        first_for_instance = true;
      }
    }
    uint64_t suppressed = 0;
    if (first_for_instance || warnings_.Allow("duplicate id", steady_clock::now(), &suppressed)) {
      spdlog::error(
          "discovery: duplicate node id \"{}\": another process at {} (instance {:016x}, ours "
          "{:016x}) announces it too; give one of them another id (delete its state dir's "
          "node_id){}",
          event.node_id, event.other_address, event.other_instance_id, event.our_instance_id,
          Suppressed(suppressed));
    }
    if (first_for_instance && options_.on_duplicate_id) options_.on_duplicate_id(event);
    return;
  }

  if (!options_.listen_only && a->model_fingerprint != self.model_fingerprint) {
    Ignore(
        &DiscoveryCounters::ignored_other_model, "model", from,
        absl::StrCat("node ", a->node_id, " runs model \"", absl::CHexEscape(a->model_fingerprint),
                     "\", we run \"", absl::CHexEscape(self.model_fingerprint), "\""));
    return;
  }

  absl::StatusOr<PeerChange> change = peers_.Observe(*a, from.sender_ip, clock_->Now());
  if (!change.ok()) {
    IgnoreTableRefusal(change.status(), *a, from);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    ++counters_.accepted;
  }
  if (*change == PeerChange::kRefreshed) return;
  const std::optional<PeerInfo> peer = peers_.Find(a->node_id);
  if (!peer) return;  // removed concurrently
  const char* what = *change == PeerChange::kJoined      ? "joined"
                     : *change == PeerChange::kRestarted ? "restarted"
                                                         : "changed";
  const std::string identity =
      peer->spki_fingerprint.empty()
          ? std::string("none")
          : absl::BytesToHexString(absl::string_view(peer->spki_fingerprint).substr(0, 8));
  spdlog::info(
      "discovery: peer {} {} at {} ({} MiB usable, {} threads, {:.1f} GFLOP/s, identity {}, "
      "{})",
      peer->node_id, what, peer->address, peer->caps.usable_memory_bytes >> 20, peer->caps.threads,
      peer->caps.matmul_gflops, identity, peer->verified ? "verified" : "not yet verified");
}

}  // namespace ringlm
