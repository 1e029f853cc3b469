#include "inference/draft_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace ringlm {
namespace {

// The prompt goes in steps of this many positions (a stage's chunk).
constexpr size_t kChunk = 512;

int32_t Argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

absl::Status CheckSameVocabulary(const Tokenizer& target, const Tokenizer& draft) {
  if (target.n_vocab() != draft.n_vocab()) {
    return absl::InvalidArgumentError(absl::StrCat("the draft model has ", draft.n_vocab(),
                                                   " tokens, the model ", target.n_vocab()));
  }
  const std::vector<std::string>& a = target.vocabulary().pieces;
  const std::vector<std::string>& b = draft.vocabulary().pieces;
  for (size_t id = 0; id < a.size() && id < b.size(); ++id) {
    if (a[id] != b[id]) {
      return absl::InvalidArgumentError(absl::StrCat("token ", id, " is '", b[id],
                                                     "' in the draft model, '", a[id],
                                                     "' in the model: not the same vocabulary"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DraftModel>> DraftModel::Load(const std::string& path,
                                                             const Tokenizer& target,
                                                             uint32_t context_size,
                                                             ThreadPool* pool,
                                                             size_t max_sessions) {
  ModelOptions options;
  options.context_size = context_size;
  RINGLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(path, options));
  if (absl::Status s = CheckSameVocabulary(target, model->tokenizer()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("draft model ", path, ": ", s.message()));
  }
  RINGLM_RETURN_IF_ERROR(model->LoadIntoMemory());
  return std::unique_ptr<DraftModel>(
      new DraftModel(std::move(model), context_size, pool, std::max<size_t>(1, max_sessions)));
}

DraftModel::DraftModel(std::unique_ptr<Model> model, uint32_t context_size, ThreadPool* pool,
                       size_t max_sessions)
    : model_(std::move(model)),
      engine_(model_->config(), model_->weights(), pool),
      context_size_(std::min(context_size, model_->context_size())),
      max_sessions_(max_sessions) {}

DraftModel::Session& DraftModel::SessionFor(const std::string& key) {
  auto it = sessions_.find(key);
  if (it == sessions_.end()) {
    if (sessions_.size() >= max_sessions_) {
      auto oldest = sessions_.begin();
      for (auto s = sessions_.begin(); s != sessions_.end(); ++s) {
        if (s->second.last_used < oldest->second.last_used) oldest = s;
      }
      sessions_.erase(oldest);
    }
    it = sessions_.emplace(key, Session{engine_.NewCache(context_size_), {}}).first;
  }
  it->second.last_used = std::chrono::steady_clock::now();
  return it->second;
}

absl::StatusOr<std::vector<int32_t>> DraftModel::Draft(const std::string& key,
                                                       std::span<const int32_t> history,
                                                       uint32_t k) {
  if (k == 0 || history.empty()) return std::vector<int32_t>{};
  KvCache& cache = SessionFor(key).cache;
  // Keep what the cache holds of `history`, but recompute at least its
  // last token: its logits are the first guess's.
  const std::vector<int32_t>& held = cache.tokens();
  const size_t common =
      std::mismatch(held.begin(), held.end(), history.begin(), history.end()).first - held.begin();
  cache.Truncate(static_cast<uint32_t>(std::min(common, history.size() - 1)));
  for (size_t at = cache.n_positions(); at < history.size(); at += kChunk) {
    const size_t n = std::min(kChunk, history.size() - at);
    if (cache.n_positions() + n > cache.max_positions()) return std::vector<int32_t>{};
    RINGLM_RETURN_IF_ERROR(engine_.Forward(cache, StageInput{history.subspan(at, n), {}},
                                           LogitsMode::kLastPosition, &logits_));
  }
  std::vector<int32_t> drafts;
  for (uint32_t i = 0; i < k; ++i) {
    const int32_t token = Argmax(logits_);
    drafts.push_back(token);
    if (i + 1 == k || cache.n_positions() + 1 > cache.max_positions()) break;
    RINGLM_RETURN_IF_ERROR(engine_.Forward(cache, StageInput{std::span(&drafts.back(), 1), {}},
                                           LogitsMode::kLastPosition, &logits_));
  }
  return drafts;
}

}  // namespace ringlm
