// `ringlm status`: the cluster as one node sees it, with each node's own
// state and cache use.
#include <algorithm>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/prometheus_text.h"
#include "cli/cli_common.h"
#include "cli/cluster_client.h"
#include "cli/commands.h"
#include "nlohmann/json.hpp"
#include "proto/node_state_name.h"

namespace ringlm {
namespace {

using nlohmann::json;

constexpr auto kTimeout = std::chrono::milliseconds(3000);

// The figures `ringlm status` shows from a node's metrics text.
json MetricsSummary(const std::string& text) {
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(text);
  if (!samples.ok()) return nullptr;
  auto get = [&](const char* name, const MetricLabels& labels = {}) {
    return FindSample(*samples, name, labels).value_or(0);
  };
  double requests = 0;
  for (const char* f : {"stop", "length", "cancelled", "error"}) {
    requests += get("ringlm_requests_total", {{"finish", f}});
  }
  auto mean_ms = [&](const char* histogram) {
    const double count = get(absl::StrCat(histogram, "_count").c_str());
    return count > 0 ? 1000 * get(absl::StrCat(histogram, "_sum").c_str()) / count : 0.0;
  };
  return {{"requests", requests},
          {"errors", get("ringlm_requests_total", {{"finish", "error"}})},
          {"prompt_tokens", get("ringlm_prompt_tokens_total")},
          {"generated_tokens", get("ringlm_generated_tokens_total")},
          {"cache_hits", get("ringlm_prefix_cache_hits_total")},
          {"cache_misses", get("ringlm_prefix_cache_misses_total")},
          {"cached_tokens", get("ringlm_prefix_cache_tokens_total")},
          {"mean_ttft_ms", mean_ms("ringlm_time_to_first_token_seconds")},
          {"mean_ms_per_token", mean_ms("ringlm_time_per_token_seconds")},
          {"mean_forward_ms", mean_ms("ringlm_stage_forward_seconds")},
          {"drafted_tokens", get("ringlm_speculation_drafted_tokens_total")},
          {"accepted_draft_tokens", get("ringlm_speculation_accepted_tokens_total")},
          {"mean_request_acceptance", get("ringlm_speculation_request_acceptance_count") > 0
                                          ? get("ringlm_speculation_request_acceptance_sum") /
                                                get("ringlm_speculation_request_acceptance_count")
                                          : 0.0}};
}

std::string Mib(uint64_t bytes) { return absl::StrFormat("%.0f MiB", bytes / 1048576.0); }

// The HTTP API a node serves, as its own Topology reply names it (a node
// knows only its own); null when it serves none: not a head.
json ApiAddress(const v1::TopologyReply& own) {
  for (const v1::PeerView& p : own.peers()) {
    if (p.is_self() && !p.api_address().empty()) return p.api_address();
  }
  return nullptr;
}

// Everything `status` shows, as JSON; the table is printed from it too.
json Describe(const v1::TopologyReply& view,
              const std::map<std::string, absl::StatusOr<v1::TopologyReply>>& own) {
  json out;
  out["node_id"] = view.node_id();
  out["security"] = view.security();
  out["cluster_id"] = view.cluster_id();
  const v1::ModelInfo& m = view.model();
  out["model"] = {
      {"file", m.file_name()},
      {"name", m.name()},
      {"fingerprint", m.fingerprint()},
      {"architecture", m.architecture()},
      {"n_layers", m.n_layers()},
      {"bytes", m.total_bytes()},
      {"n_vocab", m.n_vocab()},
      {"context_size", m.context_size()},
      {"n_expert", m.n_expert()},
      {"n_expert_used", m.n_expert_used()},
      {"layer_bytes", std::vector<uint64_t>(m.layer_bytes().begin(), m.layer_bytes().end())}};
  // A node's share of the weights: the bytes of its layers (null when the
  // node it asked is too old to say).
  auto layers_bytes = [&m](uint32_t first, uint32_t last) -> json {
    if (m.layer_bytes_size() != static_cast<int>(m.n_layers()) || last > m.n_layers())
      return nullptr;
    uint64_t bytes = 0;
    for (uint32_t i = first; i < last; ++i) bytes += m.layer_bytes(static_cast<int>(i));
    return bytes;
  };
  json stages = json::array();
  for (const v1::PlanStage& s : view.plan().stages()) {
    stages.push_back({{"node_id", s.node_id()},
                      {"address", s.address()},
                      {"first_layer", s.first_layer()},
                      {"last_layer", s.last_layer()}});
  }
  out["plan"] = {{"epoch", view.plan().epoch()}, {"stages", stages}};
  out["idle"] =
      json(std::vector<std::string>(view.idle_node_ids().begin(), view.idle_node_ids().end()));
  if (!view.partition_error().empty()) out["partition_error"] = view.partition_error();
  out["served_models"] =
      json(std::vector<std::string>(view.served_models().begin(), view.served_models().end()));
  json nodes = json::array();
  json heads = json::array();
  for (const v1::PeerView& p : view.peers()) {
    json n = {
        {"node_id", p.node_id()},
        {"address", p.address()},
        {"self", p.is_self()},
        {"total_memory_bytes", p.capabilities().total_memory_bytes()},
        {"usable_memory_bytes", p.capabilities().usable_memory_bytes()},
        {"gflops", p.capabilities().matmul_gflops()},
        {"read_gbps", p.capabilities().read_gbps()},
        {"placement", p.capabilities().placement() == v1::PLACEMENT_SPEED ? "speed" : "memory"},
        {"cpu_model", p.capabilities().cpu_model()},
        {"threads", p.capabilities().threads()},
        {"last_seen_ms", p.last_seen_ms_ago()},
        {"layers", nullptr},
        {"layers_bytes", nullptr}};
    for (const v1::PlanStage& s : view.plan().stages()) {
      if (s.node_id() != p.node_id()) continue;
      n["layers"] = {s.first_layer(), s.last_layer()};
      n["layers_bytes"] = layers_bytes(s.first_layer(), s.last_layer());
    }
    auto it = own.find(p.node_id());
    if (it != own.end() && it->second.ok()) {
      const v1::TopologyReply& r = *it->second;
      n["state"] = StateName(r.state());
      int busy = 0;
      for (const v1::SessionStats& session : r.cache().sessions()) busy += session.busy() ? 1 : 0;
      n["cache"] = {{"sessions", r.cache().sessions_size()},
                    {"busy_sessions", busy},
                    {"used_bytes", r.cache().used_bytes()},
                    {"budget_bytes", r.cache().budget_bytes()},
                    {"logical_bytes", r.cache().logical_bytes()},
                    {"blocks", r.cache().blocks()},
                    {"shared_blocks", r.cache().shared_blocks()},
                    {"block_tokens", r.cache().block_tokens()},
                    {"evictions", r.cache().evictions()},
                    {"evicted_blocks", r.cache().evicted_blocks()}};
      n["metrics"] = MetricsSummary(r.metrics());
      n["api_address"] = ApiAddress(r);
    } else {
      n["state"] = "unreachable";
      if (it != own.end()) n["error"] = std::string(it->second.status().message());
      n["api_address"] = p.api_address().empty() ? json(nullptr) : json(p.api_address());
    }
    if (!n["api_address"].is_null()) {
      heads.push_back({{"node_id", p.node_id()}, {"api_address", n["api_address"]}});
    }
    nodes.push_back(n);
  }
  // Ring order: the plan's stages first to last, then the idle nodes.
  auto stage_of = [&view](const json& node) {
    const auto& stages = view.plan().stages();
    for (int i = 0; i < stages.size(); ++i) {
      if (stages[i].node_id() == node["node_id"].get<std::string>()) return i;
    }
    return stages.size();
  };
  std::stable_sort(nodes.begin(), nodes.end(),
                   [&](const json& a, const json& b) { return stage_of(a) < stage_of(b); });
  out["nodes"] = nodes;
  out["heads"] = heads;
  return out;
}

void PrintTable(const json& d, std::ostream& out) {
  const json& m = d["model"];
  if (d["security"] == "mutual-tls") {
    out << absl::StrFormat("security: mutual TLS, cluster %s\n",
                           d["cluster_id"].get<std::string>().c_str());
  } else {
    out << "security: INSECURE (no cluster key: any host on the network can join)\n";
  }
  if (d["served_models"].size() > 1) {
    std::vector<std::string> names = d["served_models"].get<std::vector<std::string>>();
    out << absl::StrFormat("models served: %s (this view: one of them; pick with --model)\n",
                           absl::StrJoin(names, ", "));
  }
  out << absl::StrFormat("model: %s (%s, %d layers, %s)\n", m["file"].get<std::string>().c_str(),
                         m["architecture"].get<std::string>().c_str(), m["n_layers"].get<int>(),
                         Mib(m["bytes"].get<uint64_t>()).c_str());
  if (m["n_expert"].get<uint32_t>() > 0) {
    out << absl::StrFormat("experts: %u, %u used per token\n", m["n_expert"].get<uint32_t>(),
                           m["n_expert_used"].get<uint32_t>());
  }
  if (d.contains("partition_error")) {
    out << absl::StrFormat("no plan: %s\n", d["partition_error"].get<std::string>().c_str());
  } else {
    out << absl::StrFormat("plan epoch %llu: %zu stage(s)\n",
                           static_cast<unsigned long long>(d["plan"]["epoch"].get<uint64_t>()),
                           d["plan"]["stages"].size());
  }
  std::vector<std::string> by_memory;
  for (const json& n : d["nodes"]) {
    if (n["placement"] != "speed") by_memory.push_back(n["node_id"].get<std::string>());
  }
  out << (by_memory.empty()
              ? std::string("placement: by speed within memory (every node asks for it)\n")
              : absl::StrFormat("placement: by memory (asked for by %s)\n",
                                absl::StrJoin(by_memory, ", ")));
  if (d["heads"].empty()) {
    out << "heads: none (no node serves the HTTP API: start one with --api-port)\n";
  } else {
    std::vector<std::string> heads;
    for (const json& h : d["heads"]) {
      heads.push_back(absl::StrFormat("%s at http://%s", h["node_id"].get<std::string>(),
                                      h["api_address"].get<std::string>()));
    }
    out << absl::StrFormat("heads: %s\n", absl::StrJoin(heads, ", "));
  }
  out << absl::StrFormat(
      "\n%-20s %-22s %-22s %10s %8s %9s %9s %10s %-12s %9s %6s %8s %9s %13s  %s\n", "NODE",
      "ADDRESS", "API", "MEMORY", "GFLOPS", "READ GB/S", "LAYERS", "WEIGHTS", "STATE", "LAST SEEN",
      "REQS", "TOKENS", "FWD MS", "DRAFTS OK", "CACHE");
  for (const json& n : d["nodes"]) {
    std::string id = n["node_id"];
    if (n["self"].get<bool>()) id += " *";
    std::string layers = "-";
    if (!n["layers"].is_null()) {
      layers = absl::StrFormat("[%d,%d)", n["layers"][0].get<int>(), n["layers"][1].get<int>());
    }
    const std::string weights =
        n["layers_bytes"].is_null() ? "-" : Mib(n["layers_bytes"].get<uint64_t>());
    std::string cache = "-";
    if (n.contains("cache")) {
      const json& c = n["cache"];
      cache = absl::StrFormat("%d sessions, %s / %s, %d of %d blocks shared (%s without)",
                              c["sessions"].get<int>(), Mib(c["used_bytes"].get<uint64_t>()),
                              Mib(c["budget_bytes"].get<uint64_t>()), c["shared_blocks"].get<int>(),
                              c["blocks"].get<int>(), Mib(c["logical_bytes"].get<uint64_t>()));
    }
    const int64_t seen = n["last_seen_ms"].get<int64_t>();
    const json m = n.contains("metrics") ? n["metrics"] : json(nullptr);
    const bool has_m = m.is_object();
    // Speculation, for the requests this node started: drafts accepted of
    // those checked.
    std::string drafts = "-";
    if (has_m && m["drafted_tokens"].get<double>() > 0) {
      drafts = absl::StrFormat("%.0f/%.0f", m["accepted_draft_tokens"].get<double>(),
                               m["drafted_tokens"].get<double>());
    }
    out << absl::StrFormat(
        "%-20s %-22s %-22s %10s %8.1f %9.1f %9s %10s %-12s %9s %6.0f %8.0f %9.2f %13s  %s\n",
        id.c_str(), n["address"].get<std::string>().c_str(),
        n["api_address"].is_null() ? "-" : n["api_address"].get<std::string>().c_str(),
        Mib(n["usable_memory_bytes"].get<uint64_t>()).c_str(), n["gflops"].get<double>(),
        n["read_gbps"].get<double>(), layers.c_str(), weights.c_str(),
        n["state"].get<std::string>().c_str(),
        n["self"].get<bool>() ? "-" : absl::StrFormat("%.1fs ago", seen / 1000.0).c_str(),
        has_m ? m["requests"].get<double>() : 0.0,
        has_m ? m["generated_tokens"].get<double>() : 0.0,
        has_m ? m["mean_forward_ms"].get<double>() : 0.0, drafts.c_str(), cache.c_str());
  }
}

}  // namespace

int RunStatus(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgParser p("ringlm status [--node HOST:PORT] [--model NAME] [--json]",
              "Shows one model's ring as one node sees it: every node in ring order with its\n"
              "id, address, memory, GFLOPS, read bandwidth, layer range and the bytes of its\n"
              "layers, state, last-seen time, the drafts its requests had accepted\n"
              "(speculative decoding) and cache use; the model (its experts, if any), the\n"
              "other models the node serves, and whether layers are placed by speed or by\n"
              "memory.");
  p.AddOption("node", "HOST:PORT", "gRPC address of any node", "127.0.0.1:47801");
  p.AddOption("model", "NAME",
              "the model whose ring to show, as the node serves it (default: its first)");
  p.AddFlag("json", "print the same figures as one JSON object");
  AddClientSecurityFlags(p);
  if (int rc = ParseOrExit(p, args, out, err); rc >= 0) return rc;
  absl::StatusOr<ClientSecurity> security = ReadClientSecurity(p);
  if (!security.ok()) return Fail(security.status(), err);
  ClusterClient client(p.GetString("node"), *security, p.GetString("model"));
  absl::StatusOr<v1::TopologyReply> view = client.Topology(kTimeout);
  if (!view.ok()) return Fail(view.status(), err);
  // The members name the model by its fingerprint.
  const std::string model = view->model().fingerprint();
  // Each node reports its own state and cache.
  std::map<std::string, absl::StatusOr<v1::TopologyReply>> own;
  for (const v1::PeerView& peer : view->peers()) {
    if (peer.is_self()) {
      own.emplace(peer.node_id(), *view);
    } else {
      own.emplace(peer.node_id(),
                  ClusterClient(peer.address(), *security, model).Topology(kTimeout));
    }
  }
  const json d = Describe(*view, own);
  if (p.GetFlag("json")) {
    out << d.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    PrintTable(d, out);
  }
  return 0;
}

}  // namespace ringlm
