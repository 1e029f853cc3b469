#include "daemon/origin/prompt_pump.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/token_digest.h"

namespace ringlm {

PromptPump::PromptPump(const OriginContext* context, RequestTable* table, SendFailed on_send_failed)
    : context_(*context),
      table_(table),
      on_send_failed_(std::move(on_send_failed)),
      sender_("origin-sender") {}

PromptPump::~PromptPump() { Stop(); }

void PromptPump::Stop() { sender_.Stop(); }

bool PromptPump::Post(std::function<void()> task) { return sender_.Post(std::move(task)); }

void PromptPump::ScheduleLocked() {
  table_->mu.AssertHeld();
  if (posted_ || table_->stopping) return;
  posted_ = sender_.Post([this] { Pump(); });
}

bool PromptPump::ScheduledLocked() const {
  table_->mu.AssertHeld();
  return posted_;
}

uint32_t PromptPump::ChunkTokens(uint32_t streams, uint32_t position) const {
  const OriginOptions& o = context_.options;
  const uint64_t by_bytes = o.max_chunk_bytes / (uint64_t{context_.model.n_embd} * 4);
  uint64_t tokens = o.max_chunk_tokens;
  if (streams > 0) {
    tokens =
        std::min<uint64_t>({tokens, o.busy_chunk_tokens,
                            uint64_t{o.busy_chunk_tokens_per_stream} * (uint64_t{streams} + 1)});
    const double depth = o.busy_chunk_depth_per_embd * context_.model.n_embd;
    if (depth > 0) {
      tokens = static_cast<uint64_t>(std::lround(static_cast<double>(tokens) * depth /
                                                 (depth + static_cast<double>(position))));
    }
  }
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(by_bytes, tokens)));
}

void PromptPump::Pump() {
  struct Outgoing {
    std::string id;
    uint32_t attempt;
    std::string to;
    v1::StageStepRequest step;
  };
  std::vector<Outgoing> out;
  {
    absl::MutexLock lock(&table_->mu);
    posted_ = false;
    uint64_t in_flight = 0;
    uint32_t streams = 0;
    std::vector<std::pair<uint64_t, ActiveRequest*>> waiting;  // order, request
    for (auto& [id, a] : table_->requests) {
      in_flight += a.InFlight();
      if (a.Streams()) ++streams;
      if (a.SendsPrompt()) waiting.emplace_back(a.order, &a);
    }
    std::sort(waiting.begin(), waiting.end());
    // One chunk per request and round, oldest first, so that every stage
    // finds many sessions' chunks to batch. A request with nothing in
    // flight may always send one.
    for (bool sent_any = true; sent_any;) {
      sent_any = false;
      for (const auto& [order, a] : waiting) {
        if (a->sent >= a->prompt_end) continue;
        const uint32_t chunk = ChunkTokens(streams, a->sent);
        const uint32_t end = std::min(a->prompt_end, a->sent + chunk);
        const uint64_t budget =
            std::max<uint64_t>(context_.options.max_prompt_positions_in_flight,
                               uint64_t{chunk} * (a->request.plan.stages_size() + 1));
        if (a->InFlight() > 0 && in_flight + (end - a->sent) > budget) continue;
        out.push_back({a->request.request_id, a->attempt, a->request.plan.stages(0).node_id(),
                       PromptStep(*a, context_.self_id, a->sent, end)});
        in_flight += end - a->sent;
        a->ChunkSent(end);
        sent_any = true;
      }
    }
  }
  std::set<std::string> failed;
  for (const Outgoing& o : out) {
    if (failed.count(o.id) > 0) continue;
    if (absl::Status s = context_.transport->StageStep(o.to, o.step); !s.ok()) {
      failed.insert(o.id);
      on_send_failed_(o.id, o.attempt,
                      absl::Status(s.code(), absl::StrCat("sending the prompt to stage 0 (node ",
                                                          o.to, "): ", s.message())));
    }
  }
}

v1::StageStepRequest PromptPump::PromptStep(const ActiveRequest& a, const std::string& origin,
                                            uint32_t start, uint32_t end) {
  const OriginRequest& r = a.request;
  const GenerationRequest& g = r.generation;
  auto token = [&](uint32_t i) {
    return i < g.prompt.size() ? g.prompt[i] : a.reply[i - g.prompt.size()];
  };
  v1::StageStepRequest step;
  step.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  step.set_request_id(StageRequestId(r.request_id, a.attempt));
  if (start == g.reuse.reuse_len && g.reuse.reuse_len > 0) {
    std::vector<int32_t> reused(g.reuse.reuse_len);
    for (uint32_t i = 0; i < g.reuse.reuse_len; ++i) reused[i] = token(i);
    step.set_reuse_len(g.reuse.reuse_len);
    step.set_reuse_digest(TokenDigest(reused));
    step.set_fork_from(g.reuse.fork_from);
  }
  step.set_session_id(r.session_id());
  step.set_stage_index(0);
  step.set_origin(origin);
  step.set_position(start);
  for (uint32_t i = start; i < end; ++i) step.add_tokens(token(i));
  step.set_sample(end == a.prompt_end);
  step.set_generated(static_cast<uint32_t>(a.reply.size()));
  // The request's parts go with the attempt's first chunk only (each
  // attempt is a new request at the stages, which keep them).
  if (a.state == OriginState::kQueued) {
    *step.mutable_plan() = r.plan;
    *step.mutable_sampling() = SamplingToProto(g.sampling);
    step.mutable_limits()->set_max_tokens(g.max_tokens);
    step.mutable_limits()->set_ignore_eos(g.ignore_eos);
    step.mutable_logprobs()->set_enabled(g.logprobs);
    step.mutable_logprobs()->set_top(static_cast<uint32_t>(g.top_logprobs));
    step.set_constraint(g.constraint);
    step.set_wire_dtype(g.f16_hidden ? v1::DTYPE_F16 : v1::DTYPE_F32);
    if (r.max_drafts > 0) {
      step.mutable_speculation()->set_max_drafts(r.max_drafts);
      step.mutable_speculation()->set_steps_in_flight(r.steps_in_flight);
    }
  } else {
    step.set_parts_omitted(true);
  }
  return step;
}

}  // namespace ringlm
