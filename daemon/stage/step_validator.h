// The checks a StageStep from the network passes before it is queued: the
// one place where an untrusted step's fields are validated. Pure functions,
// thread-safe, and the subject of a libFuzzer target (fuzz/).
#ifndef RINGLM_DAEMON_STAGE_STEP_VALIDATOR_H_
#define RINGLM_DAEMON_STAGE_STEP_VALIDATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "daemon/rpc/transport.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// What a step is checked against: this node and its model.
struct StepLimits {
  std::string self_id;
  std::string model_fingerprint;
  uint32_t n_layer = 0;
  uint32_t n_embd = 0;
  uint32_t n_vocab = 0;
  uint32_t context_size = 0;
  // New positions in one step at most (the origin's prompt chunk).
  uint32_t max_step_tokens = 512;
};

inline constexpr size_t kMaxWireIdBytes = 128;

// InvalidArgument, naming the field, unless `step` is well-formed for this
// node: protocol version, ids of 1..128 bytes, a plan that covers this model
// and names this node at stage_index, 1..max_step_tokens token ids inside the
// vocabulary at positions inside the context, hidden states of exactly
// [tokens, n_embd] whose byte size matches the dtype (none on stage 0), a
// consistent prefix claim, valid sampling parameters, at most kMaxDrafts
// drafts (fewer than its tokens, on a step that samples), kMaxDiscard
// discarded positions and kMaxStepsInFlight steps in flight, and at most
// MaxStepBytes(limits) bytes in all.
absl::Status ValidateStageStep(const v1::StageStepRequest& step, const StepLimits& limits);

// InvalidArgument, naming the field, unless `request` is well-formed:
// protocol version, a session id of 1..128 bytes, 1..kMaxAdoptClaims
// lengths, strictly ascending inside [1, context_size), each with a 32-byte
// digest.
absl::Status ValidateAdoptPrefix(const v1::AdoptPrefixRequest& request, const StepLimits& limits);

// Bytes of hidden state a well-formed step of `n_tokens` carries at most:
// the bound on a node's gRPC message size follows from it.
uint64_t MaxStepBytes(const StepLimits& limits);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_STEP_VALIDATOR_H_
