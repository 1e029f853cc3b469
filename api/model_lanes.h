// The models the API serves, one lane each, and which lane a request's
// `model` names (--served-model-name, --accept-any-model). Internal to
// ApiServer.
#ifndef RINGLM_API_MODEL_LANES_H_
#define RINGLM_API_MODEL_LANES_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/generation_backend.h"
#include "api/openai_server.h"
#include "api/prefix_cache.h"
#include "chat/chat_renderer.h"
#include "chat/reply_store.h"

namespace ringlm {

// One served model and what belongs to its vocabulary: the chat renderer,
// the prefix cache (whose evictions drop sessions on this backend only), the
// replies kept as ids of this vocabulary, and the longest text one of its
// tokens stands for. The backend is not owned. Thread-safe (the cache and
// reply store lock; the rest is immutable).
struct ModelLane {
  // `names` empty = the backend's model id. Sets `renderer_error` when
  // options.chat_template cannot be used with this model.
  ModelLane(GenerationBackend& backend, std::vector<std::string> names, const ApiOptions& options,
            absl::Status* renderer_error);

  const std::string& primary() const { return names.front(); }

  GenerationBackend& backend;
  const std::vector<std::string> names;  // never empty; requests may name any
  // options.chat_template, or the model's own when that could not be built.
  const ChatRenderer renderer;
  PrefixCache cache;
  ReplyStore replies;
  const size_t max_token_bytes;
};

// The lanes, in the order of the models given, and the routing rule:
//   1. a name one model serves picks that model, and the response reports it;
//   2. an absent or empty name picks the first model, reported by its
//      primary (first) name;
//   3. with accept_any_model, any other name does the same;
//   4. otherwise NotFound with OpenAI's "model_not_found" code, listing
//      every served name.
// Lanes are added (Add, for a model loaded at run time) and removed (Remove:
// no request finds it any more), but never destroyed before the ModelLanes,
// so a lane pointer a request holds stays valid. Thread-safe; the backends
// must outlive it.
class ModelLanes {
 public:
  // Builds a lane per model whatever goes wrong; status() says what did.
  ModelLanes(std::vector<ApiModel> models, const ApiOptions& options);
  ModelLanes(const ModelLanes&) = delete;
  ModelLanes& operator=(const ModelLanes&) = delete;

  // OK, or why these models cannot be served (ApiServer::Start reports it):
  // InvalidArgument for no model, a missing backend, an empty name or one
  // that two models claim; chat_template's error when a model cannot use it.
  const absl::Status& status() const { return status_; }

  struct Route {
    ModelLane* lane;
    std::string name;  // what the response reports
  };
  // Precondition (as for first()): status() is OK.
  absl::StatusOr<Route> Resolve(const std::string& requested) const;
  // The lane `name` names exactly; nullptr when none does.
  ModelLane* Find(const std::string& name) const;
  // NotFound ("model_not_found") for `name`, listing the served names.
  absl::Status NotFound(const std::string& name) const;

  // Adds a lane for `model` after the others, with the rules of the
  // constructor: InvalidArgument (nothing added) for a missing backend, an
  // empty name or one already served, or a chat template it cannot use.
  absl::Status Add(ApiModel model, const ApiOptions& options);

  // Takes the lane `name` names out of routing: NotFound when none does;
  // FailedPrecondition for the last lane.
  absl::Status Remove(const std::string& name);

  // Precondition: status() is OK (there is a lane).
  ModelLane& first() const;
  // The lanes now, in order.
  std::vector<ModelLane*> lanes() const;

 private:
  // `lane` built for `model`, or why it cannot be served beside the lanes
  // there are (its names checked against theirs and its own).
  absl::StatusOr<std::unique_ptr<ModelLane>> Build(ApiModel model, const ApiOptions& options) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  ModelLane* FindLocked(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status NotFoundLocked(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<ModelLane>> lanes_ ABSL_GUARDED_BY(mu_);
  // Removed lanes, kept for the requests that still use them.
  std::vector<std::unique_ptr<ModelLane>> removed_ ABSL_GUARDED_BY(mu_);
  const bool accept_any_;
  absl::Status status_;  // from the constructor only
};

}  // namespace ringlm

#endif  // RINGLM_API_MODEL_LANES_H_
