#include "api/completion_handler.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/api_error.h"
#include "api/http_connection_gate.h"
#include "api/openai_format.h"
#include "api/response_writer.h"
#include "base/status_macros.h"
#include "chat/reply_splice.h"
#include "inference/context_limit.h"

namespace ringlm {
namespace {

// How long an HTTP thread waits for backend events before re-checking the
// client and shutdown. Only bounds reaction time; tokens wake it at once.
constexpr absl::Duration kPollInterval = absl::Milliseconds(50);

absl::Status BodyTooLarge() { return absl::OutOfRangeError("The request body is too large"); }

AdmissionOptions LargeBodyTurns(const CompletionHandlerOptions& o) {
  AdmissionOptions turns;
  turns.max_running = o.max_large_bodies;
  turns.max_queued = o.admission.max_queued;
  turns.max_wait = o.admission.max_wait;
  return turns;  // no metrics: they count generations
}

// The most bytes of prompt text that one token of `vocab` can stand for: its
// longest piece, and at least 4 (the longest UTF-8 character, which may
// become one unknown token). A piece is never shorter than the text it
// matches: a SentencePiece "\u2581" (3 bytes) stands for a space, a
// "<0xNN>" piece for one byte, a GPT-2 byte-level code point (1 or 2 bytes)
// for one byte, and control and user-defined pieces for their own text.
size_t MaxBytesPerToken(const Vocabulary& vocab) {
  size_t longest = 4;
  for (const std::string& piece : vocab.pieces) longest = std::max(longest, piece.size());
  return longest;
}

}  // namespace

void SetErrorResponse(const absl::Status& status, httplib::Response& res) {
  HttpError error = ToHttpError(status);
  res.status = error.http_status;
  if (error.retry_after > 0) res.set_header("Retry-After", std::to_string(error.retry_after));
  res.set_content(error.body, "application/json");
}

CompletionHandler::CompletionHandler(GenerationBackend& backend, PrefixCache& cache,
                                     const ServedModels& models, const ChatRenderer& renderer,
                                     CompletionHandlerOptions options)
    : backend_(backend),
      cache_(cache),
      models_(models),
      renderer_(renderer),
      options_(std::move(options)),
      replies_(options_.replies),
      admission_(options_.admission),
      large_bodies_(LargeBodyTurns(options_)),
      max_token_bytes_(MaxBytesPerToken(backend_.tokenizer().vocabulary())) {}

void CompletionHandler::HandleChat(std::string_view body, httplib::Response& res) {
  Serve(body, &ParseChatCompletionRequest, res);
}

void CompletionHandler::HandleResponses(std::string_view body, httplib::Response& res) {
  Serve(body, &ParseResponsesRequest, res);
}

void CompletionHandler::HandleText(std::string_view body, httplib::Response& res) {
  Serve(body, &ParseTextCompletionRequest, res);
}

void CompletionHandler::Serve(std::string_view body, Parser parse, httplib::Response& res) {
  if (body.size() > options_.max_body_bytes) return SetErrorResponse(BodyTooLarge(), res);
  std::optional<Slot> large_body;
  if (body.size() >= options_.large_body_bytes) {
    absl::StatusOr<Slot> turn = large_bodies_.Admit();
    if (!turn.ok()) return SetErrorResponse(turn.status(), res);
    large_body.emplace(*std::move(turn));
  }
  Handle(parse(body, options_.json_limits), std::move(large_body), res);
}

absl::Status CompletionHandler::CheckTextCanFit(size_t text_bytes, size_t fixed_tokens,
                                                std::string_view param) const {
  // Each token stands for at most max_token_bytes_ of the text, so the text
  // is at least this many tokens, whatever it tokenizes to.
  const size_t min_tokens = fixed_tokens + (text_bytes + max_token_bytes_ - 1) / max_token_bytes_;
  const uint32_t context = backend_.context_size();
  if (min_tokens == 0 || CheckPromptFits(min_tokens, context).ok()) return absl::OkStatus();
  return WithOpenAiCode(
      absl::InvalidArgumentError(absl::StrCat("This model's maximum context length is ", context,
                                              " tokens. However, your prompt (", text_bytes,
                                              " bytes of text) is at least ", min_tokens,
                                              " tokens, leaving no room for a completion.")),
      "context_length_exceeded", param);
}

std::vector<int32_t> CompletionHandler::Tokenize(std::vector<PromptSegment> segments) const {
  if (options_.parse_special_in_content) {
    // All text as control: the ids of Encode(joined, true, /*parse_special=*/true).
    for (PromptSegment& segment : segments) segment.is_control = true;
  }
  return backend_.tokenizer().EncodeSegments(segments, /*add_special=*/true);
}

absl::StatusOr<GenerationStream::Params> CompletionHandler::Prepare(
    const CompletionRequest& request) {
  const bool chat = request.kind != CompletionRequest::Kind::kText;
  GenerationStream::Params params;
  if (!request.tools.empty() && renderer_.tool_family() == ToolCallFamily::kNone) {
    return InvalidFieldError("tools",
                             absl::StrCat("this model's chat template (", renderer_.Describe(),
                                          ") does not support tool calls"));
  }
  if (request.tool_choice.mode != ToolChoice::Mode::kNone) {
    params.tool_calls = renderer_.tool_family();
  }
  const char* prompt_param = request.kind == CompletionRequest::Kind::kChat ? "messages"
                             : chat                                         ? "input"
                                                                            : "prompt";
  // Text that can never fit the context is refused before it is tokenized:
  // tokenizing holds tens of bytes per byte of text (8 prompts of 4 MB took
  // the head's peak from 22 MB to 1.3 GB), and the body limit alone lets a
  // prompt hold millions of tokens. Rendering a chat template costs a copy
  // or two of the text, under the large-body turn taken in Serve.
  if (chat) {
    absl::StatusOr<std::vector<PromptSegment>> rendered =
        RenderWithReplyIds(renderer_, request.messages, request.tools, replies_);
    if (!rendered.ok()) {
      return InvalidFieldError(
          request.kind == CompletionRequest::Kind::kChat ? "messages" : "input",
          std::string(rendered.status().message()));
    }
    size_t text_bytes = 0;
    size_t fixed_tokens = 0;  // ids segments, verbatim
    for (const PromptSegment& segment : *rendered) {
      if (segment.ids.empty()) {
        text_bytes += segment.text.size();
      } else {
        fixed_tokens += segment.ids.size();
      }
    }
    RINGLM_RETURN_IF_ERROR(CheckTextCanFit(text_bytes, fixed_tokens, prompt_param));
    params.request.prompt = Tokenize(*std::move(rendered));
  } else if (!request.prompt_ids.empty()) {
    for (int32_t id : request.prompt_ids) {
      if (!backend_.tokenizer().IsValid(id)) {
        return InvalidFieldError("prompt",
                                 absl::StrCat("token id ", id, " is outside the ",
                                              backend_.tokenizer().n_vocab(), "-token vocabulary"));
      }
    }
    params.request.prompt = request.prompt_ids;
  } else {
    // A raw prompt is the client's own text, markers included (as llama.cpp's
    // /completion): special-token text in it becomes control tokens.
    RINGLM_RETURN_IF_ERROR(CheckTextCanFit(request.prompt.size(), 0, prompt_param));
    params.request.prompt = backend_.tokenizer().Encode(request.prompt, /*add_special=*/true,
                                                        /*parse_special=*/true);
  }
  if (params.request.prompt.empty()) {
    return InvalidFieldError(prompt_param, "the prompt is empty");
  }
  const uint32_t context = backend_.context_size();
  if (absl::Status fits = CheckPromptFits(params.request.prompt.size(), context); !fits.ok()) {
    return WithOpenAiCode(std::move(fits), "context_length_exceeded", prompt_param);
  }
  // max_tokens defaults to, and is clamped to, the rest of the context.
  const int32_t remaining =
      static_cast<int32_t>(MaxCompletionTokens(params.request.prompt.size(), context));
  params.request.max_tokens = std::min(request.max_tokens.value_or(remaining), remaining);
  params.request.sampling = request.sampling;
  params.stop = request.stop;
  params.request.logprobs = request.logprobs;
  params.request.top_logprobs = request.top_logprobs;
  RINGLM_ASSIGN_OR_RETURN(params.request.constraint, ConstraintFor(request));
  return params;
}

void CompletionHandler::Handle(absl::StatusOr<CompletionRequest> parsed,
                               std::optional<Slot> large_body, httplib::Response& res) {
  if (!parsed.ok()) return SetErrorResponse(parsed.status(), res);
  // From here on, `model` is the name the response reports.
  absl::StatusOr<std::string> model = models_.Resolve(parsed->model);
  if (!model.ok()) return SetErrorResponse(model.status(), res);
  parsed->model = *std::move(model);
  // Admission before any work that grows with the request or waits.
  absl::StatusOr<Slot> ticket = admission_.Admit();
  if (!ticket.ok()) return SetErrorResponse(ticket.status(), res);
  auto slot = std::make_unique<Slot>(*std::move(ticket));
  absl::StatusOr<GenerationStream::Params> params = Prepare(*parsed);
  large_body.reset();  // the prompt is made: what remains is bounded by the context
  if (!params.ok()) return SetErrorResponse(params.status(), res);
  // Chat replies are recorded, for when the client sends them back.
  ReplyStore* replies = parsed->kind != CompletionRequest::Kind::kText ? &replies_ : nullptr;
  absl::StatusOr<std::unique_ptr<GenerationStream>> stream = GenerationStream::Start(
      backend_, cache_, replies, options_.keep_sessions, *std::move(params));
  if (!stream.ok()) return SetErrorResponse(stream.status(), res);
  if (parsed->stream) {
    RespondStreaming(*parsed, std::move(slot), *std::move(stream), res);
  } else {
    Respond(*parsed, std::move(slot), *std::move(stream), res);
  }
}

absl::StatusOr<std::string> CompletionHandler::ConstraintFor(
    const CompletionRequest& request) const {
  nlohmann::ordered_json spec;
  std::string param;
  if (request.tool_choice.mode == ToolChoice::Mode::kRequired ||
      request.tool_choice.mode == ToolChoice::Mode::kNamed) {
    // The reply must be a call: of any tool, or of the named one.
    nlohmann::ordered_json functions = nlohmann::ordered_json::array();
    for (const ToolDefinition& t : request.tools) {
      if (request.tool_choice.mode == ToolChoice::Mode::kNamed &&
          t.name != request.tool_choice.name) {
        continue;
      }
      functions.push_back({{"name", t.name}, {"parameters", t.parameters}});
    }
    spec = {{"type", "tool_call"},
            {"family", std::string(ToolCallFamilyName(renderer_.tool_family()))},
            {"functions", std::move(functions)}};
    param = "tools";
  } else if (request.response_format.type == ResponseFormat::Type::kJsonObject) {
    spec = {{"type", "json_object"}};
  } else if (request.response_format.type == ResponseFormat::Type::kJsonSchema) {
    spec = {{"type", "json_schema"}, {"schema", request.response_format.schema}};
    param = request.kind == CompletionRequest::Kind::kResponses
                ? "text.format.schema"
                : "response_format.json_schema.schema";
  } else {
    return std::string();
  }
  std::string text = spec.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  // Checked here, once, so that a schema the grammar cannot enforce is a 400
  // and never an error from the last stage.
  if (absl::StatusOr<grammar::Grammar> g = CompileConstraint(text); !g.ok()) {
    return InvalidFieldError(param, std::string(g.status().message()));
  }
  return text;
}

nlohmann::json CompletionHandler::LogprobsJson(const CompletionRequest& request,
                                               std::span<const TokenLogprobs> tokens,
                                               size_t text_offset) const {
  if (!request.logprobs) return nullptr;
  if (request.kind != CompletionRequest::Kind::kText) {
    return ChatLogprobsJson(backend_.tokenizer(), tokens);
  }
  return TextLogprobsJson(backend_.tokenizer(), tokens, text_offset);
}

void CompletionHandler::Respond(const CompletionRequest& request, std::unique_ptr<Slot> /*slot*/,
                                std::unique_ptr<GenerationStream> stream, httplib::Response& res) {
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  std::vector<ParsedToolCall> calls;
  while (!stream->finished()) {
    if (stopping_) {
      stream->Cancel();
      return SetErrorResponse(absl::UnavailableError("the server is shutting down"), res);
    }
    if (GatedHttpServer::CurrentClientGone()) {
      // Nobody will read the answer: stop the work along the ring now.
      stream->Cancel();
      return SetErrorResponse(absl::CancelledError("the client went away"), res);
    }
    text += stream->Poll(kPollInterval);
    for (TokenLogprobs& t : stream->TakeLogprobs()) logprobs.push_back(std::move(t));
    for (ParsedToolCall& c : stream->TakeToolCalls()) calls.push_back(std::move(c));
  }
  if (stream->state() != GenerationStream::State::kDone) {
    return SetErrorResponse(ClientFacing(stream->error()), res);
  }
  const std::unique_ptr<ResponseWriter> writer =
      MakeResponseWriter(request, absl::ToUnixSeconds(absl::Now()));
  const Usage usage{stream->prompt_tokens(), stream->completion_tokens(), stream->cached_tokens()};
  res.status = 200;
  res.set_header("x-request-id", writer->id());
  res.set_content(
      DumpJson(writer->Whole(Answer{std::move(text), stream->finish_reason(), usage,
                                    LogprobsJson(request, logprobs, 0), std::move(calls)})),
      "application/json");
}

namespace {

// A streaming response's state, shared by httplib's content provider and
// resource releaser; it lives as long as the httplib::Response does.
struct SseState {
  CompletionRequest request;
  std::unique_ptr<ResponseWriter> writer;
  bool started = false;
  size_t sent_bytes = 0;                // text sent so far (text_offset of logprobs)
  size_t sent_calls = 0;                // tool calls sent so far
  std::vector<TokenLogprobs> logprobs;  // of tokens whose text is not sent yet
  std::unique_ptr<GenerationStream> stream;
  std::shared_ptr<void> slot;
};

}  // namespace

void CompletionHandler::RespondStreaming(const CompletionRequest& request,
                                         std::unique_ptr<Slot> slot,
                                         std::unique_ptr<GenerationStream> stream,
                                         httplib::Response& res) {
  auto state = std::make_shared<SseState>();
  state->request = request;
  state->writer = MakeResponseWriter(request, absl::ToUnixSeconds(absl::Now()));
  state->stream = std::move(stream);
  state->slot = std::shared_ptr<Slot>(std::move(slot));
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("x-request-id", state->writer->id());
  // Called repeatedly on this HTTP thread until sink.done(). Returning false,
  // or a failed write, aborts the response; the releaser then cancels.
  auto provider = [state, this](size_t /*offset*/, httplib::DataSink& sink) -> bool {
    GenerationStream& gen = *state->stream;
    ResponseWriter& writer = *state->writer;
    auto write = [&sink, &gen](const std::string& data) {
      if (data.empty() || sink.write(data.data(), data.size())) return true;
      gen.Cancel();  // the client is gone
      return false;
    };
    if (stopping_) {
      gen.Cancel();
      return false;
    }
    if (!state->started) {
      state->started = true;
      if (!write(writer.StreamStart())) return false;
    }
    const std::string text = gen.Poll(kPollInterval);
    for (TokenLogprobs& t : gen.TakeLogprobs()) state->logprobs.push_back(std::move(t));
    // A chunk's logprobs are those of the tokens whose text it completes.
    auto take_logprobs = [&] {
      if (state->logprobs.empty()) return nlohmann::json(nullptr);
      nlohmann::json json = LogprobsJson(state->request, state->logprobs, state->sent_bytes);
      state->logprobs.clear();
      return json;
    };
    if (!text.empty()) {
      nlohmann::json logprobs = take_logprobs();
      state->sent_bytes += text.size();
      if (!write(writer.StreamText(text, logprobs))) return false;
    }
    if (std::vector<ParsedToolCall> calls = gen.TakeToolCalls(); !calls.empty()) {
      if (!write(writer.StreamToolCalls(calls, state->sent_calls))) return false;
      state->sent_calls += calls.size();
    }
    if (!gen.finished()) return true;
    std::string tail;
    if (gen.state() == GenerationStream::State::kDone) {
      tail =
          writer.StreamEnd(gen.finish_reason(),
                           Usage{gen.prompt_tokens(), gen.completion_tokens(), gen.cached_tokens()},
                           take_logprobs());
    } else {
      // Headers are gone already: report the error in-band, as OpenAI does.
      tail = writer.StreamError(ToHttpError(ClientFacing(gen.error())));
    }
    if (!write(tail)) return false;
    sink.done();
    return true;
  };
  res.set_chunked_content_provider("text/event-stream", std::move(provider), [state](bool success) {
    if (!success) state->stream->Cancel();
  });
}

}  // namespace ringlm
