// Loading a model while the daemon serves: POST /v1/admin/models.
#ifndef RINGLM_API_MODEL_ADMIN_H_
#define RINGLM_API_MODEL_ADMIN_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/json_limits.h"

namespace ringlm {

// What a load call asks for: {"name": ..., "path": ..., "memory_mb": ...}.
struct ModelLoadRequest {
  std::string name;           // 1 to 128 printable characters, no spaces
  std::string path;           // a GGUF file on the daemon's machine
  uint64_t memory_bytes = 0;  // this node's part for it; 0 = the daemon decides
};

// OK for a name a model may be served under: 1 to 128 printable ASCII
// characters, no spaces; else InvalidArgument saying so (`what` names the
// field or flag).
absl::Status CheckModelName(absl::string_view name, absl::string_view what);

// Parses a load call's body. InvalidArgument naming the field for anything
// else: not an object, a missing or bad name or path, a memory_mb that is
// not an integer from 1 to 2^30, or a field it does not know.
absl::StatusOr<ModelLoadRequest> ParseModelLoadRequest(std::string_view body,
                                                       const JsonLimits& limits);

// Parses an unload call's body: empty, or {"drain_s": S} with S from 0 to
// 3600 (default 30). InvalidArgument naming what is wrong.
absl::StatusOr<std::chrono::seconds> ParseModelUnloadRequest(std::string_view body,
                                                             const JsonLimits& limits);

}  // namespace ringlm

#endif  // RINGLM_API_MODEL_ADMIN_H_
