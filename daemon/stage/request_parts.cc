#include "daemon/stage/request_parts.h"

#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

// What an entry costs beyond its parts: the id twice, the map and list nodes.
constexpr uint64_t kEntryOverheadBytes = 256;

}  // namespace

bool HasParts(const v1::StageStepRequest& step) {
  return step.has_plan() || step.has_sampling() || step.has_limits() || step.has_logprobs() ||
         !step.constraint().empty() || step.wire_dtype() != v1::DTYPE_UNSPECIFIED ||
         step.has_speculation();
}

void CopyParts(const v1::StageStepRequest& from, v1::StageStepRequest& to) {
  *to.mutable_plan() = from.plan();
  *to.mutable_sampling() = from.sampling();
  *to.mutable_limits() = from.limits();
  *to.mutable_logprobs() = from.logprobs();
  to.set_constraint(from.constraint());
  to.set_wire_dtype(from.wire_dtype());
  *to.mutable_speculation() = from.speculation();
}

absl::Status RequestPartsTable::Keep(const v1::StageStepRequest& step) {
  Entry entry;
  entry.origin = step.origin();
  CopyParts(step, entry.parts);
  entry.bytes = entry.parts.ByteSizeLong() + 2 * step.request_id().size() + entry.origin.size() +
                kEntryOverheadBytes;
  if (entry.bytes > max_bytes_) {
    return absl::ResourceExhaustedError("the request's parts are larger than this stage keeps");
  }
  Drop(step.request_id());
  while (bytes_ + entry.bytes > max_bytes_) Erase(entries_.find(uses_.back()));
  uses_.push_front(step.request_id());
  entry.use = uses_.begin();
  bytes_ += entry.bytes;
  entries_.emplace(step.request_id(), std::move(entry));
  return absl::OkStatus();
}

absl::Status RequestPartsTable::Fill(v1::StageStepRequest& step) {
  if (HasParts(step)) {
    return absl::InvalidArgumentError("a step with parts_omitted carries parts");
  }
  auto it = entries_.find(step.request_id());
  if (it == entries_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this stage holds no parts (plan, sampling) of request ", step.request_id().substr(0, 64),
        ": its first step did not come here, or "
        "they were dropped"));
  }
  if (it->second.origin != step.origin()) {
    return absl::PermissionDeniedError(
        absl::StrCat("request ", step.request_id().substr(0, 64), " belongs to another origin"));
  }
  uses_.splice(uses_.begin(), uses_, it->second.use);
  CopyParts(it->second.parts, step);
  return absl::OkStatus();
}

void RequestPartsTable::Drop(const std::string& request_id) {
  if (auto it = entries_.find(request_id); it != entries_.end()) Erase(it);
}

void RequestPartsTable::Erase(std::map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  uses_.erase(it->second.use);
  entries_.erase(it);
}

}  // namespace ringlm
