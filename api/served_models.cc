#include "api/served_models.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/api_error.h"

namespace ringlm {

ServedModels::ServedModels(std::vector<std::string> names, bool accept_any,
                           const std::string& model_id)
    : names_(std::move(names)), accept_any_(accept_any) {
  if (names_.empty()) names_.push_back(model_id);
}

bool ServedModels::Serves(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

absl::StatusOr<std::string> ServedModels::Resolve(const std::string& requested) const {
  if (Serves(requested)) return requested;
  // An absent (or empty) model means the one model this cluster serves.
  if (requested.empty() || accept_any_) return primary();
  return WithOpenAiCode(absl::NotFoundError(absl::StrCat("The model '", requested,
                                                         "' does not exist; this server has '",
                                                         absl::StrJoin(names_, "', '"), "'")),
                        "model_not_found", "model");
}

}  // namespace ringlm
