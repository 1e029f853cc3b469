// The model names the API answers to (--served-model-name, --accept-any-model).
#ifndef RINGLM_API_SERVED_MODELS_H_
#define RINGLM_API_SERVED_MODELS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringlm {

// Which `model` values a request may name, and the name a response reports.
// Immutable; thread-safe.
//   - names: what /v1/models lists, first the primary; empty = the backend's
//     own model id alone.
//   - accept_any: any name is taken (clients with a hard-coded default such
//     as "gpt-3.5-turbo"); the response then reports the primary name.
class ServedModels {
 public:
  ServedModels(std::vector<std::string> names, bool accept_any, const std::string& model_id);

  const std::vector<std::string>& names() const { return names_; }
  const std::string& primary() const { return names_.front(); }
  // The name a response to a request for `requested` reports: itself when
  // served, the primary for an empty name or under accept_any; else
  // NotFound with OpenAI's "model_not_found" code.
  absl::StatusOr<std::string> Resolve(const std::string& requested) const;
  bool Serves(const std::string& name) const;

 private:
  std::vector<std::string> names_;
  bool accept_any_ = false;
};

}  // namespace ringlm

#endif  // RINGLM_API_SERVED_MODELS_H_
