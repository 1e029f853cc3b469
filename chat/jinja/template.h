// A Jinja engine for Hugging Face chat templates.
//
// Template::Parse compiles a model's `chat_template`; Template::Render runs it
// the way transformers' apply_chat_template does: jinja2's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
// loopcontrols extension, HF's `raise_exception(msg)` and `strftime_now(fmt)`
// globals, HF's `tojson` filter (json.dumps, no HTML escaping) and the
// `{% generation %}` block. The aim is output byte-identical to jinja2 for the
// subset real templates use; anything outside that subset fails at parse time
// with absl::StatusCode::kUnimplemented, so the caller can fall back.
//
// Provenance: Render returns segments, each marked control (characters from the
// template's own text or from context values the caller trusts, such as
// bos_token) or content (characters from untrusted values such as messages and
// tools). Concatenation and substring operations keep provenance per
// character; text synthesized from a value (tojson, upper, str() of a number)
// is content when anything it came from is content.
//
// Ownership and threads: a Template owns its parsed program (shared, immutable)
// and is cheap to copy. Render is const and keeps all state on its own stack,
// so one Template may be rendered from several threads at once. Render needs
// roughly RenderOptions::max_call_depth * ParseOptions::max_nesting_depth stack
// frames in the worst case (about 1 MiB with the defaults).
//
// Untrusted templates: parsing and rendering are bounded (source size, nesting
// depth, evaluation steps, output size, macro recursion); exceeding a bound is
// a ResourceExhausted status, never a crash or a hang.
#ifndef RINGLM_CHAT_JINJA_TEMPLATE_H_
#define RINGLM_CHAT_JINJA_TEMPLATE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chat/jinja/value.h"
#include "nlohmann/json.hpp"

namespace ringlm::jinja {

// One run of rendered text. Joining all texts gives jinja2's output.
struct Segment {
  std::string text;
  // True for template text and trusted values; false for client content.
  bool is_control = true;

  friend bool operator==(const Segment& a, const Segment& b) {
    return a.text == b.text && a.is_control == b.is_control;
  }
};

struct ParseOptions {
  // Longer sources are rejected (InvalidArgument).
  size_t max_source_bytes = 1 << 20;
  // Nesting of blocks and expressions; deeper is ResourceExhausted.
  int max_nesting_depth = 64;
};

struct RenderOptions {
  // Output (and any intermediate string) larger than this fails.
  size_t max_output_bytes = 8 << 20;
  // Expression evaluations plus loop iterations; bounds run time.
  int64_t max_steps = 5'000'000;
  // Macro calls nested deeper than this fail (recursive macros).
  int max_call_depth = 32;
  // Lists built by range(), repetition, concatenation, split() or iterating a
  // string larger than this fail.
  size_t max_list_items = 100'000;
  // The clock behind strftime_now (a test seam); null means absl::Now.
  std::function<absl::Time()> now;
  // strftime_now formats in this zone (HF uses the host's local time).
  absl::TimeZone time_zone = absl::LocalTimeZone();
};

class Template {
 public:
  // Errors: InvalidArgument (syntax error, naming the line), Unimplemented
  // (a tag, filter or test this engine does not support, e.g.
  // "unsupported Jinja tag 'include' at line 3"), ResourceExhausted (limits).
  static absl::StatusOr<Template> Parse(std::string_view source, const ParseOptions& options = {});

  // `context` must be a dict; its keys are the template's variables. Errors:
  // InvalidArgument for a template error (the message of raise_exception(msg)
  // is exactly msg; others start with "template error at line N: "),
  // ResourceExhausted when a RenderOptions limit is hit.
  absl::StatusOr<std::vector<Segment>> Render(const Value& context,
                                              const RenderOptions& options = {}) const;

 private:
  struct Program;  // the parsed statements (template.cc)
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}

  std::shared_ptr<const Program> program_;
};

// Builds a render context: each key of `untrusted` (an object: messages,
// tools, documents, ...) becomes content, each key of `trusted` (bos_token,
// eos_token, add_generation_prompt, enable_thinking, ...) becomes control. A
// key present in both takes the untrusted value. Either may be null. Errors:
// InvalidArgument (not objects, or nested deeper than Value::kMaxJsonDepth).
absl::StatusOr<Value> MakeContext(const nlohmann::ordered_json& trusted,
                                  const nlohmann::ordered_json& untrusted);

// Joins segments into the plain rendered text.
std::string JoinSegments(const std::vector<Segment>& segments);

}  // namespace ringlm::jinja

#endif  // RINGLM_CHAT_JINJA_TEMPLATE_H_
