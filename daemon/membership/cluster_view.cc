#include "daemon/membership/cluster_view.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "daemon/rpc/proto_convert.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

constexpr auto kTick = std::chrono::milliseconds(100);
// Node ids whose last ReportUnreachable the view remembers: more than a
// cluster has members, so only ids long gone are forgotten.
constexpr size_t kMaxReported = 256;

// "host:port" -> host ("[v6]:port" -> v6).
std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace

ClusterView::ClusterView(ClusterOptions options, NodeDescriptor self, ModelFootprint footprint,
                         std::string model_fingerprint, DiscoveryService* discovery,
                         PeerClient* client,
                         std::function<void(std::shared_ptr<const ClusterSnapshot>)> on_change)
    : options_(std::move(options)),
      self_(std::move(self)),
      footprint_(footprint),
      fingerprint_(std::move(model_fingerprint)),
      discovery_(discovery),
      client_(client),
      on_change_(std::move(on_change)) {
  auto initial = std::make_shared<ClusterSnapshot>();
  initial->status = absl::UnavailableError("the cluster is still forming");
  current_ = initial;
}

ClusterView::~ClusterView() { Stop(); }

void ClusterView::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void ClusterView::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const ClusterSnapshot> ClusterView::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

std::optional<std::string> ClusterView::AddressOf(const std::string& node_id) const {
  if (node_id == self_.node_id) return self_.address;
  std::optional<PeerInfo> peer = discovery_->peers().Find(node_id);
  if (peer && peer->verified) return peer->address;
  return std::nullopt;
}

bool ClusterView::IsMember(const std::string& node_id) const {
  if (node_id == self_.node_id) return true;
  std::optional<PeerInfo> peer = discovery_->peers().Find(node_id);
  return peer.has_value() && peer->verified;
}

bool ClusterView::Converged() const {
  // A member whose last good health call is older than this is suspect.
  const auto stale = 3 * options_.health_interval + std::chrono::seconds(1);
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  if (!current_->has_plan() || applied_ != current_->partition_key) return false;
  for (const Stage& st : current_->partition.stages) {
    if (st.node_id == self_.node_id) continue;
    auto it = peer_health_.find(st.node_id);
    if (it == peer_health_.end() || it->second.partition != current_->partition_key ||
        now - it->second.at > stale) {
      return false;
    }
  }
  return true;
}

void ClusterView::MarkApplied(const std::string& partition_key) {
  absl::MutexLock lock(&mu_);
  applied_ = partition_key;
}

std::string ClusterView::applied_partition() const {
  absl::MutexLock lock(&mu_);
  return applied_;
}

void ClusterView::ReportUnreachable(const std::string& node_id) {
  PeerTable& table = discovery_->peers();
  std::optional<PeerInfo> peer = table.Find(node_id);
  // Read before Remove: whatever entry of the id is there now (the one
  // reported, or one added meanwhile) has added_version <= this and goes;
  // any entry added after the removal is above it.
  const uint64_t version = table.version();
  if (table.Remove(node_id)) {
    spdlog::warn("peer {} is unreachable; removed from the peer table", node_id);
  }
  {
    absl::MutexLock lock(&mu_);
    // max: of two reports racing, the later read holds.
    uint64_t& reported = reported_[node_id];
    reported = std::max(reported, version);
    if (reported_.size() > kMaxReported) {
      auto oldest =
          std::min_element(reported_.begin(), reported_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      reported_.erase(oldest);
    }
  }
  if (peer.has_value()) client_->CancelCallsTo(peer->address);
}

bool ClusterView::BackSinceReported(const ClusterSnapshot& snapshot,
                                    const std::string& node_id) const {
  uint64_t reported_at = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = reported_.find(node_id);
    if (it == reported_.end()) return false;
    reported_at = it->second;
  }
  // snapshot.peers holds verified entries only.
  for (const PeerInfo& p : snapshot.peers) {
    if (p.node_id == node_id) return p.added_version > reported_at;
  }
  return false;
}

void ClusterView::PollHealth() {
  PeerTable& table = discovery_->peers();
  // Static peers: a healthy, authenticated reply is as good as an announcement.
  for (const std::string& address : options_.static_peers) {
    v1::HealthReply reply;
    std::string spki;
    if (!client_->Health(address, &reply, &spki).ok()) continue;
    if (reply.node_id() == self_.node_id) continue;
    if (reply.model_fingerprint() != fingerprint_) {
      if (warnings_.Allow(address)) {
        spdlog::warn("static peer {} runs another model ({}); ignored", address,
                     reply.model_fingerprint());
      }
      continue;
    }
    Announcement a;
    a.node_id = reply.node_id();
    a.instance_id = reply.instance_id();
    a.grpc_port = static_cast<uint16_t>(reply.grpc_port());
    a.model_fingerprint = reply.model_fingerprint();
    a.caps = CapabilitiesFromProto(reply.capabilities());
    a.grpc_host = HostOf(address);
    a.spki_fingerprint = spki;
    (void)table.Observe(a, a.grpc_host, std::chrono::steady_clock::now());
  }
  // Every known peer, proven or not: a good answer from the announced
  // identity proves it; a failed call removes it at once.
  std::set<std::string> addresses(options_.static_peers.begin(), options_.static_peers.end());
  for (const PeerInfo& peer : table.Snapshot()) {
    addresses.insert(peer.address);
    v1::HealthReply reply;
    std::string spki;
    absl::Status s = client_->Health(peer.address, &reply, &spki);
    if (s.ok() && reply.node_id() != peer.node_id) {
      s = absl::PermissionDeniedError(absl::StrCat("it answers as ", reply.node_id()));
    } else if (s.ok() && spki != peer.spki_fingerprint) {
      s = absl::PermissionDeniedError("its certificate is not the one it announced");
    }
    if (!s.ok()) {
      if (warnings_.Allow(peer.node_id)) {
        spdlog::warn("health call to {} at {} failed: {}", peer.node_id, peer.address,
                     s.ToString());
      }
      table.Remove(peer.node_id);
      client_->CancelCallsTo(peer.address);
      continue;
    }
    if (!peer.verified && table.MarkVerified(peer.node_id, spki, peer.address)) {
      spdlog::info("peer {} at {} proved its identity", peer.node_id, peer.address);
    }
    absl::MutexLock lock(&mu_);
    peer_health_[peer.node_id] = PeerHealth{reply.partition(), std::chrono::steady_clock::now()};
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto it = peer_health_.begin(); it != peer_health_.end();) {
      it = table.Find(it->first).has_value() ? std::next(it) : peer_health_.erase(it);
    }
  }
  client_->Retain(addresses);  // channels to forgotten peers close
}

void ClusterView::Recompute() {
  auto next = std::make_shared<ClusterSnapshot>();
  next->peers = discovery_->peers().VerifiedSnapshot();
  std::vector<NodeDescriptor> nodes = {self_};
  for (const PeerInfo& p : next->peers) nodes.push_back({p.node_id, p.address, p.caps});
  absl::StatusOr<Partition> partition = PartitionLayers(nodes, footprint_);
  {
    absl::MutexLock lock(&mu_);
    next->epoch = current_->epoch + 1;
  }
  if (partition.ok()) {
    next->partition = *partition;
    for (const Stage& st : partition->stages) {
      absl::StrAppend(&next->partition_key, next->partition_key.empty() ? "" : " ", st.node_id, "[",
                      st.first_layer, ",", st.last_layer, ")");
    }
    next->plan = PlanToProto(*partition, next->epoch, fingerprint_, footprint_.n_layers);
    for (v1::PlanStage& stage : *next->plan.mutable_stages()) {
      for (const PeerInfo& p : next->peers) {
        if (p.node_id == stage.node_id()) stage.set_instance_id(p.instance_id);
      }
    }
    spdlog::info("partition epoch {}: {}", next->epoch, DescribePartition(*partition));
  } else {
    next->status = partition.status();
    spdlog::error("no partition with {} node(s): {}", nodes.size(), partition.status().ToString());
  }
  // Apply first (take the new layer range), then publish: whoever sees the
  // new plan in current() may rely on this node holding its share.
  on_change_(next);
  {
    absl::MutexLock lock(&mu_);
    current_ = next;
  }
}

void ClusterView::Loop() {
  uint64_t seen_version = 0;
  bool first = true;
  const auto started = std::chrono::steady_clock::now();
  auto changed_at = started;
  auto next_health = changed_at;
  bool dirty = true;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(kTick))) return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_health) {
      PollHealth();
      next_health = now + options_.health_interval;
    }
    const uint64_t version = discovery_->peers().version();
    if (first || version != seen_version) {
      seen_version = version;
      changed_at = std::chrono::steady_clock::now();
      dirty = true;
      first = false;
    }
    const bool settled =
        std::chrono::steady_clock::now() - changed_at >= options_.repartition_debounce &&
        std::chrono::steady_clock::now() - started >= options_.first_partition_delay;
    if (dirty && settled) {
      dirty = false;
      Recompute();
    }
  }
}

}  // namespace ringlm
