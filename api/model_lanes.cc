#include "api/model_lanes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/api_error.h"

namespace ringlm {
namespace {

// The renderer --chat-template asks for; when that cannot be built, the
// model's own (which always can), with the error kept for Start to report.
ChatRenderer RendererOf(const ApiOptions& o, GenerationBackend& b, absl::Status* error) {
  absl::StatusOr<ChatRenderer> r =
      ChatRenderer::Create(b.chat_template(), o.chat_template, b.tokenizer());
  if (r.ok()) return *std::move(r);
  *error = r.status();
  return *ChatRenderer::Create(b.chat_template(), {}, b.tokenizer());
}

// The most bytes of prompt text that one token of `vocab` can stand for: its
// longest piece, and at least 4 (the longest UTF-8 character, which may
// become one unknown token). A piece is never shorter than the text it
// matches: a SentencePiece "\u2581" (3 bytes) stands for a space, a
// "<0xNN>" piece for one byte, a GPT-2 byte-level code point (1 or 2 bytes)
// for one byte, and control and user-defined pieces for their own text.
size_t MaxBytesPerToken(const Vocabulary& vocab) {
  size_t longest = 4;
  for (const std::string& piece : vocab.pieces) longest = std::max(longest, piece.size());
  return longest;
}

std::vector<std::string> NamesOr(std::vector<std::string> names, const GenerationBackend& b) {
  if (names.empty()) names.push_back(b.model_id());
  return names;
}

}  // namespace

ModelLane::ModelLane(GenerationBackend& b, std::vector<std::string> model_names,
                     const ApiOptions& options, absl::Status* renderer_error)
    : backend(b),
      names(NamesOr(std::move(model_names), b)),
      renderer(RendererOf(options, b, renderer_error)),
      cache(options.prefix_cache,
            [backend = &b](const std::string& session_id) { backend->DropSession(session_id); }),
      replies(options.replies),
      max_token_bytes(MaxBytesPerToken(b.tokenizer().vocabulary())) {}

ModelLanes::ModelLanes(std::vector<ApiModel> models, const ApiOptions& options)
    : accept_any_(options.accept_any_model) {
  if (models.empty()) status_ = absl::InvalidArgumentError("the API was given no model to serve");
  for (ApiModel& model : models) status_.Update(Add(std::move(model), options));
}

absl::StatusOr<std::unique_ptr<ModelLane>> ModelLanes::Build(ApiModel model,
                                                             const ApiOptions& options) const {
  if (model.backend == nullptr) return absl::InvalidArgumentError("a served model has no backend");
  absl::Status renderer_error;
  auto lane =
      std::make_unique<ModelLane>(*model.backend, std::move(model.names), options, &renderer_error);
  std::vector<std::string> seen;
  for (const std::string& name : lane->names) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", lane->backend.model_id(), "' has an empty served name"));
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model name '", name, "' is given twice for model '",
                       lane->backend.model_id(), "' (--served-model-name)"));
    }
    seen.push_back(name);
    if (const ModelLane* owner = FindLocked(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model name '", name, "' is claimed by model '",
                       owner->backend.model_id(), "' and by model '", lane->backend.model_id(),
                       "': a name must pick one model (--served-model-name)"));
    }
  }
  if (!renderer_error.ok()) {
    return absl::Status(renderer_error.code(),
                        absl::StrCat("model '", lane->primary(), "': ", renderer_error.message()));
  }
  return lane;
}

absl::Status ModelLanes::Add(ApiModel model, const ApiOptions& options) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::unique_ptr<ModelLane>> lane = Build(std::move(model), options);
  if (!lane.ok()) return lane.status();
  lanes_.push_back(*std::move(lane));
  return absl::OkStatus();
}

absl::Status ModelLanes::Remove(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ModelLane* lane = FindLocked(name);
  if (lane == nullptr) return NotFoundLocked(name);
  if (lanes_.size() == 1) {
    return absl::FailedPreconditionError("the last model of the server cannot be removed");
  }
  auto it = std::find_if(lanes_.begin(), lanes_.end(),
                         [lane](const std::unique_ptr<ModelLane>& l) { return l.get() == lane; });
  removed_.push_back(std::move(*it));
  lanes_.erase(it);
  return absl::OkStatus();
}

ModelLane& ModelLanes::first() const {
  absl::ReaderMutexLock lock(&mu_);
  return *lanes_.front();
}

std::vector<ModelLane*> ModelLanes::lanes() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<ModelLane*> out;
  for (const std::unique_ptr<ModelLane>& lane : lanes_) out.push_back(lane.get());
  return out;
}

ModelLane* ModelLanes::FindLocked(const std::string& name) const {
  for (const std::unique_ptr<ModelLane>& lane : lanes_) {
    if (std::find(lane->names.begin(), lane->names.end(), name) != lane->names.end()) {
      return lane.get();
    }
  }
  return nullptr;
}

ModelLane* ModelLanes::Find(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  return FindLocked(name);
}

absl::StatusOr<ModelLanes::Route> ModelLanes::Resolve(const std::string& requested) const {
  if (ModelLane* lane = Find(requested)) return Route{lane, requested};
  if (requested.empty() || accept_any_) return Route{&first(), first().primary()};
  return NotFound(requested);
}

absl::Status ModelLanes::NotFound(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  return NotFoundLocked(name);
}

absl::Status ModelLanes::NotFoundLocked(const std::string& name) const {
  std::vector<std::string> served;
  for (const std::unique_ptr<ModelLane>& lane : lanes_) {
    served.insert(served.end(), lane->names.begin(), lane->names.end());
  }
  return WithOpenAiCode(
      absl::NotFoundError(absl::StrCat("The model '", name, "' does not exist; this server has '",
                                       absl::StrJoin(served, "', '"), "'")),
      "model_not_found", "model");
}

}  // namespace ringlm
