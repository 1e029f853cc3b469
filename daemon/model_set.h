// The models one daemon serves, as --model gives them, and how its memory
// is divided among them.
#ifndef RINGLM_DAEMON_MODEL_SET_H_
#define RINGLM_DAEMON_MODEL_SET_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringlm {

// One --model value: "PATH", or "NAME=PATH" to serve the file under NAME.
struct ModelSpec {
  std::string name;  // empty: the file's base name
  std::string path;
};

// Parses a --model value. A NAME is 1 to 128 printable ASCII characters
// without spaces, '=' or '/' (so "dir/a=b.gguf" is a path); InvalidArgument
// names what is wrong.
absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view value);

// This node's memory for one of its models: a fixed amount
// (--model-memory), or a share of what the fixed amounts leave.
struct MemoryPart {
  uint64_t fixed_bytes = 0;     // > 0: exactly this
  double share_of_rest = 1.0;   // else this share of (memory - reserved_bytes)
  uint64_t reserved_bytes = 0;  // every model's fixed amount, summed
  // The bytes of `memory` (MemAvailable or --memory-mb) this part is.
  // InvalidArgument when the fixed amounts take more than `memory`, or
  // leave nothing for a model without one.
  absl::StatusOr<uint64_t> Of(uint64_t memory) const;
};

// The parts of several models. Each model with `fixed_bytes[i]` set gets
// that; the others share the rest in proportion to `sizes` (each model's
// file size: what its layers need), so that models that fit the cluster
// together each fit their part. InvalidArgument for an empty list, a size
// of 0, or a fixed amount of 0.
absl::StatusOr<std::vector<MemoryPart>> DivideMemory(
    const std::vector<uint64_t>& sizes, const std::vector<std::optional<uint64_t>>& fixed_bytes);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_MODEL_SET_H_
