#include "daemon/layer_range_keeper.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

std::string FormatRange(std::optional<LayerRange> r) {
  return r ? absl::StrCat("[", r->first, ", ", r->last, ")") : "none";
}

// This node's layers in `snapshot`, if any.
std::optional<LayerRange> RangeOf(const ClusterSnapshot& snapshot, const std::string& node_id) {
  for (const Stage& s : snapshot.partition.stages) {
    if (s.node_id == node_id) return LayerRange{s.first_layer, s.last_layer};
  }
  return std::nullopt;
}

}  // namespace

LayerRangeKeeper::LayerRangeKeeper(LayerRangeKeeperParts parts) : parts_(std::move(parts)) {
  if (parts_.cache != nullptr) {
    fetcher_ = std::make_unique<LayerFetcher>(
        parts_.fetch, parts_.cache, parts_.client, parts_.fetch_metrics,
        [this](std::shared_ptr<const ClusterSnapshot> s) { TakeRange(s); });
  }
}

LayerRangeKeeper::~LayerRangeKeeper() { Stop(); }

void LayerRangeKeeper::Stop() {
  if (fetcher_ != nullptr) fetcher_->Stop();
}

std::vector<size_t> LayerRangeKeeper::TensorIndices(const StageWeights& weights) const {
  std::vector<size_t> indices;
  const GgufTensorInfo* first = parts_.model->file().tensors().data();
  for (const GgufTensorInfo* t : weights.tensors())
    indices.push_back(static_cast<size_t>(t - first));
  return indices;
}

std::vector<size_t> LayerRangeKeeper::MissingTensors(LayerRange range) const {
  std::vector<size_t> missing;
  absl::StatusOr<StageWeights> weights = parts_.model->LoadStage(range);
  if (!weights.ok()) return missing;  // TakeRange reports it
  for (size_t index : TensorIndices(*weights)) {
    if (!parts_.cache->Holds(index)) missing.push_back(index);
  }
  return missing;
}

void LayerRangeKeeper::OnPartition(std::shared_ptr<const ClusterSnapshot> snapshot) {
  {
    absl::MutexLock lock(&mu_);
    latest_epoch_ = snapshot->epoch;
  }
  const std::optional<LayerRange> mine = RangeOf(*snapshot, parts_.node_id);
  if (fetcher_ != nullptr) {
    std::vector<size_t> missing = mine ? MissingTensors(*mine) : std::vector<size_t>{};
    if (!missing.empty()) {
      // The plan waits: health replies keep naming the old partition until
      // the tensors are in and TakeRange applies this one.
      state_ = v1::NODE_STATE_FETCHING;
      fetcher_->Request(snapshot, *mine, std::move(missing));
      return;
    }
    fetcher_->Cancel();
  }
  TakeRange(snapshot);
}

void LayerRangeKeeper::TakeRange(const std::shared_ptr<const ClusterSnapshot>& snapshot) {
  absl::MutexLock lock(&mu_);
  if (snapshot->epoch != latest_epoch_) return;  // a newer partition came meanwhile
  const std::optional<LayerRange> mine = RangeOf(*snapshot, parts_.node_id);
  const std::optional<LayerRange> held = parts_.stage->range();
  const bool changed = held.has_value() != mine.has_value() ||
                       (held && (held->first != mine->first || held->last != mine->last));
  if (changed) {
    spdlog::info("layers: {} -> {}", FormatRange(held), FormatRange(mine));
    const Model& model = *parts_.model;
    auto handover = [&](const StageWeights* taken, const StageWeights* left) {
      // Hand back the pages of layers this node no longer runs.
      if (left != nullptr) model.Release(*left, taken);
      if (taken == nullptr) return;
      if (parts_.cache != nullptr) parts_.cache->Touch(TensorIndices(*taken));
      int last_decile = -1;
      model.PageIn(*taken, [&](uint64_t done, uint64_t total) {
        const int decile = total == 0 ? 10 : static_cast<int>(done * 10 / total);
        if (decile != last_decile && (decile % 5 == 0)) {
          spdlog::info("paging in layers {}: {}% of {:.1f} MiB", FormatRange(mine), decile * 10,
                       total / 1048576.0);
        }
        last_decile = decile;
      });
    };
    if (absl::Status s = parts_.stage->SetRange(mine, handover); !s.ok()) {
      spdlog::error("cannot take layers {}: {}", FormatRange(mine), s.ToString());
      state_ = v1::NODE_STATE_STARTING;
      return;
    }
  }
  parts_.mark_applied(snapshot->partition_key);
  if (!snapshot->status.ok()) {
    state_ = snapshot->status.code() == absl::StatusCode::kResourceExhausted
                 ? v1::NODE_STATE_NO_FIT
                 : v1::NODE_STATE_STARTING;
  } else {
    state_ = mine ? v1::NODE_STATE_READY : v1::NODE_STATE_IDLE;
  }
}

}  // namespace ringlm
