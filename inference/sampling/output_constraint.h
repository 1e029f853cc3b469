// What a reply must match, as the head decides it (response_format, a forced
// tool call) and the last stage enforces it: a small JSON spec that travels
// with the request, compiled into a grammar (inference/grammar) on each side.
//
// Spec (JSON text, at most kMaxConstraintBytes):
//   {"type":"json_object"}                         any JSON object
//   {"type":"json_schema","schema":{...}}          a value valid against schema
//   {"type":"tool_call","family":F,"functions":[{"name":N,"parameters":{...}}, ...]}
//       one call of one of the functions, in the syntax of family F:
//         "hermes"      <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>
//         "llama3-json" {"name": "N", "parameters": ARGS}
//         "mistral"     [{"name": "N", "arguments": ARGS}]
//         "deepseek-v3" <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
//                       \n```json\nARGS\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//                       (its markers are control tokens, which the vocabulary
//                       spells where the caller lets them: see
//                       ToolCallSyntax::shown_tokens)
//       where ARGS is valid against that function's parameters.
#ifndef RINGLM_INFERENCE_SAMPLING_OUTPUT_CONSTRAINT_H_
#define RINGLM_INFERENCE_SAMPLING_OUTPUT_CONSTRAINT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/grammar/grammar.h"
#include "inference/grammar/grammar_matcher.h"
#include "inference/grammar/token_vocabulary.h"
#include "nlohmann/json.hpp"

namespace ringlm {

inline constexpr size_t kMaxConstraintBytes = 32 << 10;

// Compiles a spec. InvalidArgument (with a message fit for the client) for a
// spec that is not one of the above, larger than kMaxConstraintBytes, or
// whose schema the grammar compiler refuses. Pure and thread-safe.
absl::StatusOr<grammar::Grammar> CompileConstraint(std::string_view spec);

// Applies a grammar to sampling, one step at a time: masks the logits, then
// follows the sampled token. `end_tokens` (the model's end-of-generation ids)
// are allowed exactly when the grammar is complete, and are the only choice
// once nothing more may follow. Not thread-safe: one per request.
class ConstrainedSampling {
 public:
  ConstrainedSampling(grammar::Grammar grammar,
                      std::shared_ptr<const grammar::TokenVocabulary> vocabulary,
                      std::shared_ptr<const std::vector<int32_t>> end_tokens);

  // Sets every disallowed logit to -inf (in place). FailedPrecondition when
  // no token at all is allowed (a vocabulary that cannot spell the grammar).
  absl::Status Mask(std::span<float> logits);
  // Follows the token chosen from the masked logits (an end token ends it).
  absl::Status Accept(int32_t token);

 private:
  grammar::GrammarMatcher matcher_;
  std::shared_ptr<const std::vector<int32_t>> end_tokens_;
  std::vector<uint8_t> allowed_;  // scratch [vocab]
};

// The matcher's view of a vocabulary: each token's bytes as it appears in
// text (`piece(id)`), "" for tokens that never appear in a constrained reply
// (control, unknown, unused: `is_text(id)` false).
template <typename PieceFn, typename IsTextFn>
std::shared_ptr<const grammar::TokenVocabulary> MakeTokenVocabulary(int32_t n_vocab, PieceFn piece,
                                                                    IsTextFn is_text) {
  std::vector<std::string> bytes(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (is_text(id)) bytes[static_cast<size_t>(id)] = piece(id);
  }
  return std::make_shared<const grammar::TokenVocabulary>(std::move(bytes));
}

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_SAMPLING_OUTPUT_CONSTRAINT_H_
