// One generation request as the HTTP side sees it: submitted to the backend,
// read back as text, finished, and recorded in the prefix cache (and, for a
// chat reply, in the reply store).
#ifndef RINGLM_API_GENERATION_STREAM_H_
#define RINGLM_API_GENERATION_STREAM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/generation_backend.h"
#include "api/prefix_cache.h"
#include "api/stop_filter.h"
#include "chat/reply_store.h"
#include "chat/tool_call_parser.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

// The request's state machine. Only the owning HTTP thread moves it; backend
// threads only append events to an inbox that Poll drains.
//
//   kQueued ──first event──> kRunning ──EOS / stop string / finish event──> kDone
//      │                        │
//      ├──error event───────────┴──> kFailed
//      └──Cancel() (client gone)────> kCancelled
//
// Entering a terminal state (kDone, kFailed, kCancelled) drops the backend
// handle, which cancels the request if it still runs (after a stop string
// matched, say), and settles the prefix-cache lease: kDone records the prompt
// plus every sampled token but the last (the positions whose KV the stages
// wrote); kFailed and kCancelled abandon the session. kDone also records the
// reply in the ReplyStore, when there is one: the text Poll returned, with
// the sampled ids that spell it exactly (ExactReplyIds; not recorded when
// none do).
//
// Not thread-safe: one HTTP thread owns it. The backend may call back after the
// stream is gone; the inbox it writes to is shared and outlives both.
class GenerationStream {
 public:
  enum class State { kQueued, kRunning, kDone, kFailed, kCancelled };

  // The request as the backend takes it (the lease fills its `reuse`), and
  // what the HTTP side does with the reply's text.
  struct Params {
    GenerationRequest request;  // prompt tokenized, non-empty, fits the context
    std::vector<std::string> stop;
    // Not kNone: tool calls in this family's syntax are taken out of the text
    // (TakeToolCalls), and a reply with calls finishes as "tool_calls". The
    // family's shown_tokens (tool_call_syntax.h) are then decoded as their
    // text, for the scanner (and as content, where they make no call).
    ToolCallFamily tool_calls = ToolCallFamily::kNone;
  };

  // Takes a lease from `cache` and submits. On a Submit error the lease is
  // abandoned and the backend's status returned. `backend`, `cache` and
  // `replies` (null: the reply is not recorded) must outlive the stream.
  // keep_session asks the stages to keep the KV.
  static absl::StatusOr<std::unique_ptr<GenerationStream>> Start(GenerationBackend& backend,
                                                                 PrefixCache& cache,
                                                                 ReplyStore* replies,
                                                                 bool keep_session, Params params);
  ~GenerationStream();

  // Waits up to `timeout` for backend events (not at all once terminal),
  // applies them, and returns the text that may be shown now: complete UTF-8,
  // cut at a stop string, minus any tail that could start one. Often "".
  std::string Poll(absl::Duration timeout);

  // The tool calls completed since the last call, in order.
  std::vector<ParsedToolCall> TakeToolCalls();

  // The logprobs of the tokens sampled since the last call, in order (not of
  // an end-of-generation token). Empty unless the request asked for logprobs.
  std::vector<TokenLogprobs> TakeLogprobs();

  // The client went away: drop the request. No-op once terminal.
  void Cancel();

  State state() const { return state_; }
  bool finished() const { return state_ >= State::kDone; }
  // kDone: "stop" (EOS or a stop string), "length", or "tool_calls" when the
  // reply made any.
  const std::string& finish_reason() const { return finish_reason_; }
  // kFailed: why.
  const absl::Status& error() const { return error_; }

  uint32_t prompt_tokens() const { return static_cast<uint32_t>(prompt_.size()); }
  uint32_t completion_tokens() const { return static_cast<uint32_t>(sampled_.size()); }
  uint32_t cached_tokens() const { return cached_tokens_; }
  const PrefixReuse& reuse() const { return lease_->reuse(); }

 private:
  struct Inbox;
  GenerationStream(const Tokenizer& tokenizer, PrefixCache& cache, ReplyStore* replies,
                   Params params, PrefixCache::Lease lease);
  // Applies one event; appends shown text to `out`.
  void Apply(const GenerationEvent& event, std::string& out);
  void FinishDone(std::string_view reason, std::string& out);
  // The text `token` adds: its piece, or a shown tool-call marker's text.
  std::string Decode(int32_t token);
  // What of the reply's visible text is content (the tool scanner's cut).
  std::string Shown(std::string text);
  void FinishFailed(absl::Status error);

  const Tokenizer& tokenizer_;
  PrefixCache& cache_;
  ReplyStore* const replies_;  // null: no reply recorded
  std::vector<int32_t> prompt_;
  int32_t max_tokens_;
  std::shared_ptr<Inbox> inbox_;
  std::unique_ptr<GenerationHandle> handle_;
  std::optional<PrefixCache::Lease> lease_;
  StreamingDecoder decoder_;
  StopFilter stop_filter_;
  std::optional<ToolCallScanner> tool_scanner_;
  // Control tokens decoded as their text for the scanner: (id, text).
  std::vector<std::pair<int32_t, std::string>> shown_tokens_;
  State state_ = State::kQueued;
  std::vector<int32_t> sampled_;         // every sampled token, EOS included
  std::string content_;                  // every byte Poll returned (when replies_)
  std::vector<TokenLogprobs> logprobs_;  // not yet taken
  uint32_t cached_tokens_ = 0;
  std::string finish_reason_;
  absl::Status error_;
};

}  // namespace ringlm

#endif  // RINGLM_API_GENERATION_STREAM_H_
