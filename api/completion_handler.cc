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

// OK unless `text_bytes` of prompt text plus `fixed_tokens` verbatim ids
// cannot fit the lane's context, whatever the text tokenizes to: then the
// same 400 context_length_exceeded (on `param`) that CheckPromptFits gives
// after tokenizing. Costs no allocation that grows with the text.
absl::Status CheckTextCanFit(const ModelLane& lane, size_t text_bytes, size_t fixed_tokens,
                             std::string_view param) {
  // Each token stands for at most max_token_bytes of the text, so the text
  // is at least this many tokens, whatever it tokenizes to.
  const size_t min_tokens =
      fixed_tokens + (text_bytes + lane.max_token_bytes - 1) / lane.max_token_bytes;
  const uint32_t context = lane.backend.context_size();
  if (min_tokens == 0 || CheckPromptFits(min_tokens, context).ok()) return absl::OkStatus();
  return WithOpenAiCode(
      absl::InvalidArgumentError(absl::StrCat("This model's maximum context length is ", context,
                                              " tokens. However, your prompt (", text_bytes,
                                              " bytes of text) is at least ", min_tokens,
                                              " tokens, leaving no room for a completion.")),
      "context_length_exceeded", param);
}

// The output_constraint.h spec the reply must match ("" = free text): a
// forced tool call (in `family`'s format), else the response format.
// InvalidArgument naming the field when the grammar cannot enforce it.
absl::StatusOr<std::string> ConstraintFor(const CompletionRequest& request, ToolCallFamily family) {
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
            {"family", std::string(ToolCallFamilyName(family))},
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

// choices[0].logprobs for `tokens` (null unless the request asked).
nlohmann::json LogprobsJson(const CompletionRequest& request, const Tokenizer& tokenizer,
                            std::span<const TokenLogprobs> tokens, size_t text_offset) {
  if (!request.logprobs) return nullptr;
  if (request.kind != CompletionRequest::Kind::kText) return ChatLogprobsJson(tokenizer, tokens);
  return TextLogprobsJson(tokenizer, tokens, text_offset);
}

}  // namespace

void SetErrorResponse(const absl::Status& status, httplib::Response& res) {
  HttpError error = ToHttpError(status);
  res.status = error.http_status;
  if (error.retry_after > 0) res.set_header("Retry-After", std::to_string(error.retry_after));
  res.set_content(error.body, "application/json");
}

CompletionHandler::CompletionHandler(const ModelLanes& lanes, CompletionHandlerOptions options)
    : lanes_(lanes),
      options_(std::move(options)),
      admission_(options_.admission),
      large_bodies_(LargeBodyTurns(options_)) {}

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

std::vector<int32_t> CompletionHandler::Tokenize(const Tokenizer& tokenizer,
                                                 std::vector<PromptSegment> segments) const {
  if (options_.parse_special_in_content) {
    // All text as control: the ids of Encode(joined, true, /*parse_special=*/true).
    for (PromptSegment& segment : segments) segment.is_control = true;
  }
  return tokenizer.EncodeSegments(segments, /*add_special=*/true);
}

absl::StatusOr<GenerationStream::Params> CompletionHandler::Prepare(
    const CompletionRequest& request, ModelLane& lane) {
  const bool chat = request.kind != CompletionRequest::Kind::kText;
  const ChatRenderer& renderer = lane.renderer;
  const Tokenizer& tokenizer = lane.backend.tokenizer();
  GenerationStream::Params params;
  if (!request.tools.empty() && renderer.tool_family() == ToolCallFamily::kNone) {
    return InvalidFieldError("tools",
                             absl::StrCat("this model's chat template (", renderer.Describe(),
                                          ") does not support tool calls"));
  }
  if (request.tool_choice.mode != ToolChoice::Mode::kNone) {
    params.tool_calls = renderer.tool_family();
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
        RenderWithReplyIds(renderer, request.messages, request.tools, lane.replies);
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
    RINGLM_RETURN_IF_ERROR(CheckTextCanFit(lane, text_bytes, fixed_tokens, prompt_param));
    params.request.prompt = Tokenize(tokenizer, *std::move(rendered));
  } else if (!request.prompt_ids.empty()) {
    for (int32_t id : request.prompt_ids) {
      if (!tokenizer.IsValid(id)) {
        return InvalidFieldError("prompt", absl::StrCat("token id ", id, " is outside the ",
                                                        tokenizer.n_vocab(), "-token vocabulary"));
      }
    }
    params.request.prompt = request.prompt_ids;
  } else {
    // A raw prompt is the client's own text, markers included (as llama.cpp's
    // /completion): special-token text in it becomes control tokens.
    RINGLM_RETURN_IF_ERROR(CheckTextCanFit(lane, request.prompt.size(), 0, prompt_param));
    params.request.prompt = tokenizer.Encode(request.prompt, /*add_special=*/true,
                                             /*parse_special=*/true);
  }
  if (params.request.prompt.empty()) {
    return InvalidFieldError(prompt_param, "the prompt is empty");
  }
  const uint32_t context = lane.backend.context_size();
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
  RINGLM_ASSIGN_OR_RETURN(params.request.constraint,
                          ConstraintFor(request, renderer.tool_family()));
  return params;
}

void CompletionHandler::Handle(absl::StatusOr<CompletionRequest> parsed,
                               std::optional<Slot> large_body, httplib::Response& res) {
  if (!parsed.ok()) return SetErrorResponse(parsed.status(), res);
  absl::StatusOr<ModelLanes::Route> route = lanes_.Resolve(parsed->model);
  if (!route.ok()) return SetErrorResponse(route.status(), res);
  ModelLane& lane = *route->lane;
  // From here on, `model` is the name the response reports.
  parsed->model = std::move(route->name);
  // Admission before any work that grows with the request or waits.
  absl::StatusOr<Slot> ticket = admission_.Admit();
  if (!ticket.ok()) return SetErrorResponse(ticket.status(), res);
  auto slot = std::make_unique<Slot>(*std::move(ticket));
  absl::StatusOr<GenerationStream::Params> params = Prepare(*parsed, lane);
  large_body.reset();  // the prompt is made: what remains is bounded by the context
  if (!params.ok()) return SetErrorResponse(params.status(), res);
  // Chat replies are recorded, for when the client sends them back.
  ReplyStore* replies = parsed->kind != CompletionRequest::Kind::kText ? &lane.replies : nullptr;
  absl::StatusOr<std::unique_ptr<GenerationStream>> stream = GenerationStream::Start(
      lane.backend, lane.cache, replies, options_.keep_sessions, *std::move(params));
  if (!stream.ok()) return SetErrorResponse(stream.status(), res);
  const Tokenizer& tokenizer = lane.backend.tokenizer();
  if (parsed->stream) {
    RespondStreaming(*parsed, tokenizer, std::move(slot), *std::move(stream), res);
  } else {
    Respond(*parsed, tokenizer, std::move(slot), *std::move(stream), res);
  }
}

void CompletionHandler::Respond(const CompletionRequest& request, const Tokenizer& tokenizer,
                                std::unique_ptr<Slot> /*slot*/,
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
  res.set_content(DumpJson(writer->Whole(Answer{std::move(text), stream->finish_reason(), usage,
                                                LogprobsJson(request, tokenizer, logprobs, 0),
                                                std::move(calls)})),
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
                                         const Tokenizer& tokenizer, std::unique_ptr<Slot> slot,
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
  auto provider = [state, tokenizer = &tokenizer, this](size_t /*offset*/,
                                                        httplib::DataSink& sink) -> bool {
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
      nlohmann::json json =
          LogprobsJson(state->request, *tokenizer, state->logprobs, state->sent_bytes);
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
