#include "inference/sampling/output_constraint.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "inference/grammar/json_schema.h"
#include "inference/sampling/tool_call_syntax.h"

namespace ringlm {
namespace {

using Json = nlohmann::ordered_json;

// A mask costs about one vocabulary-trie walk per live parse head (~4 ms
// each on a 128k vocabulary inside a string), so a client's ambiguous schema
// (anyOf of overlapping strings, say) could make every step of a stage take
// seconds. Past this many heads the matcher drops alternatives (every kept
// one still completes, so replies stay valid): masks stay under ~100 ms.
constexpr uint32_t kMaxParseHeads = 16;

grammar::GrammarOptions Options() {
  grammar::GrammarOptions options;
  options.max_parse_heads = kMaxParseHeads;
  return options;
}

absl::Status Bad(std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("output constraint: ", std::string(why)));
}

absl::StatusOr<grammar::Grammar> CompileToolCall(const Json& spec) {
  const auto family = spec.find("family");
  const auto functions = spec.find("functions");
  if (family == spec.end() || !family->is_string() || functions == spec.end() ||
      !functions->is_array() || functions->empty()) {
    return Bad("a tool_call needs a family and functions");
  }
  const ToolCallSyntax* syntax = FindToolCallSyntax(family->get<std::string>());
  if (syntax == nullptr) {
    return Bad(absl::StrCat("unknown tool-call family '", family->get<std::string>(), "'"));
  }
  grammar::GrammarBuilder b(Options());
  std::vector<grammar::GrammarNode> calls;
  for (const Json& f : *functions) {
    const auto name = f.find("name");
    const auto parameters = f.find("parameters");
    if (!f.is_object() || name == f.end() || !name->is_string() || parameters == f.end()) {
      return Bad("each function needs a name and parameters");
    }
    absl::StatusOr<grammar::GrammarNode> args = b.JsonSchema(*parameters);
    if (!args.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the parameters of '", name->get<std::string>(), "': ", args.status().message()));
    }
    calls.push_back(
        b.Sequence({b.Literal(name->get<std::string>() + std::string(syntax->name_close)), *args}));
  }
  return b.Build(b.Sequence({b.Literal(std::string(syntax->call_open)), b.Choice(calls),
                             b.Literal(std::string(syntax->call_close))}));
}

}  // namespace

absl::StatusOr<grammar::Grammar> CompileConstraint(std::string_view spec_text) {
  if (spec_text.size() > kMaxConstraintBytes) {
    return Bad(absl::StrCat("larger than ", kMaxConstraintBytes, " bytes"));
  }
  const Json spec = Json::parse(spec_text, nullptr, /*allow_exceptions=*/false);
  const auto type = spec.is_object() ? spec.find("type") : spec.end();
  if (type == spec.end() || !type->is_string()) return Bad("not a JSON object with a type");
  if (*type == "json_object") {
    grammar::GrammarBuilder b(Options());
    return b.Build(b.AnyJsonObject());
  }
  if (*type == "json_schema") {
    const auto schema = spec.find("schema");
    if (schema == spec.end()) return Bad("json_schema needs a schema");
    return grammar::CompileJsonSchema(*schema, Options());
  }
  if (*type == "tool_call") return CompileToolCall(spec);
  return Bad(absl::StrCat("unknown type ", type->dump()));
}

ConstrainedSampling::ConstrainedSampling(grammar::Grammar grammar,
                                         std::shared_ptr<const grammar::TokenVocabulary> vocabulary,
                                         std::shared_ptr<const std::vector<int32_t>> end_tokens)
    : matcher_(std::move(grammar), std::move(vocabulary)), end_tokens_(std::move(end_tokens)) {}

absl::Status ConstrainedSampling::Mask(std::span<float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (matcher_.IsFinished()) {
    allowed_.assign(logits.size(), 0);
  } else {
    matcher_.FillMask(&allowed_);
    allowed_.resize(logits.size(), 0);
  }
  bool any = false;
  if (matcher_.CanEnd()) {
    for (int32_t id : *end_tokens_) {
      if (id >= 0 && static_cast<size_t>(id) < allowed_.size()) allowed_[id] = 1;
    }
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (allowed_[i] == 0) {
      logits[i] = kNegInf;
    } else {
      any = true;
    }
  }
  if (!any)
    return absl::FailedPreconditionError(
        "no token of this vocabulary continues the reply's grammar");
  return absl::OkStatus();
}

absl::Status ConstrainedSampling::Accept(int32_t token) {
  if (std::find(end_tokens_->begin(), end_tokens_->end(), token) != end_tokens_->end()) {
    return absl::OkStatus();
  }
  return matcher_.Accept(token);
}

}  // namespace ringlm
