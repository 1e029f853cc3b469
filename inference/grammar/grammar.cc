#include "inference/grammar/grammar.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "inference/grammar/internal/builder_state.h"
#include "inference/grammar/internal/schema_compiler.h"

namespace ringlm::grammar {

absl::Status GrammarOptions::Validate() const {
  const std::pair<const char*, uint32_t> positive[] = {
      {"max_any_depth", max_any_depth},
      {"max_integer_digits", max_integer_digits},
      {"max_fraction_digits", max_fraction_digits},
      {"max_exponent_digits", max_exponent_digits},
      {"max_schema_depth", max_schema_depth},
      {"max_grammar_size", max_grammar_size},
      {"max_grammar_depth", max_grammar_depth},
      {"max_parse_heads", max_parse_heads},
  };
  for (const auto& [name, value] : positive) {
    if (value == 0) return absl::InvalidArgumentError(absl::StrCat(name, " must be positive"));
  }
  constexpr uint32_t kMaxLength = 1u << 20;  // fits the string state's 24 bits.
  if (max_string_length > kMaxLength || max_key_length > kMaxLength ||
      max_array_items > kMaxLength || max_additional_properties > kMaxLength ||
      max_any_depth > 64) {
    return absl::InvalidArgumentError("grammar options: a length bound is too large");
  }
  return absl::OkStatus();
}

size_t Grammar::size() const { return data_->nodes.size(); }

GrammarBuilder::GrammarBuilder(GrammarOptions options)
    : state_(std::make_unique<internal::BuilderState>(options)) {}

GrammarBuilder::~GrammarBuilder() = default;

GrammarNode GrammarBuilder::Literal(std::string_view bytes) { return {state_->Literal(bytes)}; }

GrammarNode GrammarBuilder::Sequence(const std::vector<GrammarNode>& parts) {
  std::vector<internal::NodeId> ids;
  for (GrammarNode p : parts) ids.push_back(p.id);
  return {state_->Sequence(std::move(ids))};
}

GrammarNode GrammarBuilder::Choice(const std::vector<GrammarNode>& alternatives) {
  std::vector<internal::NodeId> ids;
  for (GrammarNode a : alternatives) ids.push_back(a.id);
  return {state_->Choice(std::move(ids))};
}

absl::StatusOr<GrammarNode> GrammarBuilder::JsonSchema(const nlohmann::ordered_json& schema) {
  if (!state_->error.ok()) return state_->error;
  internal::SchemaCompiler compiler(state_.get(), &schema);
  absl::StatusOr<internal::NodeId> id = compiler.CompileRoot();
  if (!id.ok()) return id.status();
  if (!state_->error.ok()) return state_->error;
  return GrammarNode{*id};
}

absl::StatusOr<GrammarNode> GrammarBuilder::JsonSchema(const nlohmann::json& schema) {
  return JsonSchema(nlohmann::ordered_json::parse(schema.dump()));
}

absl::StatusOr<GrammarNode> GrammarBuilder::JsonSchemaText(std::string_view schema_text) {
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return absl::InvalidArgumentError("json schema is not valid JSON");
  return JsonSchema(schema);
}

GrammarNode GrammarBuilder::AnyJsonObject() {
  return {state_->AnyObject(state_->options.max_any_depth)};
}

GrammarNode GrammarBuilder::AnyJsonValue() {
  return {state_->AnyValue(state_->options.max_any_depth)};
}

absl::StatusOr<Grammar> GrammarBuilder::Build(GrammarNode root) {
  if (!state_->error.ok()) return state_->error;
  if (state_->built) return absl::FailedPreconditionError("GrammarBuilder::Build called twice");
  state_->built = true;
  auto data = std::make_shared<internal::GrammarData>(std::move(state_->data));
  data->root = root.id;
  if (absl::Status s = internal::FinishGrammar(state_->options, data.get()); !s.ok()) return s;
  return Grammar(std::move(data));
}

}  // namespace ringlm::grammar
