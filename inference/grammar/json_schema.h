// JSON schema and OpenAI response_format compilation into a Grammar.
//
// Supported (enforced exactly):
//   type (one or a list), properties, required, additionalProperties (false,
//   true or a schema; absent: see Generation shape), items (a schema or a
//   boolean), minItems/maxItems, minLength/maxLength (code points), enum,
//   const, anyOf, oneOf (as anyOf: exact when its branches are disjoint),
//   allOf with one schema, $ref to "#" or any local JSON pointer ("#/$defs/x",
//   "#/definitions/x"; recursion is unrolled max_ref_depth times, deeper
//   alternatives are cut), uniqueItems: false, boolean schemas, and
//   minimum/maximum/exclusiveMinimum/exclusiveMaximum for integers (clamped
//   to 18 digits; a schema with only these keywords is narrowed to integers).
// Ignored (annotations): title, description, default, examples, $schema, $id,
//   $comment, deprecated, readOnly, writeOnly, $defs, definitions, $anchor,
//   contentMediaType, contentEncoding, discriminator, and unknown keywords.
// Refused with InvalidArgument naming the keyword: pattern, format,
//   minimum/maximum on type number, multipleOf, patternProperties,
//   propertyNames, min/maxProperties, dependent*, if/then/else, not,
//   contains, prefixItems, unevaluated*, additionalItems, uniqueItems: true,
//   allOf with several schemas, and $ref/anyOf/oneOf/enum combined with other
//   validity keywords (enum/const may sit beside type).
//
// Generation shape (a subset of what the schema allows):
//   - object members come in the order of `properties`: required ones always,
//     optional ones may be skipped; additional properties (if allowed) come
//     after all declared ones, at most max_additional_properties of them, with
//     keys of at most max_key_length code points that differ from every
//     declared name (to make sure of that, such keys use no escapes);
//   - an object schema that lists `properties` (even `{}`) and leaves
//     additionalProperties out gets none: JSON Schema would allow any, but a
//     weak model then invents keys and never closes the object (llama.cpp's
//     json-schema-to-grammar closes it too; OpenAI's strict mode requires
//     false). Without `properties` it is any object, as in JSON Schema;
//   - a schema with no type is narrowed to the types its keywords imply
//     (properties -> object, items -> array, minLength -> string), or any
//     value if none;
//   - strings: any JSON string characters, escapes included (\uD800-\uDFFF
//     refused: no surrogates), valid UTF-8 only;
//   - numbers: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? with digit
//     bounds; integers have no fraction or exponent;
//   - whitespace between tokens: "" | " " | "\n" [ \t]{0,max_whitespace_indent};
//     none before or after the whole value.
#ifndef RINGLM_INFERENCE_GRAMMAR_JSON_SCHEMA_H_
#define RINGLM_INFERENCE_GRAMMAR_JSON_SCHEMA_H_

#include <optional>

#include "absl/status/statusor.h"
#include "inference/grammar/grammar.h"
#include "nlohmann/json.hpp"

namespace ringlm::grammar {

// One JSON value valid against `schema`; InvalidArgument for a bad or
// unsupported schema.
absl::StatusOr<Grammar> CompileJsonSchema(const nlohmann::ordered_json& schema,
                                          const GrammarOptions& options = {});

// The OpenAI `response_format` object:
//   {"type":"text"}        -> std::nullopt (no constraint);
//   {"type":"json_object"} -> any JSON object;
//   {"type":"json_schema","json_schema":{"name":...,"schema":{...},"strict":...}}
//                          -> that schema ("strict" changes nothing here: the
//                             schema is followed as written).
// Anything else -> InvalidArgument (the API maps it to HTTP 400).
absl::StatusOr<std::optional<Grammar>> CompileResponseFormat(
    const nlohmann::ordered_json& response_format, const GrammarOptions& options = {});

}  // namespace ringlm::grammar

#endif  // RINGLM_INFERENCE_GRAMMAR_JSON_SCHEMA_H_
