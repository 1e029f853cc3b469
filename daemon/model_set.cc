#include "daemon/model_set.h"

#include "absl/strings/str_cat.h"
#include "api/model_admin.h"

namespace ringlm {

absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError("--model needs a file");
  ModelSpec spec;
  const size_t eq = value.find('=');
  const absl::string_view before = value.substr(0, eq);
  if (eq == absl::string_view::npos || before.find('/') != absl::string_view::npos) {
    spec.path = std::string(value);
    return spec;
  }
  if (absl::Status s = CheckModelName(before, absl::StrCat("--model ", value)); !s.ok()) return s;
  spec.name = std::string(before);
  spec.path = std::string(value.substr(eq + 1));
  if (spec.path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--model ", value, ": no file after '='"));
  }
  return spec;
}

absl::StatusOr<uint64_t> MemoryPart::Of(uint64_t memory) const {
  if (reserved_bytes > memory) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model-memory gives the models ", reserved_bytes >> 20, " MiB, but this node has ",
        memory >> 20, " MiB (MemAvailable, or --memory-mb)"));
  }
  if (fixed_bytes > 0) return fixed_bytes;
  const uint64_t part =
      static_cast<uint64_t>(static_cast<double>(memory - reserved_bytes) * share_of_rest);
  if (part == 0) {
    return absl::InvalidArgumentError("--model-memory leaves no memory for the models without one");
  }
  return part;
}

absl::StatusOr<std::vector<MemoryPart>> DivideMemory(
    const std::vector<uint64_t>& sizes, const std::vector<std::optional<uint64_t>>& fixed_bytes) {
  if (sizes.empty()) return absl::InvalidArgumentError("no model to divide memory among");
  if (fixed_bytes.size() != sizes.size()) {
    return absl::InvalidArgumentError("one fixed amount (or none) per model");
  }
  uint64_t reserved = 0;
  double rest_total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return absl::InvalidArgumentError("a model file is empty");
    if (fixed_bytes[i].has_value()) {
      if (*fixed_bytes[i] == 0) return absl::InvalidArgumentError("--model-memory of 0");
      reserved += *fixed_bytes[i];
    } else {
      rest_total += static_cast<double>(sizes[i]);
    }
  }
  std::vector<MemoryPart> parts(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    parts[i].reserved_bytes = reserved;
    if (fixed_bytes[i].has_value()) {
      parts[i].fixed_bytes = *fixed_bytes[i];
    } else {
      parts[i].share_of_rest = static_cast<double>(sizes[i]) / rest_total;
    }
  }
  return parts;
}

}  // namespace ringlm
