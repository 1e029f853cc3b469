#include "inference/grammar/json_schema.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace ringlm::grammar {

absl::StatusOr<Grammar> CompileJsonSchema(const nlohmann::ordered_json& schema,
                                          const GrammarOptions& options) {
  GrammarBuilder builder(options);
  absl::StatusOr<GrammarNode> root = builder.JsonSchema(schema);
  if (!root.ok()) return root.status();
  return builder.Build(*root);
}

absl::StatusOr<std::optional<Grammar>> CompileResponseFormat(
    const nlohmann::ordered_json& response_format, const GrammarOptions& options) {
  if (!response_format.is_object()) {
    return absl::InvalidArgumentError("response_format must be an object");
  }
  auto type = response_format.find("type");
  if (type == response_format.end() || !type->is_string()) {
    return absl::InvalidArgumentError("response_format.type must be a string");
  }
  const std::string kind = type->get<std::string>();
  if (kind == "text") return std::optional<Grammar>();
  if (kind == "json_object") {
    GrammarBuilder builder(options);
    absl::StatusOr<Grammar> grammar = builder.Build(builder.AnyJsonObject());
    if (!grammar.ok()) return grammar.status();
    return std::optional<Grammar>(*std::move(grammar));
  }
  if (kind != "json_schema") {
    return absl::InvalidArgumentError(absl::StrCat("unknown response_format.type '", kind,
                                                   "' (expected text, json_object or "
                                                   "json_schema)"));
  }
  auto spec = response_format.find("json_schema");
  if (spec == response_format.end() || !spec->is_object()) {
    return absl::InvalidArgumentError("response_format.json_schema must be an object");
  }
  auto schema = spec->find("schema");
  if (schema == spec->end()) {
    return absl::InvalidArgumentError("response_format.json_schema.schema is required");
  }
  absl::StatusOr<Grammar> grammar = CompileJsonSchema(*schema, options);
  if (!grammar.ok()) return grammar.status();
  return std::optional<Grammar>(*std::move(grammar));
}

}  // namespace ringlm::grammar
