#include "daemon/cluster_backend.h"

#include <future>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/prometheus_text.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "proto/node_state_name.h"

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

nlohmann::json OrNull(const std::optional<double>& v) {
  return v.has_value() ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

RingFigures::RingFigures(const ClusterBackendParts* parts, std::chrono::milliseconds max_age)
    : parts_(parts), max_age_(max_age) {}

std::map<std::string, RingFigures::Figures> RingFigures::Get(const std::vector<Member>& members) {
  absl::MutexLock refresh(&refresh_mu_);
  const auto now = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&mu_);
    bool covered = refreshed_.has_value() && now - *refreshed_ < max_age_;
    for (const Member& m : members) covered = covered && figures_.count(m.node_id) > 0;
    if (covered) return figures_;
  }
  // Every peer at once, outside mu_; each call ends by its deadline.
  std::vector<std::future<absl::StatusOr<v1::TopologyReply>>> replies(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].self || !parts_->peer_topology) continue;
    replies[i] = std::async(std::launch::async, parts_->peer_topology, members[i].address);
  }
  const std::string own_metrics = parts_->own_metrics ? parts_->own_metrics() : "";
  const v1::NodeState own_state =
      parts_->own_state ? parts_->own_state() : v1::NODE_STATE_UNSPECIFIED;
  std::vector<absl::StatusOr<v1::TopologyReply>> got;
  for (size_t i = 0; i < members.size(); ++i) {
    if (replies[i].valid()) {
      got.push_back(replies[i].get());
    } else {
      got.push_back(absl::UnavailableError("not asked"));
    }
  }
  const auto at = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  std::map<std::string, Figures> figures;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    if (m.self) {
      figures[m.node_id] = Compute(m.node_id, own_state, own_metrics, at);
    } else if (got[i].ok()) {
      figures[m.node_id] = Compute(m.node_id, got[i]->state(), got[i]->metrics(), at);
    } else {
      Figures f;
      f.state = parts_->peer_topology ? "unreachable" : "unknown";
      if (parts_->peer_topology) f.error = std::string(got[i].status().message());
      figures[m.node_id] = f;
    }
  }
  // Bounded: only the members of this refresh keep their counters.
  for (auto it = counters_.begin(); it != counters_.end();) {
    it = figures.count(it->first) > 0 ? std::next(it) : counters_.erase(it);
  }
  figures_ = figures;
  refreshed_ = at;
  return figures;
}

RingFigures::Figures RingFigures::Compute(const std::string& node_id, v1::NodeState state,
                                          const std::string& metrics,
                                          std::chrono::steady_clock::time_point at) {
  Figures f;
  f.state = StateName(state);
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(metrics);
  if (!samples.ok()) {
    counters_.erase(node_id);
    return f;
  }
  auto get = [&](const char* name) { return FindSample(*samples, name).value_or(0); };
  Counters now;
  now.at = at;
  now.forward_count = get("ringlm_stage_forward_seconds_count");
  now.forward_seconds = get("ringlm_stage_forward_seconds_sum");
  now.stage_tokens = get("ringlm_stage_batch_tokens_sum");
  now.generated_tokens = get("ringlm_generated_tokens_total");
  if (now.forward_count > 0) f.forward_ms = 1000 * now.forward_seconds / now.forward_count;
  auto it = counters_.find(node_id);
  if (it != counters_.end()) {
    const Counters& before = it->second;
    const double seconds = std::chrono::duration<double>(at - before.at).count();
    const double batches = now.forward_count - before.forward_count;
    // A counter that went down belongs to a restarted node: no rate yet.
    const bool restarted = batches < 0 || now.stage_tokens < before.stage_tokens ||
                           now.generated_tokens < before.generated_tokens;
    if (!restarted && seconds > 0) {
      if (batches > 0) {
        f.forward_ms = 1000 * (now.forward_seconds - before.forward_seconds) / batches;
      }
      f.tokens_per_s = (now.stage_tokens - before.stage_tokens) / seconds;
      f.generated_tokens_per_s = (now.generated_tokens - before.generated_tokens) / seconds;
    }
  }
  counters_[node_id] = now;
  return f;
}

ClusterBackend::ClusterBackend(ClusterBackendParts parts)
    : parts_(std::move(parts)),
      figures_(std::make_unique<RingFigures>(&parts_, std::chrono::milliseconds(1000))) {}

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
  // The ring: the plan's stages in order, then every other node (idle).
  struct Entry {
    RingFigures::Member member;
    uint64_t usable_memory_bytes = 0;
    const Stage* stage = nullptr;  // into *snap; null when idle
  };
  std::vector<Entry> ring;
  std::set<std::string> placed;
  auto describe = [&](const std::string& id) -> std::optional<Entry> {
    if (id == parts_.node_id) {
      return Entry{{id, parts_.address(), true}, parts_.usable_memory_bytes};
    }
    for (const PeerInfo& p : snap->peers) {
      if (p.node_id == id) return Entry{{id, p.address, false}, p.caps.usable_memory_bytes};
    }
    return std::nullopt;
  };
  for (const Stage& s : snap->partition.stages) {
    std::optional<Entry> e = describe(s.node_id);
    if (!e.has_value()) {
      // In the plan but gone from this node's view since: asked anyway.
      e = Entry{{s.node_id, s.address, false}, 0};
    }
    e->stage = &s;
    ring.push_back(*e);
    placed.insert(s.node_id);
  }
  if (placed.count(parts_.node_id) == 0) ring.push_back(*describe(parts_.node_id));
  for (const PeerInfo& p : snap->peers) {
    if (placed.count(p.node_id) == 0 && p.node_id != parts_.node_id) {
      ring.push_back(*describe(p.node_id));
    }
  }

  std::vector<RingFigures::Member> members;
  for (const Entry& e : ring) members.push_back(e.member);
  std::map<std::string, RingFigures::Figures> live = figures_->Get(members);

  const std::vector<uint64_t>& layer_bytes = parts_.layer_bytes;
  json nodes = json::array();
  json generated_per_s = nullptr;
  int position = 0;
  for (const Entry& e : ring) {
    json n = {{"node_id", e.member.node_id},
              {"address", e.member.address},
              {"self", e.member.self},
              {"ring_position", nullptr},
              {"idle", e.stage == nullptr},
              {"layers", nullptr},
              {"usable_memory_mb", e.usable_memory_bytes >> 20},
              {"memory_offered_bytes", e.usable_memory_bytes},
              {"memory_used_bytes", 0},
              {"state", "unknown"},
              {"forward_ms", nullptr},
              {"tokens_per_s", nullptr}};
    if (e.stage != nullptr) {
      n["ring_position"] = position++;
      n["layers"] = json::array({e.stage->first_layer, e.stage->last_layer});
      if (layer_bytes.size() >= e.stage->last_layer) {
        uint64_t bytes = 0;
        for (uint32_t i = e.stage->first_layer; i < e.stage->last_layer; ++i) {
          bytes += layer_bytes[i];
        }
        n["memory_used_bytes"] = bytes;
      } else {
        n["memory_used_bytes"] = nullptr;
      }
    }
    if (auto it = live.find(e.member.node_id); it != live.end()) {
      const RingFigures::Figures& f = it->second;
      n["state"] = f.state;
      if (!f.error.empty()) n["error"] = f.error;
      n["forward_ms"] = OrNull(f.forward_ms);
      n["tokens_per_s"] = OrNull(f.tokens_per_s);
      if (e.member.self) generated_per_s = OrNull(f.generated_tokens_per_s);
    }
    nodes.push_back(std::move(n));
  }
  json out = {{"model", model_id()},
              {"security", parts_.security_mode},
              {"n_layers", parts_.model->config().n_layer},
              {"epoch", snap->epoch},
              {"ready", snap->has_plan()},
              {"generated_tokens_per_s", generated_per_s},
              {"nodes", nodes}};
  if (!snap->status.ok()) out["error"] = std::string(snap->status.message());
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ringlm
