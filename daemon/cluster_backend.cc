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

ClusterBackend::ClusterBackend(Node& node) : node_(node) {}

absl::Status ClusterBackend::Ready() const {
  // The truth now, without waiting: every member of the plan answered its
  // latest authenticated health call with the same partition (/health).
  return node_.WaitUntilServing(std::chrono::milliseconds(0));
}

absl::Status ClusterBackend::WaitUntilReady(std::chrono::milliseconds patience) const {
  return node_.WaitUntilServing(patience);
}

absl::StatusOr<std::unique_ptr<GenerationHandle>> ClusterBackend::Submit(
    GenerationRequest request, std::function<void(const GenerationEvent&)> on_event) {
  RINGLM_ASSIGN_OR_RETURN(OriginRequest r, node_.origin().Prepare(std::move(request)));
  const std::string id = r.request_id;
  RINGLM_RETURN_IF_ERROR(node_.origin().Start(std::move(r), [on_event](const OriginEvent& e) {
    GenerationEvent g;
    g.has_token = e.has_token;
    g.token = e.token;
    g.cached_tokens = e.cached_tokens;
    g.finish = FromProto(e.finish);
    g.error = e.error;
    g.logprobs = e.logprobs;
    on_event(g);
  }));
  return std::make_unique<OriginHandle>(node_.origin(), id);
}

void ClusterBackend::DropSession(const std::string& session_id) {
  node_.origin().DropSessionEverywhere(node_.cluster().current()->plan, session_id);
}

const Tokenizer& ClusterBackend::tokenizer() const { return node_.model().tokenizer(); }

std::string ClusterBackend::model_id() const {
  std::string name = node_.model().path();
  if (size_t slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") {
    name = name.substr(0, name.size() - 5);
  }
  return name;
}

std::string ClusterBackend::chat_template() const {
  absl::StatusOr<std::string> t = node_.model().file().GetString("tokenizer.chat_template");
  return t.ok() ? *t : "";
}

uint32_t ClusterBackend::context_size() const { return node_.model().context_size(); }

std::string ClusterBackend::TopologyJson() const {
  using nlohmann::json;
  std::shared_ptr<const ClusterSnapshot> snap = node_.cluster().current();
  json nodes = json::array();
  auto layers_of = [&](const std::string& id) -> json {
    for (const Stage& s : snap->partition.stages) {
      if (s.node_id == id) return json::array({s.first_layer, s.last_layer});
    }
    return nullptr;
  };
  nodes.push_back({{"node_id", node_.node_id()},
                   {"address", node_.address()},
                   {"self", true},
                   {"usable_memory_mb", node_.capabilities().usable_memory_bytes >> 20},
                   {"layers", layers_of(node_.node_id())}});
  for (const PeerInfo& p : snap->peers) {
    nodes.push_back({{"node_id", p.node_id},
                     {"address", p.address},
                     {"self", false},
                     {"usable_memory_mb", p.caps.usable_memory_bytes >> 20},
                     {"layers", layers_of(p.node_id)}});
  }
  json out = {{"model", model_id()},
              {"security", node_.security_mode()},
              {"n_layers", node_.model().config().n_layer},
              {"epoch", snap->epoch},
              {"ready", snap->has_plan()},
              {"nodes", nodes}};
  if (!snap->status.ok()) out["error"] = std::string(snap->status.message());
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ringlm
