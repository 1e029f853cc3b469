// libFuzzer target: the OpenAI request bodies (api/completion_request.h), and
// what the completion handler does next with an accepted chat body: render
// the chat template and tokenize the prompt.
//
// Checks, for every input:
//  - ParseChatCompletionRequest and ParseTextCompletionRequest never crash or
//    hang, and reject only with InvalidArgument.
//  - An accepted chat request has what the header promises: 1+ messages with
//    role system/user/assistant/tool (developer already mapped), tool calls
//    only on assistant messages, at most 4 stop strings, none empty,
//    max_tokens >= 1 when set, valid sampling params.
//  - Every built-in chat format renders it as non-empty segments that
//    alternate control/content, unless it carries tool calls or results,
//    which they refuse with InvalidArgument.
//  - With the bundled model's tokenizer (loaded once, read-only): the prompt
//    tokenizes to valid ids with BOS first; tokenizing with every segment
//    marked as content equals Encode(joined, parse_special = false), the
//    documented meaning of "content" (no forged control tokens); and the
//    streaming decoder turns the ids back into valid UTF-8.
//  - An accepted text request's prompt tokenizes to valid ids.
// The model is $RINGLM_FUZZ_MODEL, else the stories260K GGUF beside the repo
// (RINGLM_FUZZ_DEFAULT_MODEL, set at configure time). Without it only the
// parsers are fuzzed (a warning says so).
//
// The one piece of state that changes between runs is the parser's own
// thread-local RNG for requests without a seed; it only picks the seed value,
// never a code path.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/completion_request.h"
#include "chat/chat_template.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/utf8_check.h"
#include "gguf/gguf_file.h"
#include "inference/tokenizer/tokenizer.h"
#include "inference/vocabulary_loader.h"

namespace ringlm {
namespace {

const Tokenizer* g_tokenizer = nullptr;  // set once in LLVMFuzzerInitialize

constexpr ChatFormat kFormats[] = {ChatFormat::kLlama2,  ChatFormat::kLlama3, ChatFormat::kChatML,
                                   ChatFormat::kMistral, ChatFormat::kZephyr, ChatFormat::kPlain};

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "chat_request_fuzzer: %s\n", std::string(file.status().message()).c_str());
    return nullptr;
  }
  absl::StatusOr<Vocabulary> vocab = LoadVocabulary(**file);
  if (!vocab.ok()) {
    std::fprintf(stderr, "chat_request_fuzzer: %s\n",
                 std::string(vocab.status().message()).c_str());
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Create(*std::move(vocab));
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "chat_request_fuzzer: %s\n",
                 std::string(tokenizer.status().message()).c_str());
    return nullptr;
  }
  return *std::move(tokenizer);
}

void CheckIds(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) FUZZ_CHECK(tokenizer.IsValid(id));
  if (tokenizer.vocabulary().add_bos) {
    FUZZ_CHECK(!ids.empty() && ids.front() == tokenizer.bos_id());
  }
}

void CheckStreamedText(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  StreamingDecoder decoder(tokenizer);
  std::string text;
  for (int32_t id : ids) text += decoder.Push(id);
  text += decoder.Flush();
  FUZZ_CHECK(fuzz::IsStrictUtf8(text));
  (void)tokenizer.Decode(ids);  // raw bytes: only must not crash
}

void CheckCommon(const CompletionRequest& r) {
  FUZZ_CHECK(r.stop.size() <= 4);
  for (const std::string& s : r.stop) FUZZ_CHECK(!s.empty());
  if (r.max_tokens.has_value()) FUZZ_CHECK(*r.max_tokens >= 1);
  FUZZ_CHECK(r.sampling.Validate().ok());
}

void FuzzChat(std::string_view body, const JsonLimits& limits, uint64_t pick) {
  absl::StatusOr<CompletionRequest> r = ParseChatCompletionRequest(body, limits);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(r->kind == CompletionRequest::Kind::kChat);
  FUZZ_CHECK(!r->messages.empty());
  bool has_tools = false;
  for (const ChatMessage& m : r->messages) {
    FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool");
    FUZZ_CHECK(m.tool_calls.empty() || m.role == "assistant");
    has_tools |= m.role == "tool" || !m.tool_calls.empty();
  }
  CheckCommon(*r);

  std::vector<PromptSegment> chosen;
  for (size_t f = 0; f < std::size(kFormats); ++f) {
    absl::StatusOr<std::vector<PromptSegment>> segments =
        RenderChatSegments(kFormats[f], r->messages, /*add_generation_prompt=*/true);
    if (has_tools) {
      FUZZ_CHECK(segments.status().code() == absl::StatusCode::kInvalidArgument);
      continue;
    }
    FUZZ_CHECK(segments.ok());
    for (size_t i = 0; i < segments->size(); ++i) {
      FUZZ_CHECK(!(*segments)[i].text.empty());
      if (i > 0) FUZZ_CHECK((*segments)[i].is_control != (*segments)[i - 1].is_control);
    }
    if (f == pick % std::size(kFormats)) chosen = *std::move(segments);
  }

  // Tokenize one format per input (chosen by the input) to keep runs fast.
  if (g_tokenizer == nullptr || has_tools) return;
  const std::vector<int32_t> ids = g_tokenizer->EncodeSegments(chosen, /*add_special=*/true);
  CheckIds(*g_tokenizer, ids);
  CheckStreamedText(*g_tokenizer, ids);

  std::vector<PromptSegment> all_content = chosen;
  for (PromptSegment& s : all_content) s.is_control = false;
  FUZZ_CHECK(g_tokenizer->EncodeSegments(all_content, true) ==
             g_tokenizer->Encode(JoinSegments(chosen), true, /*parse_special=*/false));
}

void FuzzText(std::string_view body, const JsonLimits& limits) {
  absl::StatusOr<CompletionRequest> r = ParseTextCompletionRequest(body, limits);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(r->kind == CompletionRequest::Kind::kText);
  CheckCommon(*r);
  if (g_tokenizer == nullptr) return;
  // As the handler does for /v1/completions: the client's markers count.
  CheckIds(*g_tokenizer, g_tokenizer->Encode(r->prompt, true, /*parse_special=*/true));
}

}  // namespace
}  // namespace ringlm

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* env = std::getenv("RINGLM_FUZZ_MODEL");
  const std::string path = env != nullptr && *env != '\0' ? env : RINGLM_FUZZ_DEFAULT_MODEL;
  // Leaked on purpose: read-only for the whole process.
  ringlm::g_tokenizer = ringlm::LoadTokenizer(path).release();
  if (ringlm::g_tokenizer == nullptr) {
    std::fprintf(stderr,
                 "chat_request_fuzzer: WARNING: no tokenizer from %s; fuzzing the parsers only "
                 "(set RINGLM_FUZZ_MODEL)\n",
                 path.c_str());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const ringlm::JsonLimits limits;  // the server's defaults
  uint64_t pick = size;
  for (size_t i = size > 8 ? size - 8 : 0; i < size; ++i) pick = pick * 31 + data[i];
  ringlm::FuzzChat(body, limits, pick);
  ringlm::FuzzText(body, limits);
  return 0;
}
