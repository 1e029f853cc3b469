// The `held` file of a ModelCache folder: which tensors are present and
// verified, and when each was last used. Text, one tensor a line:
//
//   ringlm-held 1 <hex of the manifest digest>
//   <tensor index> <last used, ms since the epoch>
//   ...
//
// The digest ties the list to the manifest it was verified against.
#ifndef RINGLM_MODEL_STORE_INTERNAL_HELD_FILE_H_
#define RINGLM_MODEL_STORE_INTERNAL_HELD_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringlm::model_store_internal {

struct HeldEntry {
  size_t tensor = 0;
  int64_t last_used_ms = 0;
};

std::string SerializeHeld(std::string_view manifest_digest, const std::vector<HeldEntry>& held);

// Parses SerializeHeld output. DataLoss for anything else: a wrong first
// line or digest, a malformed line, an index >= tensor_count, a repeated
// index.
absl::StatusOr<std::vector<HeldEntry>> ParseHeld(std::string_view bytes,
                                                 std::string_view manifest_digest,
                                                 size_t tensor_count);

// An upper bound on SerializeHeld's length for this many tensors.
uint64_t MaxHeldBytes(size_t tensor_count);

}  // namespace ringlm::model_store_internal

#endif  // RINGLM_MODEL_STORE_INTERNAL_HELD_FILE_H_
