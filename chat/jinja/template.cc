#include "chat/jinja/template.h"

#include <utility>

#include "absl/status/status.h"
#include "chat/jinja/internal/interpreter.h"
#include "chat/jinja/internal/parser.h"
#include "chat/jinja/internal/str_cat.h"

namespace ringlm::jinja {
using internal::Cat;

struct Template::Program {
  internal::Body body;
};

absl::StatusOr<Template> Template::Parse(std::string_view source, const ParseOptions& options) {
  if (source.size() > options.max_source_bytes) {
    return absl::InvalidArgumentError(
        Cat("template is ", source.size(), " bytes, more than ", options.max_source_bytes));
  }
  absl::StatusOr<internal::Body> body = internal::ParseTemplate(source, options.max_nesting_depth);
  if (!body.ok()) return body.status();
  auto program = std::make_shared<Program>();
  program->body = std::move(*body);
  return Template(std::move(program));
}

absl::StatusOr<std::vector<Segment>> Template::Render(const Value& context,
                                                      const RenderOptions& options) const {
  if (!context.is_dict()) {
    return absl::InvalidArgumentError("template context must be a dict");
  }
  internal::Interpreter interpreter(options);
  absl::StatusOr<Text> text = interpreter.Run(program_->body, context.AsDict());
  if (!text.ok()) return text.status();
  std::vector<Segment> segments;
  size_t offset = 0;
  for (const Text::Run& run : text->runs()) {
    segments.push_back(Segment{text->str().substr(offset, run.length), run.control});
    offset += run.length;
  }
  return segments;
}

absl::StatusOr<Value> MakeContext(const nlohmann::ordered_json& trusted,
                                  const nlohmann::ordered_json& untrusted) {
  if ((!trusted.is_null() && !trusted.is_object()) ||
      (!untrusted.is_null() && !untrusted.is_object())) {
    return absl::InvalidArgumentError("context parts must be JSON objects");
  }
  ValueDict dict;
  for (const auto* part : {&trusted, &untrusted}) {
    if (part->is_null()) continue;
    bool is_trusted = part == &trusted;
    for (auto it = part->begin(); it != part->end(); ++it) {
      absl::StatusOr<Value> v = Value::FromJson(it.value(), is_trusted);
      if (!v.ok()) return v.status();
      dict.Set(it.key(), std::move(*v));
    }
  }
  return Value::Dict(std::move(dict));
}

std::string JoinSegments(const std::vector<Segment>& segments) {
  std::string out;
  for (const Segment& s : segments) out += s.text;
  return out;
}

}  // namespace ringlm::jinja
