// Tokenizer for Jinja template source with jinja2 3.1's whitespace rules for
// trim_blocks=True and lstrip_blocks=True (see Lex for the exact rules).
#ifndef RINGLM_CHAT_JINJA_INTERNAL_LEXER_H_
#define RINGLM_CHAT_JINJA_INTERNAL_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringlm::jinja::internal {

enum class TokenType {
  kData,        // literal template text (value = the text)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,    // value = decoded string
  kInteger,   // int_value
  kFloat,     // float_value
  kOperator,  // value = the operator
  kEof,
};

struct Token {
  TokenType type;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Splits `source` into tokens. Mirrors jinja2.lexer.Lexer.tokeniter:
//  - "\r\n" and "\r" become "\n"; one trailing newline is dropped;
//  - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}",
//    "-#}" strip all whitespace after it;
//  - trim_blocks: the first "\n" after "%}" or "#}" is dropped;
//  - lstrip_blocks: spaces/tabs between a line start and "{%" / "{#" are
//    dropped (not before "{{", and not with "{%+");
//  - {% raw %}...{% endraw %} yields its body as data.
// Comments produce no tokens. Errors are InvalidArgument naming the line.
absl::StatusOr<std::vector<Token>> Lex(std::string_view source);

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_LEXER_H_
