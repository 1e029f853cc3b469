#include "daemon/cluster_view.h"

#include "absl/strings/str_cat.h"
#include "daemon/proto_convert.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

constexpr auto kTick = std::chrono::milliseconds(100);

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
  if (std::optional<PeerInfo> peer = discovery_->peers().Find(node_id)) return peer->address;
  return std::nullopt;
}

bool ClusterView::Converged() const {
  absl::MutexLock lock(&mu_);
  if (!current_->has_plan()) return false;
  for (const Stage& st : current_->partition.stages) {
    if (st.node_id == self_.node_id) continue;
    auto it = peer_partitions_.find(st.node_id);
    if (it == peer_partitions_.end() || it->second != current_->partition_key) return false;
  }
  return true;
}

void ClusterView::ReportUnreachable(const std::string& node_id) {
  if (discovery_->peers().Remove(node_id)) {
    spdlog::warn("peer {} is unreachable; removed from the peer table", node_id);
  }
}

void ClusterView::PollHealth() {
  // Static peers: a healthy reply is as good as an announcement.
  for (const std::string& address : options_.static_peers) {
    v1::HealthReply reply;
    if (!client_->Health(address, &reply).ok()) continue;
    if (reply.node_id() == self_.node_id) continue;
    if (reply.model_fingerprint() != fingerprint_) {
      spdlog::warn("static peer {} runs another model ({}); ignored", address,
                   reply.model_fingerprint());
      continue;
    }
    Announcement a;
    a.node_id = reply.node_id();
    a.instance_id = reply.instance_id();
    a.grpc_port = static_cast<uint16_t>(reply.grpc_port());
    a.model_fingerprint = reply.model_fingerprint();
    a.caps = CapabilitiesFromProto(reply.capabilities());
    a.grpc_host = HostOf(address);
    (void)discovery_->peers().Observe(a, a.grpc_host, std::chrono::steady_clock::now());
  }
  // Every known peer: a failed health call removes it at once.
  for (const PeerInfo& peer : discovery_->peers().Snapshot()) {
    v1::HealthReply reply;
    absl::Status s = client_->Health(peer.address, &reply);
    if (s.ok() && reply.node_id() == peer.node_id) {
      absl::MutexLock lock(&mu_);
      peer_partitions_[peer.node_id] = reply.partition();
    }
    if (!s.ok() || reply.node_id() != peer.node_id) {
      spdlog::warn("health call to {} at {} failed: {}", peer.node_id, peer.address,
                   s.ok() ? "it answers as " + reply.node_id() : s.ToString());
      discovery_->peers().Remove(peer.node_id);
    }
  }
}

void ClusterView::Recompute() {
  auto next = std::make_shared<ClusterSnapshot>();
  next->peers = discovery_->peers().Snapshot();
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
