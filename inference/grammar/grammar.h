// Grammars for constrained decoding: literal bytes, sequences, choices and JSON
// values constrained by a JSON schema, compiled into an immutable Grammar that
// GrammarMatcher (grammar_matcher.h) enforces token by token.
#ifndef RINGLM_INFERENCE_GRAMMAR_GRAMMAR_H_
#define RINGLM_INFERENCE_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ringlm::grammar {

namespace internal {
struct GrammarData;
struct BuilderState;
}  // namespace internal

// Bounds that make every output finite and every grammar small. All lengths
// count Unicode code points (as JSON Schema does); an escape counts as one.
struct GrammarOptions {
  // Strings with no maxLength: at most this many code points.
  uint32_t max_string_length = 2048;
  // Keys of additional (free) object properties: at most this many code points.
  uint32_t max_key_length = 256;
  // Arrays with no maxItems: at most this many items.
  uint32_t max_array_items = 64;
  // Objects allowing additional properties: at most this many of them.
  uint32_t max_additional_properties = 32;
  // Free-form values ({"type":"json_object"}, {} or an untyped schema): at most
  // this many nested containers, the outermost included.
  uint32_t max_any_depth = 8;
  // Numbers: digit bounds of the integer part, the fraction and the exponent.
  uint32_t max_integer_digits = 16;
  uint32_t max_fraction_digits = 16;
  uint32_t max_exponent_digits = 2;
  // Whitespace between JSON tokens: "" | " " | "\n" followed by up to this many
  // spaces or tabs.
  uint32_t max_whitespace_indent = 20;
  // $ref expansions nested deeper than this are cut (that alternative is dropped).
  uint32_t max_ref_depth = 8;
  // Schemas nested deeper than this (objects in objects...) are refused.
  uint32_t max_schema_depth = 64;
  // Grammar nodes plus enum trie nodes: more is refused.
  uint32_t max_grammar_size = 1u << 18;
  // Longest chain of nested grammar nodes (bounds the parse-stack depth).
  uint32_t max_grammar_depth = 2048;
  // Live parse stacks per matcher: further ambiguous alternatives are dropped.
  uint32_t max_parse_heads = 1024;

  // InvalidArgument if a bound is zero where that would make JSON impossible.
  absl::Status Validate() const;
};

// A compiled grammar: immutable, cheap to copy (shares its data), thread-safe
// to share between matchers. Made by GrammarBuilder or the Compile* helpers.
class Grammar {
 public:
  // Number of grammar nodes (for logs and limits).
  size_t size() const;

  const internal::GrammarData& data() const { return *data_; }

 private:
  friend class GrammarBuilder;
  explicit Grammar(std::shared_ptr<const internal::GrammarData> data) : data_(std::move(data)) {}
  std::shared_ptr<const internal::GrammarData> data_;
};

// A handle to a node of the grammar being built; valid only with its builder.
struct GrammarNode {
  uint32_t id = UINT32_MAX;
};

// GrammarBuilder: builds one Grammar from literals, sequences, choices and
// JSON schemas, e.g. a forced tool call:
//   Choice({Sequence({Literal("<tool_call>\n{\"name\": \"get_weather\", "
//                             "\"arguments\": "),
//                     *JsonSchema(params), Literal("}\n</tool_call>")}), ...})
// Nodes may be shared by several parents. Errors (size limits, foreign nodes)
// are sticky: they are reported by Build(). Not thread-safe; single use.
class GrammarBuilder {
 public:
  explicit GrammarBuilder(GrammarOptions options = {});
  ~GrammarBuilder();
  GrammarBuilder(const GrammarBuilder&) = delete;
  GrammarBuilder& operator=(const GrammarBuilder&) = delete;

  // Exactly `bytes` (any bytes; "" matches the empty string).
  GrammarNode Literal(std::string_view bytes);
  // Each part in order; an empty list matches "".
  GrammarNode Sequence(const std::vector<GrammarNode>& parts);
  // Any one alternative; an empty list matches nothing.
  GrammarNode Choice(const std::vector<GrammarNode>& alternatives);

  // One JSON value valid against `schema` (json_schema.h lists the supported
  // keywords), with no whitespace around it. InvalidArgument names the first
  // unsupported keyword or malformed part. Object properties are emitted in the
  // schema's order (pass ordered_json, or the text, to keep the author's order;
  // nlohmann::json sorts keys).
  absl::StatusOr<GrammarNode> JsonSchema(const nlohmann::ordered_json& schema);
  absl::StatusOr<GrammarNode> JsonSchema(const nlohmann::json& schema);
  absl::StatusOr<GrammarNode> JsonSchemaText(std::string_view schema_text);
  // Any JSON object / any JSON value, within the options' bounds.
  GrammarNode AnyJsonObject();
  GrammarNode AnyJsonValue();

  // Finishes the grammar with `root` as its start. InvalidArgument if an error
  // was recorded, if `root` can match no finite string (e.g. a schema whose
  // required recursion exceeds max_ref_depth), or if a bound was exceeded.
  absl::StatusOr<Grammar> Build(GrammarNode root);

 private:
  std::unique_ptr<internal::BuilderState> state_;
};

}  // namespace ringlm::grammar

#endif  // RINGLM_INFERENCE_GRAMMAR_GRAMMAR_H_
