#include "daemon/origin/request_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringlm {

std::string_view OriginStateName(OriginState state) {
  switch (state) {
    case OriginState::kQueued:
      return "queued";
    case OriginState::kPrefill:
      return "prefill";
    case OriginState::kDecode:
      return "decode";
    case OriginState::kRecovering:
      return "recovering";
    case OriginState::kDone:
      return "done";
    case OriginState::kCancelled:
      return "cancelled";
    case OriginState::kFailed:
      return "failed";
  }
  return "unknown";
}

OriginState EndState(v1::FinishReason finish) {
  switch (finish) {
    case v1::FINISH_REASON_STOP:
    case v1::FINISH_REASON_LENGTH:
      return OriginState::kDone;
    case v1::FINISH_REASON_ERROR:
      return OriginState::kFailed;
    default:
      return OriginState::kCancelled;
  }
}

std::string StageRequestId(const std::string& request_id, uint32_t attempt) {
  return absl::StrCat(request_id, "#", attempt);
}

void ActiveRequest::BeginAttempt() {
  state = OriginState::kQueued;
  prompt_end = static_cast<uint32_t>(request.generation.prompt.size() + reply.size());
  sent = request.generation.reuse.reuse_len;
  noted_positions = 0;
}

void ActiveRequest::ChunkSent(uint32_t end) {
  state = OriginState::kPrefill;
  sent = end;
}

void ActiveRequest::TakeToken(int32_t token) {
  reply.push_back(token);
  state = OriginState::kDecode;
}

void ActiveRequest::StartRecovery(std::chrono::steady_clock::time_point now) {
  state = OriginState::kRecovering;
  ++recoveries;
  ++attempt;  // what the failed attempt still sends is ignored
  failed_at = now;
}

void ActiveRequest::RestartWithoutReuse() {
  ++attempt;
  request.generation.reuse.reuse_len = 0;
  request.generation.reuse.fork_from.clear();
  BeginAttempt();
}

void ActiveRequest::Replanned(v1::Plan plan) {
  request.plan = std::move(plan);
  if (!reply.empty()) {
    // Every stage took all but the last token delivered (the one in flight
    // when the attempt failed): claim that much.
    request.generation.reuse.reuse_len =
        static_cast<uint32_t>(request.generation.prompt.size() + reply.size() - 1);
    request.generation.reuse.fork_from.clear();
  }  // else the original claim stands: the prompt never got through
  BeginAttempt();
}

bool ActiveRequest::AwaitsFirstToken() const {
  return state == OriginState::kQueued || state == OriginState::kPrefill;
}

uint32_t ActiveRequest::InFlight() const {
  // In kQueued nothing is sent yet (sent == reuse_len, or no prompt at all).
  if (state != OriginState::kPrefill) return 0;
  return sent - std::max(noted_positions, request.generation.reuse.reuse_len);
}

bool ActiveRequest::SendsPrompt() const { return AwaitsFirstToken() && sent < prompt_end; }

bool ActiveRequest::Streams() const {
  const bool runs = AwaitsFirstToken() || state == OriginState::kDecode;
  return runs && prompt_end > 0 && sent >= prompt_end;
}

ActiveRequest* RequestTable::FindLocked(const std::string& request_id, uint32_t attempt) {
  auto it = requests.find(request_id);
  return it == requests.end() || it->second.attempt != attempt ? nullptr : &it->second;
}

}  // namespace ringlm
