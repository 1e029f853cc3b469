// This node's layer range: taking the one each partition gives it, after
// fetching its tensors when the node holds only a partial copy of the model.
#ifndef RINGLM_DAEMON_LAYER_RANGE_KEEPER_H_
#define RINGLM_DAEMON_LAYER_RANGE_KEEPER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/membership/cluster_view.h"
#include "daemon/model_fetch/layer_fetcher.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/stage/stage_runtime.h"
#include "inference/model.h"
#include "model_store/model_cache.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// What a LayerRangeKeeper works with. Pointers are borrowed and must
// outlive it.
struct LayerRangeKeeperParts {
  std::string node_id;  // this node, as partitions name it
  const Model* model = nullptr;
  StageRuntime* stage = nullptr;  // runs the range taken
  // The partial copy of the model that `model` maps (--model-from-peers);
  // null when the full file is at hand (nothing is ever fetched then).
  ModelCache* cache = nullptr;
  // With a cache: how its missing tensors are fetched, from whom, counted
  // where.
  LayerFetcherOptions fetch;
  PeerClient* client = nullptr;
  LayerFetcherMetrics fetch_metrics;
  // Called once the range of the partition with this key is in place
  // (ClusterView::MarkApplied); from then on health replies name it.
  std::function<void(const std::string& partition_key)> mark_applied;
};

// LayerRangeKeeper
//
// Purpose: keeps the stage on this node's layers of the latest partition,
// and says what state that leaves the node in (HealthReply.state).
// OnPartition (the cluster view's thread): when the node serves from a
// partial copy and misses tensors of its new range, it asks its fetcher for
// them and waits in NODE_STATE_FETCHING (health replies keep naming the
// previous partition meanwhile); otherwise, and once the fetcher has them
// (on the fetcher's thread), it takes the range: sets the stage's range,
// hands back the pages of layers it no longer runs, pages the new ones in,
// marks the partition applied, and moves to READY (layers held), IDLE
// (none), NO_FIT (the model fits nowhere) or STARTING (no plan yet, or the
// range could not be taken). A partition that a newer one superseded
// meanwhile is dropped.
// Ownership: owns the fetcher (with a cache); borrows the parts.
// Thread-safety: thread-safe; taking a range is serialised. Stop (also the
// destructor) joins the fetcher; call it before the parts go.
class LayerRangeKeeper {
 public:
  explicit LayerRangeKeeper(LayerRangeKeeperParts parts);
  ~LayerRangeKeeper();
  LayerRangeKeeper(const LayerRangeKeeper&) = delete;
  LayerRangeKeeper& operator=(const LayerRangeKeeper&) = delete;

  // A new partition from the cluster view.
  void OnPartition(std::shared_ptr<const ClusterSnapshot> snapshot);
  // NODE_STATE_STARTING until the first range is taken.
  v1::NodeState state() const { return state_.load(); }
  // Stops fetching; later partitions with missing tensors wait forever.
  void Stop();

 private:
  // Takes this node's layers of `snapshot` (all tensors present), unless a
  // newer partition came meanwhile.
  void TakeRange(const std::shared_ptr<const ClusterSnapshot>& snapshot);
  // Indices into the model's tensor table of the tensors `weights` reads.
  std::vector<size_t> TensorIndices(const StageWeights& weights) const;
  // Tensors of `range` the partial copy does not hold yet.
  std::vector<size_t> MissingTensors(LayerRange range) const;

  const LayerRangeKeeperParts parts_;
  // Serialises taking a range (cluster thread, fetcher thread).
  absl::Mutex mu_;
  uint64_t latest_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<v1::NodeState> state_{v1::NODE_STATE_STARTING};
  // With a cache only. Last, so it stops (and calls TakeRange no more)
  // before the rest goes.
  std::unique_ptr<LayerFetcher> fetcher_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_LAYER_RANGE_KEEPER_H_
