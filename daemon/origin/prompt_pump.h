// The prompt pump: sends the prompts of an origin's requests to stage 0 in
// chunks, within a window of positions in flight.
#ifndef RINGLM_DAEMON_ORIGIN_PROMPT_PUMP_H_
#define RINGLM_DAEMON_ORIGIN_PROMPT_PUMP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "base/task_queue.h"
#include "daemon/origin/origin_options.h"
#include "daemon/origin/request_state.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// Sends the prompts of the requests in a RequestTable (those in kQueued or
// kPrefill with positions left to send) to stage 0, in chunks of
// ChunkTokens, no further ahead of what their last stages noted than
// max_prompt_positions_in_flight allows: requests take turns, a chunk each,
// oldest first, a request with nothing in flight may always send a chunk,
// and one may always keep its chunk times its stage count (plus one) in
// flight.
//
// The parts rule (StageStepRequest.parts_omitted): an attempt's first
// chunk (the one that takes it from kQueued to kPrefill) carries the
// request's parts, every later chunk of the attempt leaves them out.
//
// Owns the sender thread, the only one that sends prompt steps, so each
// request's steps leave in order; Post runs other work in order with them.
// When a step cannot be sent, the request's later chunks of that pump are
// dropped and `on_send_failed` is called (without locks) to recover the
// attempt. Borrows the context and the table, which must outlive it.
// Thread-safe.
class PromptPump {
 public:
  using SendFailed = std::function<void(const std::string& request_id, uint32_t attempt,
                                        const absl::Status& status)>;
  PromptPump(const OriginContext* context, RequestTable* table, SendFailed on_send_failed);
  ~PromptPump();
  PromptPump(const PromptPump&) = delete;
  PromptPump& operator=(const PromptPump&) = delete;

  // Asks the sender thread to pump (once, however often asked). Does
  // nothing once the table stops. The caller holds the table's lock: these
  // two check it at run time (AssertHeld), as clang's analysis cannot tell
  // that a caller's table is the pump's.
  void ScheduleLocked();
  // Whether a pump waits to run: false after ScheduleLocked when the
  // sender's queue was full (or stopped).
  bool ScheduledLocked() const;
  // Runs `task` on the sender thread, after what it sent before; false
  // when the pump stopped or its queue is full.
  bool Post(std::function<void()> task);
  // Lets a running pump finish and drops the rest.
  void Stop();

  // Prompt tokens per chunk from `position` while `streams` requests stream
  // (see busy_chunk_tokens), within max_chunk_tokens and max_chunk_bytes.
  uint32_t ChunkTokens(uint32_t streams, uint32_t position) const;
  // The one place a prompt step is built: positions [start, end) of `a`'s
  // prompt + reply, from node `origin`, for `a`'s attempt, with the parts
  // when `a` is kQueued (nothing of the attempt sent yet).
  static v1::StageStepRequest PromptStep(const ActiveRequest& a, const std::string& origin,
                                         uint32_t start, uint32_t end);

 private:
  // On the sender thread: sends the chunks that fit, a chunk per request
  // and turn.
  void Pump();

  const OriginContext& context_;
  RequestTable* const table_;
  const SendFailed on_send_failed_;
  bool posted_ ABSL_GUARDED_BY(table_->mu) = false;
  TaskQueue sender_;  // last: its thread runs Pump
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_PROMPT_PUMP_H_
