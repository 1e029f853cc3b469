#include "api/model_admin.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ringlm {

absl::Status CheckModelName(absl::string_view name, absl::string_view what) {
  if (name.empty() || name.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a model name must be 1 to 128 characters"));
  }
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": a model name may hold printable characters only, no spaces"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelLoadRequest> ParseModelLoadRequest(std::string_view body,
                                                       const JsonLimits& limits) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonWithLimits(body, limits);
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  ModelLoadRequest request;
  for (const auto& [key, value] : j.items()) {
    if (key == "name" && value.is_string()) {
      request.name = value.get<std::string>();
    } else if (key == "path" && value.is_string()) {
      request.path = value.get<std::string>();
    } else if (key == "memory_mb" && value.is_number_integer()) {
      const int64_t mib = value.get<int64_t>();
      if (mib < 1 || mib > (int64_t{1} << 30)) {
        return absl::InvalidArgumentError("'memory_mb' must be from 1 to 2^30");
      }
      request.memory_bytes = static_cast<uint64_t>(mib) << 20;
    } else if (key == "name" || key == "path" || key == "memory_mb") {
      return absl::InvalidArgumentError(absl::StrCat("'", key, "' has the wrong type"));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown field '", key, "' (fields: name, path, memory_mb)"));
    }
  }
  if (absl::Status s = CheckModelName(request.name, "'name'"); !s.ok()) return s;
  if (request.path.empty() || request.path.size() > 4096) {
    return absl::InvalidArgumentError("'path' must be 1 to 4096 characters");
  }
  return request;
}

absl::StatusOr<std::chrono::seconds> ParseModelUnloadRequest(std::string_view body,
                                                             const JsonLimits& limits) {
  std::chrono::seconds drain(30);
  if (body.empty()) return drain;
  absl::StatusOr<nlohmann::json> parsed = ParseJsonWithLimits(body, limits);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  for (const auto& [key, value] : parsed->items()) {
    if (key != "drain_s") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown field '", key, "' (fields: drain_s)"));
    }
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 3600) {
      return absl::InvalidArgumentError("'drain_s' must be an integer from 0 to 3600");
    }
    drain = std::chrono::seconds(value.get<int64_t>());
  }
  return drain;
}

}  // namespace ringlm
