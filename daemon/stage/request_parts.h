// A request's parts: the fields of a StageStepRequest that are the same on
// every step of the request (plan, sampling, limits, logprobs, constraint,
// wire_dtype, speculation). A request's first step to a stage carries them;
// its later steps set parts_omitted and leave them out (proto/ringlm.proto),
// so a decode step is as small with a 32 KiB constraint as without one.
#ifndef RINGLM_DAEMON_STAGE_REQUEST_PARTS_H_
#define RINGLM_DAEMON_STAGE_REQUEST_PARTS_H_

#include <cstdint>
#include <list>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// True when any of the parts' fields is set.
bool HasParts(const v1::StageStepRequest& step);
// Copies the parts' fields of `from` into `to` (the others stay).
void CopyParts(const v1::StageStepRequest& from, v1::StageStepRequest& to);

// RequestPartsTable
//
// Purpose: the parts of the requests a stage runs, kept from the step of
// each that carried them and put back into the steps that omit them.
// Bounds: at most `max_bytes` of parts; past it, the least recently used
// are dropped (their requests' next steps are refused, and their origins
// recover with a new attempt, whose first step carries the parts again).
// The table never learns that a request ended well (only the last stage
// samples the end), so that bound is what clears it.
// Thread-safety: thread-compatible; StageRuntime calls it under its lock.
class RequestPartsTable {
 public:
  explicit RequestPartsTable(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps the parts of `step`, which carries them, for its request id and
  // origin (replacing earlier ones). ResourceExhausted when they alone are
  // larger than the whole bound.
  absl::Status Keep(const v1::StageStepRequest& step);
  // Puts the kept parts into `step`, which omits them (parts_omitted).
  // InvalidArgument when it carries some anyway; FailedPrecondition when
  // none are kept for its request; PermissionDenied when they were kept for
  // another origin.
  absl::Status Fill(v1::StageStepRequest& step);
  // Forgets the parts of `request_id` (the request is over here).
  void Drop(const std::string& request_id);

  size_t size() const { return entries_.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::string origin;
    v1::StageStepRequest parts;  // only the parts' fields are set
    uint64_t bytes = 0;
    std::list<std::string>::iterator use;  // its place in `uses_`
  };
  void Erase(std::map<std::string, Entry>::iterator it);

  const uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  std::map<std::string, Entry> entries_;
  std::list<std::string> uses_;  // request ids, most recently used first
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_REQUEST_PARTS_H_
