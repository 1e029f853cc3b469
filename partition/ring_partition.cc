#include "partition/ring_partition.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "partition/speed_classes.h"

namespace ringlm {
namespace {

// 128-bit arithmetic throughout: capabilities arrive from the network, so
// memory sizes may be anything up to 2^64 and products must not wrap.
using U128 = unsigned __int128;
using I128 = __int128;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A participating node and its share.
struct Slot {
  const NodeDescriptor* node;
  U128 weight;        // usable memory minus the extras of its position, > 0
  uint32_t capacity;  // layers that fit, in [1, n_layers]
  uint32_t min_layers;
  uint32_t layers = 0;
  bool fixed = false;  // layers settled at a bound during apportionment
};

bool MemoryOrder(const NodeDescriptor& a, const NodeDescriptor& b) {
  if (a.caps.usable_memory_bytes != b.caps.usable_memory_bytes) {
    return a.caps.usable_memory_bytes > b.caps.usable_memory_bytes;
  }
  return a.node_id < b.node_id;
}

U128 ExtrasAt(size_t position, size_t participants, const ModelFootprint& model) {
  U128 extras = 0;
  if (position == 0) extras += model.first_stage_extra_bytes;
  if (position + 1 == participants) extras += model.last_stage_extra_bytes;
  return extras;
}

uint32_t CapacityAt(uint64_t usable, U128 extras, const ModelFootprint& model) {
  if (usable < extras) return 0;
  const U128 layers = (usable - extras) / model.bytes_per_layer;
  return static_cast<uint32_t>(std::min<U128>(layers, model.n_layers));
}

uint64_t Saturate(U128 v) {
  return v > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                  : static_cast<uint64_t>(v);
}

absl::Status ValidateInput(const std::vector<NodeDescriptor>& nodes, const ModelFootprint& model) {
  if (nodes.empty()) return absl::InvalidArgumentError("cannot partition over an empty node set");
  if (nodes.size() > kMaxPartitionNodes) {
    return absl::InvalidArgumentError(absl::StrCat("cannot partition over ", nodes.size(),
                                                   " nodes: at most ", kMaxPartitionNodes));
  }
  if (model.n_layers == 0) return absl::InvalidArgumentError("model has no layers");
  if (model.layer_bytes.empty() && model.bytes_per_layer == 0) {
    return absl::InvalidArgumentError("model footprint has bytes_per_layer == 0");
  }
  if (!model.layer_bytes.empty()) {
    if (model.layer_bytes.size() != model.n_layers) {
      return absl::InvalidArgumentError(absl::StrCat("model footprint has ",
                                                     model.layer_bytes.size(), " layer sizes for ",
                                                     model.n_layers, " layers"));
    }
    for (uint32_t i = 0; i < model.n_layers; ++i) {
      if (model.layer_bytes[i] == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("model footprint has layer ", i, " of 0 bytes"));
      }
    }
    if (model.TotalLayerBytes() > std::numeric_limits<uint64_t>::max()) {
      return absl::InvalidArgumentError("model footprint's layers add up to more than 2^64 bytes");
    }
  }
  absl::flat_hash_set<std::string> seen;
  for (const NodeDescriptor& node : nodes) {
    if (node.node_id.empty()) return absl::InvalidArgumentError("node with an empty node id");
    if (!seen.insert(node.node_id).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate node id \"", node.node_id, "\""));
    }
  }
  return absl::OkStatus();
}

// `layers_that_fit` of the model's layers fit, `missing` bytes of layers do not.
absl::Status DoesNotFit(const std::vector<NodeDescriptor>& nodes, const ModelFootprint& model,
                        uint64_t layers_that_fit, U128 missing) {
  const U128 needed =
      model.TotalLayerBytes() + model.first_stage_extra_bytes + model.last_stage_extra_bytes;
  U128 usable = 0;
  for (const NodeDescriptor& node : nodes) usable += node.caps.usable_memory_bytes;
  // Round what is needed up and what is there down, so the three numbers in
  // the message agree with each other and never understate the gap.
  const U128 needed_mib = (needed + kMiB - 1) / kMiB;
  const U128 usable_mib = usable / kMiB;
  if (needed_mib > usable_mib) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model needs ", Saturate(needed_mib), " MiB but the cluster has ", Saturate(usable_mib),
        " MiB usable: ", Saturate(needed_mib - usable_mib), " MiB short"));
  }
  // Enough bytes in total, but a layer cannot be split across nodes.
  return absl::ResourceExhaustedError(absl::StrCat(
      "model needs ", Saturate(needed_mib), " MiB and the cluster has ", Saturate(usable_mib),
      " MiB usable, but layers cannot be split across nodes: only ", layers_that_fit, " of ",
      model.n_layers, " layers fit, ", Saturate((missing + kMiB - 1) / kMiB), " MiB short"));
}

absl::Status DoesNotFit(const std::vector<NodeDescriptor>& nodes, const ModelFootprint& model,
                        uint64_t layers_that_fit) {
  return DoesNotFit(nodes, model, layers_that_fit,
                    U128{model.n_layers - layers_that_fit} * model.bytes_per_layer);
}

// Sets slot.layers so that they add up to `total`, each in
// [min_layers, capacity], as close as possible to proportional to weight:
// layers_i = round(clamp(lambda * weight_i, min_i, cap_i)) for the lambda
// that makes the sum right. Bound violators are fixed one side at a time:
// when the excess above caps outweighs the deficit below minimums, lambda
// must rise, so the nodes above their cap stay there (and vice versa).
// Precondition: sum(min_layers) <= total <= sum(capacity).
absl::Status Apportion(std::vector<Slot>& slots, uint32_t total) {
  while (true) {
    I128 remaining = total;
    U128 free_weight = 0;
    for (const Slot& s : slots) {
      if (s.fixed) {
        remaining -= s.layers;
      } else {
        free_weight += s.weight;
      }
    }
    if (free_weight == 0 || remaining < 0) {
      if (remaining == 0) return absl::OkStatus();
      return absl::InternalError("layer apportionment did not converge");
    }
    const U128 r = static_cast<U128>(remaining);
    // Quota_i = r * w_i / free_weight, compared exactly in units of 1/free_weight.
    U128 excess_over = 0;
    U128 deficit_under = 0;
    for (const Slot& s : slots) {
      if (s.fixed) continue;
      const U128 scaled = r * s.weight;
      if (scaled > U128{s.capacity} * free_weight)
        excess_over += scaled - U128{s.capacity} * free_weight;
      if (scaled < U128{s.min_layers} * free_weight) {
        deficit_under += U128{s.min_layers} * free_weight - scaled;
      }
    }
    if (excess_over == 0 && deficit_under == 0) {
      // All quotas within bounds: floor them, then hand the rest out by
      // largest remainder, earlier node first on ties.
      std::vector<std::pair<U128, size_t>> remainders;  // (remainder, slot)
      U128 assigned = 0;
      for (size_t i = 0; i < slots.size(); ++i) {
        Slot& s = slots[i];
        if (s.fixed) continue;
        const U128 scaled = r * s.weight;
        s.layers = static_cast<uint32_t>(scaled / free_weight);
        assigned += s.layers;
        remainders.emplace_back(scaled % free_weight, i);
      }
      std::sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      // Fewer leftovers than free slots with a non-zero remainder (sum of
      // remainders = leftovers * free_weight), so each gets at most one,
      // and floor + 1 <= capacity wherever the remainder is non-zero.
      for (U128 k = 0; k < r - assigned; ++k)
        ++slots[remainders[static_cast<size_t>(k)].second].layers;
      return absl::OkStatus();
    }
    // Each round fixes at least one slot, so there are at most slots.size().
    const bool fix_over = excess_over >= deficit_under;
    const bool fix_under = deficit_under >= excess_over;
    bool fixed_any = false;
    for (Slot& s : slots) {
      if (s.fixed) continue;
      const U128 scaled = r * s.weight;
      if (fix_over && scaled > U128{s.capacity} * free_weight) {
        s.layers = s.capacity;
        s.fixed = fixed_any = true;
      } else if (fix_under && scaled < U128{s.min_layers} * free_weight) {
        s.layers = s.min_layers;
        s.fixed = fixed_any = true;
      }
    }
    if (!fixed_any) return absl::InternalError("layer apportionment made no progress");
  }
}

// Bit length of v (0 for 0).
int BitLength(U128 v) {
  int n = 0;
  for (; v != 0; v >>= 1) ++n;
  return n;
}

// Steps 2'-4' of PartitionLayers, for layers of different sizes, over
// `nodes` in MemoryOrder; `fill_first` as for PlaceByMemory. Exact integer
// arithmetic: layer bytes add up to < 2^64 (ValidateInput), and memory
// weights are scaled down to below 2^62 in all, so products stay < 2^127.
// Cost: O(k * n_layers * log n_layers) for k participants.
absl::StatusOr<Partition> PlaceBytesByMemory(const std::vector<NodeDescriptor>& nodes,
                                             const ModelFootprint& model,
                                             const std::vector<bool>& fill_first) {
  const uint32_t n = model.n_layers;
  std::vector<U128> prefix(n + 1, 0);  // bytes of layers [0, k)
  for (uint32_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + model.LayerBytes(i);
  const U128 total = prefix[n];
  auto room = [&](size_t i, size_t k) -> U128 {
    const U128 extras = ExtrasAt(i, k, model);
    const uint64_t usable = nodes[i].caps.usable_memory_bytes;
    return usable < extras ? 0 : usable - extras;
  };
  // 2'. The last participant must hold its extras and the last layer.
  size_t k = std::min<size_t>(nodes.size(), n);
  while (k > 0 && room(k - 1, k) < model.LayerBytes(n - 1)) --k;
  if (k == 0) return DoesNotFit(nodes, model, 0, total);
  std::vector<U128> cap(k);
  for (size_t i = 0; i < k; ++i) cap[i] = room(i, k);
  // The end of the longest block from `start` that fits node i (start: none).
  auto max_end = [&](size_t i, uint32_t start) -> uint32_t {
    const U128 limit = prefix[start] + cap[i];
    return static_cast<uint32_t>(std::upper_bound(prefix.begin() + start, prefix.end(), limit) -
                                 prefix.begin() - 1);
  };
  // can[i][p]: nodes i..k-1 can hold layers [p, n), each at least one.
  std::vector<std::vector<bool>> can(k + 1, std::vector<bool>(n + 1, false));
  can[k][n] = true;
  for (size_t i = k; i-- > 0;) {
    std::vector<uint32_t> later(n + 2, 0);  // later[e] = #{e' < e : can[i+1][e']}
    for (uint32_t e = 0; e <= n; ++e) later[e + 1] = later[e] + (can[i + 1][e] ? 1 : 0);
    for (uint32_t p = 0; p < n; ++p) {
      const uint32_t last = max_end(i, p);
      can[i][p] = last > p && later[last + 1] > later[p + 1];
    }
  }
  // 3'.
  if (!can[0][0]) {
    uint32_t covered = 0;  // as far as filling each node in turn gets
    for (size_t i = 0; i < k && covered < n; ++i) covered = max_end(i, covered);
    return DoesNotFit(nodes, model, covered, total - prefix[covered]);
  }
  // 4'. Weights: memory left for layers, scaled so that they sum below 2^62.
  U128 weight_sum = 0;
  for (size_t i = 0; i < k; ++i) weight_sum += cap[i];
  const int shift = std::max(0, BitLength(weight_sum) - 62);
  std::vector<U128> weight(k);
  for (size_t i = 0; i < k; ++i) weight[i] = std::max<U128>(1, cap[i] >> shift);
  auto fills = [&](size_t i) { return !fill_first.empty() && fill_first[i]; };
  Partition partition;
  uint32_t start = 0;
  for (size_t i = 0; i < k; ++i) {
    const uint32_t last = max_end(i, start);
    uint32_t end = start;
    if (fills(i)) {
      // A faster node: the longest block that leaves the rest placeable.
      for (uint32_t e = last; e > start && end == start; --e) {
        if (can[i + 1][e]) end = e;
      }
    } else {
      // Its share, by memory among the nodes that do not fill, of the bytes
      // left less what later filling nodes take.
      U128 later_fill = 0;
      U128 others = 0;
      for (size_t j = i; j < k; ++j) {
        if (j > i && fills(j)) later_fill += cap[j];
        if (!fills(j)) others += weight[j];
      }
      const U128 left = total - prefix[start];
      const U128 share = later_fill >= left ? 0 : left - later_fill;
      const U128 target = share * weight[i];  // in units of 1/others
      U128 best_distance = 0;
      for (uint32_t e = start + 1; e <= last; ++e) {
        if (!can[i + 1][e]) continue;
        const U128 got = (prefix[e] - prefix[start]) * others;
        const U128 distance = got > target ? got - target : target - got;
        if (end == start || distance < best_distance) {
          end = e;
          best_distance = distance;
        }
      }
    }
    if (end == start) return absl::InternalError("byte placement found no block");
    partition.stages.push_back({nodes[i].node_id, nodes[i].address, start, end});
    start = end;
  }
  if (start != n) return absl::InternalError("layer blocks do not add up");
  return partition;
}

// The memory rule (steps 2-4 of PartitionLayers) over `nodes`, already in
// MemoryOrder. Participants whose `fill_first` flag is set get their capacity
// (less, one layer at a time from the last of them, where the others could
// not each keep a layer): speed placement's faster nodes, before slower
// ones take the rest. Idle nodes are left for the caller to list.
absl::StatusOr<Partition> PlaceByMemory(const std::vector<NodeDescriptor>& nodes,
                                        const ModelFootprint& model,
                                        const std::vector<bool>& fill_first) {
  if (!model.layer_bytes.empty()) return PlaceBytesByMemory(nodes, model, fill_first);
  // Participants: the largest min(n, n_layers) nodes, minus trailing ones that
  // cannot hold a layer where they stand. Dropping the last makes the one
  // before it last, and it must then also pay for the output head.
  size_t participants = std::min<size_t>(nodes.size(), model.n_layers);
  while (participants > 0) {
    const size_t last = participants - 1;
    const U128 extras = ExtrasAt(last, participants, model);
    if (CapacityAt(nodes[last].caps.usable_memory_bytes, extras, model) > 0) break;
    --participants;
  }
  // Middle nodes have at least the last one's memory and pay no extras, so
  // they hold a layer; stage 0 may still be unable to pay for the embedding.
  std::vector<Slot> slots;
  uint64_t layers_that_fit = 0;
  for (size_t i = 0; i < participants; ++i) {
    const U128 extras = ExtrasAt(i, participants, model);
    const uint64_t usable = nodes[i].caps.usable_memory_bytes;
    const uint32_t capacity = CapacityAt(usable, extras, model);
    if (capacity == 0) {
      // Only stage 0 can get here (it pays the embedding). Every later node has
      // no more memory, and any of them as stage 0 would pay the same, so the
      // model cannot be placed.
      return DoesNotFit(nodes, model, 0);
    }
    slots.push_back({&nodes[i], usable - extras, capacity, 1});
    layers_that_fit += capacity;
  }
  if (layers_that_fit < model.n_layers) return DoesNotFit(nodes, model, layers_that_fit);

  uint64_t minimum = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!fill_first.empty() && fill_first[i]) slots[i].min_layers = slots[i].capacity;
    minimum += slots[i].min_layers;
  }
  for (size_t i = slots.size(); i-- > 0 && minimum > model.n_layers;) {
    const uint64_t give_back =
        std::min<uint64_t>(slots[i].min_layers - 1, minimum - model.n_layers);
    slots[i].min_layers -= static_cast<uint32_t>(give_back);
    minimum -= give_back;
  }
  if (absl::Status status = Apportion(slots, model.n_layers); !status.ok()) return status;

  Partition partition;
  uint32_t next_layer = 0;
  for (const Slot& s : slots) {
    partition.stages.push_back(
        {s.node->node_id, s.node->address, next_layer, next_layer + s.layers});
    next_layer += s.layers;
  }
  if (next_layer != model.n_layers) return absl::InternalError("layer counts do not add up");
  return partition;
}

// Every node not in a stage, in `nodes`' (memory) order.
void ListIdle(const std::vector<NodeDescriptor>& nodes, Partition* partition) {
  absl::flat_hash_set<std::string> staged;
  for (const Stage& s : partition->stages) staged.insert(s.node_id);
  for (const NodeDescriptor& node : nodes) {
    if (!staged.contains(node.node_id)) partition->idle_node_ids.push_back(node.node_id);
  }
}

bool AllAskForSpeed(const std::vector<NodeDescriptor>& nodes) {
  return std::all_of(nodes.begin(), nodes.end(),
                     [](const NodeDescriptor& n) { return n.caps.placement == Placement::kSpeed; });
}

// Speed placement: the nodes of the fewest fastest speed classes that can
// hold the model, the faster classes filled first. With every class the
// result (or the error) is the memory rule's over all nodes, faster classes
// still filled first.
absl::StatusOr<Partition> PlaceBySpeed(const std::vector<NodeDescriptor>& nodes,
                                       const ModelFootprint& model) {
  std::vector<DeviceCapabilities> caps;
  for (const NodeDescriptor& node : nodes) caps.push_back(node.caps);
  // A class depends on nodes' time ratios alone; the mean layer stands for all.
  const uint64_t mean_layer = static_cast<uint64_t>(model.TotalLayerBytes() / model.n_layers);
  const std::vector<uint32_t> classes = SpeedClasses(caps, std::max<uint64_t>(1, mean_layer));
  const uint32_t slowest = *std::max_element(classes.begin(), classes.end());
  for (uint32_t k = 0;; ++k) {
    std::vector<NodeDescriptor> subset;
    std::vector<bool> faster;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (classes[i] > k) continue;
      subset.push_back(nodes[i]);
      faster.push_back(classes[i] < k);
    }
    absl::StatusOr<Partition> partition = PlaceByMemory(subset, model, faster);
    if (partition.ok() || k == slowest || !absl::IsResourceExhausted(partition.status())) {
      return partition;
    }
  }
}

}  // namespace

bool ModelFootprint::Uniform() const {
  return std::all_of(layer_bytes.begin(), layer_bytes.end(),
                     [&](uint64_t b) { return b == layer_bytes.front(); });
}

unsigned __int128 ModelFootprint::TotalLayerBytes() const {
  if (layer_bytes.empty()) return U128{n_layers} * bytes_per_layer;
  U128 total = 0;
  for (uint64_t b : layer_bytes) total += b;
  return total;
}

absl::StatusOr<Partition> PartitionLayers(std::vector<NodeDescriptor> nodes, ModelFootprint model) {
  if (absl::Status status = ValidateInput(nodes, model); !status.ok()) return status;
  if (!model.layer_bytes.empty() && model.Uniform()) {
    // Equal layers: the layer-count rule (steps 2-4), as before sizes differed.
    model.bytes_per_layer = model.layer_bytes.front();
    model.layer_bytes.clear();
  }
  std::sort(nodes.begin(), nodes.end(), MemoryOrder);
  absl::StatusOr<Partition> partition =
      AllAskForSpeed(nodes) ? PlaceBySpeed(nodes, model) : PlaceByMemory(nodes, model, {});
  if (partition.ok()) ListIdle(nodes, &*partition);
  return partition;
}

std::string DescribePartition(const Partition& partition) {
  std::string out =
      absl::StrCat(partition.stages.size(), partition.stages.size() == 1 ? " stage:" : " stages:");
  for (const Stage& stage : partition.stages) {
    absl::StrAppend(&out, " ", stage.node_id, "@", stage.address, "[", stage.first_layer, ",",
                    stage.last_layer, ")");
  }
  if (!partition.idle_node_ids.empty()) {
    absl::StrAppend(&out, "; idle:");
    for (const std::string& id : partition.idle_node_ids) absl::StrAppend(&out, " ", id);
  }
  return out;
}

}  // namespace ringlm
