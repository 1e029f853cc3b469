// How a head takes over a conversation that another head started: the
// prompt's prefixes, offered by digest, and the longest that every stage of
// the plan holds (AdoptPrefix, docs/heads.md).
#ifndef RINGLM_DAEMON_ORIGIN_PREFIX_ADOPTION_H_
#define RINGLM_DAEMON_ORIGIN_PREFIX_ADOPTION_H_

#include <cstdint>
#include <span>
#include <string>

#include "daemon/rpc/transport.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// The prefixes of `prompt` a head offers for session `session_id`: every
// multiple of a stride of 16 tokens (a KV block; wider for long prompts, so
// that there are at most kMaxAdoptClaims) below prompt.size() - 1, and
// prompt.size() - 1 itself (at least one token is always computed), with
// their digests. No lengths for a prompt of fewer than 2 tokens.
v1::AdoptPrefixRequest AdoptionOffer(const std::string& session_id,
                                     std::span<const int32_t> prompt);

// Asks the stages of `plan`, in ring order, to adopt the longest offered
// prefix they hold into session `session_id`; each later stage is offered
// only what the earlier ones took. Returns the positions every stage now
// holds (one of the offered lengths), or 0 as soon as one stage holds none,
// fails to answer or answers a length it was not offered. What a stage
// adopted beyond the result is cut back by the request's first step.
uint32_t AdoptPrefix(Transport& transport, const v1::Plan& plan, const std::string& session_id,
                     std::span<const int32_t> prompt);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_PREFIX_ADOPTION_H_
