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
  if (model.bytes_per_layer == 0) {
    return absl::InvalidArgumentError("model footprint has bytes_per_layer == 0");
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

absl::Status DoesNotFit(const std::vector<NodeDescriptor>& nodes, const ModelFootprint& model,
                        uint64_t layers_that_fit) {
  const U128 needed = U128{model.n_layers} * model.bytes_per_layer + model.first_stage_extra_bytes +
                      model.last_stage_extra_bytes;
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
  const U128 missing = U128{model.n_layers - layers_that_fit} * model.bytes_per_layer;
  return absl::ResourceExhaustedError(absl::StrCat(
      "model needs ", Saturate(needed_mib), " MiB and the cluster has ", Saturate(usable_mib),
      " MiB usable, but layers cannot be split across nodes: only ", layers_that_fit, " of ",
      model.n_layers, " layers fit, ", Saturate((missing + kMiB - 1) / kMiB), " MiB short"));
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

// The memory rule (steps 2-4 of PartitionLayers) over `nodes`, already in
// MemoryOrder. Participants whose `fill_first` flag is set get their capacity
// (less, one layer at a time from the last of them, where the others could
// not each keep a layer): speed placement's faster nodes, before slower
// ones take the rest. Idle nodes are left for the caller to list.
absl::StatusOr<Partition> PlaceByMemory(const std::vector<NodeDescriptor>& nodes,
                                        const ModelFootprint& model,
                                        const std::vector<bool>& fill_first) {
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
  const std::vector<uint32_t> classes = SpeedClasses(caps, model.bytes_per_layer);
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

absl::StatusOr<Partition> PartitionLayers(std::vector<NodeDescriptor> nodes,
                                          const ModelFootprint& model) {
  if (absl::Status status = ValidateInput(nodes, model); !status.ok()) return status;
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
