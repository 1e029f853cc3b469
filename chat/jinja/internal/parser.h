// Recursive-descent parser for the Jinja subset Hugging Face chat templates
// use, following jinja2.parser's grammar and operator precedence.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_PARSER_H_
#define RINGLM_CHAT_JINJA_INTERNAL_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "chat/jinja/internal/ast.h"

namespace ringlm::jinja::internal {

// Parses a whole template. Errors: InvalidArgument for syntax errors,
// Unimplemented for constructs this engine does not support (include, import,
// extends, block, call, recursive loops, ...), ResourceExhausted when nesting
// exceeds `max_depth`. Every message names the line.
absl::StatusOr<Body> ParseTemplate(std::string_view source, int max_depth);

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_PARSER_H_
