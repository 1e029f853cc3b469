#include "daemon/cluster_backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

FinishReason FromProto(v1::FinishReason f) {
  switch (f) {
    case v1::FINISH_REASON_STOP:
      return FinishReason::kStop;
    case v1::FINISH_REASON_LENGTH:
      return FinishReason::kLength;
    case v1::FINISH_REASON_CANCELLED:
      return FinishReason::kCancelled;
    case v1::FINISH_REASON_ERROR:
      return FinishReason::kError;
    default:
      return FinishReason::kNone;
  }
}

// Cancels its request when dropped, unless it already ended.
class OriginHandle : public GenerationHandle {
 public:
  OriginHandle(OriginRegistry& origin, std::string request_id)
      : origin_(origin), request_id_(std::move(request_id)) {}
  ~OriginHandle() override { Cancel(); }
  void Cancel() override { origin_.Cancel(request_id_); }

 private:
  OriginRegistry& origin_;
  const std::string request_id_;
};

}  // namespace

ClusterBackend::ClusterBackend(ClusterBackendParts parts) : parts_(std::move(parts)) {}

absl::Status ClusterBackend::Ready() const {
  // The truth now, without waiting: every member of the plan answered its
  // latest authenticated health call with the same partition (/health).
  return parts_.serving();
}

absl::StatusOr<std::unique_ptr<GenerationHandle>> ClusterBackend::Submit(
    GenerationRequest request, std::function<void(const GenerationEvent&)> on_event) {
  OriginRegistry& origin = *parts_.origin;
  RINGLM_ASSIGN_OR_RETURN(OriginRequest r, origin.Prepare(std::move(request)));
  const std::string id = r.request_id;
  RINGLM_RETURN_IF_ERROR(origin.Start(std::move(r), [on_event](const OriginEvent& e) {
    GenerationEvent g;
    g.has_token = e.has_token;
    g.token = e.token;
    g.cached_tokens = e.cached_tokens;
    g.finish = FromProto(e.finish);
    g.error = e.error;
    g.logprobs = e.logprobs;
    on_event(g);
  }));
  return std::make_unique<OriginHandle>(origin, id);
}

void ClusterBackend::DropSession(const std::string& session_id) {
  parts_.origin->DropSessionEverywhere(parts_.cluster()->plan, session_id);
}

const Tokenizer& ClusterBackend::tokenizer() const { return parts_.model->tokenizer(); }

std::string ClusterBackend::model_id() const {
  std::string name = parts_.model->path();
  if (size_t slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") {
    name = name.substr(0, name.size() - 5);
  }
  return name;
}

std::string ClusterBackend::chat_template() const {
  absl::StatusOr<std::string> t = parts_.model->file().GetString("tokenizer.chat_template");
  return t.ok() ? *t : "";
}

uint32_t ClusterBackend::context_size() const { return parts_.model->context_size(); }

std::string ClusterBackend::TopologyJson() const {
  using nlohmann::json;
  std::shared_ptr<const ClusterSnapshot> snap = parts_.cluster();
  json nodes = json::array();
  auto layers_of = [&](const std::string& id) -> json {
    for (const Stage& s : snap->partition.stages) {
      if (s.node_id == id) return json::array({s.first_layer, s.last_layer});
    }
    return nullptr;
  };
  nodes.push_back({{"node_id", parts_.node_id},
                   {"address", parts_.address()},
                   {"self", true},
                   {"usable_memory_mb", parts_.usable_memory_bytes >> 20},
                   {"layers", layers_of(parts_.node_id)}});
  for (const PeerInfo& p : snap->peers) {
    nodes.push_back({{"node_id", p.node_id},
                     {"address", p.address},
                     {"self", false},
                     {"usable_memory_mb", p.caps.usable_memory_bytes >> 20},
                     {"layers", layers_of(p.node_id)}});
  }
  json out = {{"model", model_id()},
              {"security", parts_.security_mode},
              {"n_layers", parts_.model->config().n_layer},
              {"epoch", snap->epoch},
              {"ready", snap->has_plan()},
              {"nodes", nodes}};
  if (!snap->status.ok()) out["error"] = std::string(snap->status.message());
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ringlm
