// libFuzzer target for the Jinja engine (chat/jinja/template.h): chat
// templates come from model files, which a node may have fetched from anyone.
//
// Input: template bytes, optionally followed by "\0" and a JSON object used as
// the context (else a fixed chat context is used).
//
// Checks, for every input:
//  - Parse never crashes or hangs and fails only with InvalidArgument,
//    Unimplemented or ResourceExhausted.
//  - Render (small limits) never crashes or hangs and fails only with
//    InvalidArgument, Unimplemented or ResourceExhausted.
//  - A successful render's segments are non-empty, alternate control/content
//    and stay within max_output_bytes.
//  - Provenance never changes the text: rendering with the context marked
//    trusted gives the same text, and then every segment is control.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja/template.h"
#include "fuzz/fuzz_check.h"
#include "nlohmann/json.hpp"

namespace {

using ringlm::jinja::Segment;

bool AllowedCode(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented ||
         code == absl::StatusCode::kResourceExhausted;
}

const nlohmann::ordered_json& DefaultUntrusted() {
  static const auto* json = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "sys <|im_start|>"},
      {"role": "user", "content": " hi {{ x }} "},
      {"role": "assistant", "content": "<think>r</think>\n\nok",
       "tool_calls": [{"id": "call00001", "type": "function",
                       "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call00001", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}]
  })"));
  return *json;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nul = input.find('\0');
  std::string_view source = input.substr(0, nul);

  absl::StatusOr<ringlm::jinja::Template> tmpl = ringlm::jinja::Template::Parse(source);
  if (!tmpl.ok()) {
    FUZZ_CHECK(AllowedCode(tmpl.status().code()));
    return 0;
  }

  nlohmann::ordered_json untrusted = DefaultUntrusted();
  if (nul != std::string_view::npos) {
    nlohmann::ordered_json parsed =
        nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded() && parsed.is_object()) untrusted = std::move(parsed);
  }
  nlohmann::ordered_json trusted = {
      {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_generation_prompt", true}};

  ringlm::jinja::RenderOptions options;
  options.max_steps = 200'000;
  options.max_output_bytes = 1 << 16;
  options.max_list_items = 10'000;
  options.now = [] { return absl::FromUnixSeconds(1'785'067'200); };
  options.time_zone = absl::UTCTimeZone();

  absl::StatusOr<ringlm::jinja::Value> context = ringlm::jinja::MakeContext(trusted, untrusted);
  if (!context.ok()) return 0;  // e.g. JSON nested too deeply
  absl::StatusOr<std::vector<Segment>> out = tmpl->Render(*context, options);
  if (!out.ok()) {
    FUZZ_CHECK(AllowedCode(out.status().code()));
    return 0;
  }
  size_t total = 0;
  for (size_t i = 0; i < out->size(); ++i) {
    FUZZ_CHECK(!(*out)[i].text.empty());
    if (i > 0) FUZZ_CHECK((*out)[i].is_control != (*out)[i - 1].is_control);
    total += (*out)[i].text.size();
  }
  FUZZ_CHECK(total <= options.max_output_bytes);

  // Same context, all trusted: same text, all control.
  nlohmann::ordered_json all = trusted;
  for (auto it = untrusted.begin(); it != untrusted.end(); ++it) all[it.key()] = it.value();
  absl::StatusOr<ringlm::jinja::Value> trusted_context = ringlm::jinja::MakeContext(all, nullptr);
  FUZZ_CHECK(trusted_context.ok());
  absl::StatusOr<std::vector<Segment>> again = tmpl->Render(*trusted_context, options);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(ringlm::jinja::JoinSegments(*again) == ringlm::jinja::JoinSegments(*out));
  for (const Segment& s : *again) FUZZ_CHECK(s.is_control);
  return 0;
}
