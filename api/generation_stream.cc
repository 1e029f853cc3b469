#include "api/generation_stream.h"

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringlm {

// Where backend threads leave events for the HTTP thread.
struct GenerationStream::Inbox {
  absl::Mutex mu;
  std::deque<GenerationEvent> events ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<GenerationStream>> GenerationStream::Start(
    GenerationBackend& backend, PrefixCache& cache, ReplyStore* replies, bool keep_session,
    Params params) {
  PrefixCache::Lease lease = cache.Begin(params.request.prompt);
  GenerationRequest request = params.request;  // the stream keeps its prompt
  request.reuse = lease.reuse();
  request.keep_session = keep_session && !request.reuse.session_id.empty();
  std::unique_ptr<GenerationStream> stream(new GenerationStream(
      backend.tokenizer(), cache, replies, std::move(params), std::move(lease)));
  std::shared_ptr<Inbox> inbox = stream->inbox_;
  absl::StatusOr<std::unique_ptr<GenerationHandle>> handle =
      backend.Submit(std::move(request), [inbox](const GenerationEvent& event) {
        absl::MutexLock lock(&inbox->mu);
        inbox->events.push_back(event);
      });
  if (!handle.ok()) {
    stream->cache_.Abandon(*stream->lease_);
    stream->state_ = State::kFailed;
    return handle.status();
  }
  stream->handle_ = *std::move(handle);
  return stream;
}

GenerationStream::GenerationStream(const Tokenizer& tokenizer, PrefixCache& cache,
                                   ReplyStore* replies, Params params, PrefixCache::Lease lease)
    : tokenizer_(tokenizer),
      cache_(cache),
      replies_(replies),
      prompt_(std::move(params.request.prompt)),
      max_tokens_(params.request.max_tokens),
      inbox_(std::make_shared<Inbox>()),
      lease_(std::move(lease)),
      decoder_(tokenizer),
      stop_filter_(std::move(params.stop)) {
  if (params.tool_calls == ToolCallFamily::kNone) return;
  tool_scanner_.emplace(params.tool_calls);
  // The family's markers that are control tokens of this vocabulary (which
  // decode to ""): the scanner must see their text.
  for (std::string_view text : FindToolCallSyntax(params.tool_calls)->shown_tokens) {
    const std::vector<int32_t> ids =
        tokenizer_.Encode(text, /*add_special=*/false, /*parse_special=*/true);
    if (ids.size() == 1 && tokenizer_.TokenToPiece(ids[0]).empty()) {
      shown_tokens_.emplace_back(ids[0], std::string(text));
    }
  }
}

GenerationStream::~GenerationStream() {
  if (!finished()) Cancel();
}

std::string GenerationStream::Poll(absl::Duration timeout) {
  std::string out;
  if (finished()) return out;
  std::deque<GenerationEvent> events;
  {
    absl::MutexLock lock(&inbox_->mu);
    auto has_events = [this]() ABSL_SHARED_LOCKS_REQUIRED(inbox_->mu) {
      return !inbox_->events.empty();
    };
    inbox_->mu.AwaitWithTimeout(absl::Condition(&has_events), timeout);
    events.swap(inbox_->events);
  }
  for (const GenerationEvent& event : events) {
    if (finished()) break;
    Apply(event, out);
  }
  if (replies_ != nullptr) {
    content_ += out;
    // Once, on the poll that finished it: later polls return at the top.
    if (state_ == State::kDone) {
      if (std::optional<std::vector<int32_t>> ids = ExactReplyIds(tokenizer_, sampled_, content_)) {
        replies_->Record(std::move(content_), *std::move(ids));
      }
    }
  }
  return out;
}

void GenerationStream::Apply(const GenerationEvent& event, std::string& out) {
  if (state_ == State::kQueued) {
    state_ = State::kRunning;
    cached_tokens_ = event.cached_tokens;
  }
  if (event.has_token) {
    sampled_.push_back(event.token);
    if (tokenizer_.IsEndOfGeneration(event.token)) return FinishDone("stop", out);
    if (event.logprobs.has_value()) logprobs_.push_back(*event.logprobs);
    out += Shown(stop_filter_.Push(Decode(event.token)));
    if (stop_filter_.stopped()) return FinishDone("stop", out);
    if (static_cast<int32_t>(sampled_.size()) >= max_tokens_) return FinishDone("length", out);
  }
  switch (event.finish) {
    case FinishReason::kNone:
      return;
    case FinishReason::kStop:
      return FinishDone("stop", out);
    case FinishReason::kLength:
      return FinishDone("length", out);
    case FinishReason::kCancelled:
      return FinishFailed(event.error.ok() ? absl::CancelledError("the request was cancelled")
                                           : event.error);
    case FinishReason::kError:
      return FinishFailed(event.error.ok() ? absl::InternalError("the backend failed")
                                           : event.error);
  }
}

void GenerationStream::FinishDone(std::string_view reason, std::string& out) {
  if (!stop_filter_.stopped()) {
    out += Shown(stop_filter_.Push(decoder_.Flush()));
    out += Shown(stop_filter_.Finish());
  }
  if (tool_scanner_) out += tool_scanner_->Finish();
  state_ = State::kDone;
  finish_reason_ =
      tool_scanner_ && tool_scanner_->found_calls() ? "tool_calls" : std::string(reason);
  handle_.reset();  // cancels the request if it is still running (stop string)
  std::vector<int32_t> kv_tokens = prompt_;
  if (!sampled_.empty()) kv_tokens.insert(kv_tokens.end(), sampled_.begin(), sampled_.end() - 1);
  cache_.End(*lease_, std::move(kv_tokens));
}

void GenerationStream::FinishFailed(absl::Status error) {
  state_ = State::kFailed;
  error_ = std::move(error);
  handle_.reset();
  cache_.Abandon(*lease_);
}

std::string GenerationStream::Decode(int32_t token) {
  for (const auto& [id, text] : shown_tokens_) {
    if (id == token) return decoder_.Flush() + text;  // what is held back goes first
  }
  return decoder_.Push(token);
}

std::string GenerationStream::Shown(std::string text) {
  return tool_scanner_ ? tool_scanner_->Push(text) : text;
}

std::vector<ParsedToolCall> GenerationStream::TakeToolCalls() {
  return tool_scanner_ ? tool_scanner_->TakeCalls() : std::vector<ParsedToolCall>{};
}

std::vector<TokenLogprobs> GenerationStream::TakeLogprobs() {
  std::vector<TokenLogprobs> taken;
  taken.swap(logprobs_);
  return taken;
}

void GenerationStream::Cancel() {
  if (finished()) return;
  state_ = State::kCancelled;
  if (handle_ != nullptr) handle_->Cancel();
  handle_.reset();
  cache_.Abandon(*lease_);
}

}  // namespace ringlm
