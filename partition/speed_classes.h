// How fast a node runs a layer, and which nodes count as equally fast: the
// inputs of speed placement (PartitionLayers with Placement::kSpeed).
#ifndef RINGLM_PARTITION_SPEED_CLASSES_H_
#define RINGLM_PARTITION_SPEED_CLASSES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "partition/capabilities.h"

namespace ringlm {

// Nodes whose per-layer time is within this factor of the fastest one's in a
// class are one class. Measurements on one machine vary by 10-20% from run
// to run; a node at a quarter of a core is 4x slower.
inline constexpr double kSpeedClassRatio = 1.5;

// Seconds one decoded token spends in a layer of `bytes_per_layer` on a node:
// the weights read once (bytes / read bandwidth) plus about two flops per
// weight byte (2 * bytes / matmul rate). A term the node did not measure
// (0) is left out; nullopt when it measured neither. Pure.
std::optional<double> LayerSeconds(const DeviceCapabilities& caps, uint64_t bytes_per_layer);

// The speed class of each node (same order as `caps`), 0 the fastest: sorted
// by LayerSeconds, a node starts a new class when its time exceeds
// kSpeedClassRatio times the time of its class's first (fastest) node. Nodes
// that measured nothing are class 0: never penalised for a missing figure.
// A pure function of the figures, so every node computes the same classes.
std::vector<uint32_t> SpeedClasses(const std::vector<DeviceCapabilities>& caps,
                                   uint64_t bytes_per_layer);

}  // namespace ringlm

#endif  // RINGLM_PARTITION_SPEED_CLASSES_H_
