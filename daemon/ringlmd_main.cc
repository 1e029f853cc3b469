// ringlmd: the ringlm node daemon. Run one on every machine; they find each
// other, split the model's layers by memory, and serve it together.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/openai_server.h"
#include "base/arg_parser.h"
#include "base/status_macros.h"
#include "daemon/cluster_backend.h"
#include "daemon/metrics_server.h"
#include "daemon/model_host.h"
#include "daemon/model_set.h"
#include "daemon/models_file.h"
#include "daemon/node.h"
#include "inference/kernel_flags.h"
#include "inference/sampling/speculation.h"
#include "security/bearer_token.h"
#include "security/cluster_key.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

void AddFlags(ArgParser& p) {
  p.AddRepeatedOption("model", "[NAME=]PATH",
                      "GGUF model file (every node of a cluster runs the same ones); NAME= serves "
                      "it under NAME (default: the file's base name). Repeat to serve several "
                      "models: each is split over the cluster on its own, and this node's "
                      "memory is divided among them in proportion to their file sizes (see "
                      "--model-memory); a request's `model` picks one");
  p.AddOption("models-file", "FILE",
              "models to serve, one per line: [NAME=]PATH [memory_mb=N] (# comments). Re-read on "
              "SIGHUP: models added to it are loaded, models taken out of it are removed after a "
              "30 s drain; the --model ones are left alone");
  p.AddRepeatedOption("model-memory", "NAME=MiB",
                      "give the model served as NAME exactly this much of this node's memory; "
                      "the models without one share the rest by file size");
  p.AddFlag("model-from-peers",
            "no model file: learn the model from the cluster and fetch only this node's layers "
            "from members, verified, kept under --state-dir across restarts");
  p.AddRepeatedOption("model-fingerprint", "FP",
                      "with --model-from-peers: the model to fetch, as `ringlm status` names it "
                      "(default: the one model the members serve); repeat to fetch and serve "
                      "several, each under its fingerprint, memory divided evenly (see "
                      "--model-memory)");
  p.AddOption("model-cache-gb", "GB",
              "with --model-from-peers: disk for fetched layers; least recently used layers "
              "outside this node's range are dropped past it (default: no limit)");
  p.AddOption("model-wait-s", "S",
              "with --model-from-peers: how long to wait at start for a member that serves the "
              "model",
              "300");
  p.AddOption("cluster-key", "FILE",
              "the cluster key (make one with `ringlm keygen --out FILE`, copy it to every node, "
              "mode 0600); default: $RINGLM_CLUSTER_KEY_FILE");
  p.AddFlag("insecure",
            "run without a cluster key: no TLS, no authentication; anyone on the network can "
            "join, read prompts and disturb requests");
  p.AddOption("grpc-host", "HOST", "address the node-to-node gRPC server binds", "0.0.0.0");
  p.AddOption("grpc-port", "N", "gRPC port; 0 picks a free one", "47801");
  p.AddOption("advertise-host", "HOST",
              "host other nodes should use for this one (default: the sender address they see)");
  p.AddOption("discovery-port", "N", "UDP port for announcements", "47800");
  p.AddOption("announce-interval-ms", "MS", "time between announcements", "1000");
  p.AddOption("peer-expiry-ms", "MS", "forget a peer silent this long", "5000");
  p.AddFlag("no-broadcast", "do not announce by UDP broadcast (use --peers)");
  p.AddFlag("loopback-only",
            "announce on loopback only (127.255.255.255): a cluster on this host alone");
  p.AddOption("peers", "HOST:PORT,...",
              "gRPC addresses of peers to poll, for networks without "
              "broadcast");
  p.AddOption("memory-mb", "N", "memory this node offers, instead of MemAvailable");
  p.AddOption("threads", "N", "compute threads (default: physical cores)");
  p.AddOption("placement", "speed|memory",
              "how this node asks the cluster to split the layers: speed = the fastest nodes "
              "first, each within its memory, so a slow node holds only what memory forces; "
              "memory = in proportion to memory. Speed applies only when every node asks for it",
              "speed");
  p.AddOption("compute-turns", "auto|on|off",
              "take turns at the cores with the other daemons of this machine, so that their "
              "stages run few large batches instead of fighting for the cores; auto = when "
              "--threads spans every core",
              "auto");
  p.AddOption("compute-lock-file", "PATH",
              "the file those daemons lock (default: $XDG_RUNTIME_DIR/ringlm/compute.lock, "
              "else /tmp/ringlm-UID/compute.lock)");
  p.AddOption("ctx-size", "N", "context size in tokens (default: the model's)");
  p.AddOption("kv-cache-mb", "N",
              "KV cache budget per stage, in MiB of blocks (a shared block counted once)", "1024");
  p.AddOption("max-sessions", "N", "sessions kept at most", "256");
  p.AddOption("state-dir", "DIR", "where the node id is kept (default: $XDG_STATE_HOME/ringlm)");
  p.AddOption("rpc-timeout-ms", "MS", "deadline of node-to-node control calls", "3000");
  p.AddOption("no-progress-timeout-ms", "MS",
              "recover a request that makes no progress this long, as if a stage failed", "60000");
  p.AddOption("max-recoveries", "N",
              "times a request moves to a new plan after stage failures before it fails (0 = "
              "never)",
              "3");
  p.AddOption("draft-model", "FILE",
              "a small GGUF model with the same vocabulary: when this node is the last stage, "
              "its greedy guesses are the drafts instead of n-gram lookup (loaded whole, "
              "outside --memory-mb)");
  p.AddOption("max-drafts", "N",
              "speculative decoding: after each token, the last stage guesses up to N more by "
              "looking the last tokens up earlier in the conversation, and the next step checks "
              "them all in one trip around the ring (the reply is the same; 0 = never, at most "
              "16)",
              "8");
  p.AddOption("steps-in-flight", "N",
              "speculative decoding: while one step checks its drafts, the last stage may send "
              "up to N-1 more steps of guesses after it, betting that the drafts before them "
              "are accepted, once a request's guesses have been matching; a lost bet voids "
              "them on every stage (the reply is the same; 1 = one step at a time, at most 4)",
              "3");
  p.AddOption("recovery-timeout-ms", "MS",
              "how long a recovering request waits for the nodes to agree on a new plan", "15000");
  p.AddOption("busy-prefill-chunk-per-stream", "N",
              "while other requests stream their replies, a prompt goes in steps of N tokens "
              "per streaming request, plus N (smaller keeps the streams moving during a long "
              "prefill; otherwise a prompt goes in steps of 512)",
              "2");
  p.AddOption("busy-prefill-chunk", "N",
              "the most prompt tokens per step while other requests stream", "16");
  p.AddOption("busy-prefill-depth", "X",
              "while other requests stream, a prompt's steps shrink as it goes deeper: to half "
              "at position X times the model's embedding width, where each token's attention "
              "costs about as much as its weights (0 = they do not shrink)",
              "1.5");
  p.AddOption("api-port", "N",
              "serve the OpenAI-compatible API and web chat on this port (makes this the head)");
  p.AddOption("api-host", "HOST",
              "address the API binds; give 0.0.0.0 (with --api-key) to open it to the network",
              "127.0.0.1");
  p.AddOption("api-key", "KEY",
              "require 'Authorization: Bearer KEY' on /v1/ requests (and admit gRPC Generate "
              "callers without a cluster certificate that send it)");
  p.AddRepeatedOption("api-allowed-host", "HOST",
                      "another name the API answers to in the Host header, besides localhost and "
                      "its bind address (DNS rebinding defence; * turns the check off)");
  p.AddRepeatedOption("api-cors-origin", "ORIGIN",
                      "let web pages from ORIGIN (e.g. https://app.example) call the API; "
                      "CORS is off by default");
  p.AddOption("api-max-connections", "N", "HTTP connections open at once", "512");
  p.AddOption("max-running", "N", "generations the API runs at once; more wait in line", "64");
  p.AddOption("max-queued", "N",
              "requests waiting in line for a running slot; past it the answer is 429 with "
              "Retry-After",
              "256");
  p.AddOption("queue-timeout-ms", "MS",
              "longest wait in line before a request gets 503 with Retry-After", "60000");
  p.AddOption("api-header-timeout-ms", "MS",
              "time a client has to send its request line and headers", "10000");
  p.AddFlag("parse-special-in-content",
            "let special-token text in chat message content become control tokens (by "
            "default it stays plain text; only the template's markers are control tokens)");
  p.AddOption("chat-template", "FILE|NAME",
              "render chat prompts with this Jinja template file, or a built-in format (llama2, "
              "llama3, chatml, mistral, zephyr, plain), instead of the model's own template");
  p.AddFlag("no-prefix-cache", "do not reuse the KV cache of earlier requests");
  p.AddRepeatedOption("served-model-name", "NAME",
                      "a name the API answers to as `model` and lists in /v1/models; repeat for "
                      "aliases, the first is reported (default: the model's own id)");
  p.AddFlag("accept-any-model",
            "take any `model` name in requests (clients with a hard-coded default such as "
            "gpt-3.5-turbo) instead of answering 404");
  AddKernelFlags(p);
  p.AddOption("metrics-port", "N",
              "serve GET /metrics (Prometheus) on this port; 0 picks a free one "
              "(default: gRPC port + 1000, or a free one when that is taken; off when the gRPC "
              "port is 0)");
  p.AddOption("metrics-host", "HOST",
              "address /metrics binds; it is plain HTTP that tells how busy the node is: open it "
              "to the network (0.0.0.0) only with --metrics-token-file",
              kDefaultMetricsHost);
  p.AddOption("metrics-token-file", "FILE",
              "require 'Authorization: Bearer TOKEN' on /metrics, TOKEN being this file's "
              "content without surrounding whitespace (mode 0600, as the cluster key; e.g. "
              "`openssl rand -hex 32`)");
  p.AddOption("log-level", "LEVEL", "trace, debug, info, warn, error", "info");
}

// --chat-template: a built-in format's name, else a Jinja file (at most 1 MiB).
absl::StatusOr<ChatTemplateChoice> ReadChatTemplateFlag(const std::string& value) {
  ChatTemplateChoice choice;
  if (ParseFormatName(value).ok()) {
    choice.builtin = value;
    return choice;
  }
  std::ifstream in(value, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--chat-template ", value,
        ": no such file, and not a built-in format (llama2, llama3, chatml, mistral, zephyr, "
        "plain)"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  choice.jinja = text.str();
  if (choice.jinja.empty() || choice.jinja.size() > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chat-template ", value, ": the file must hold 1 byte to 1 MiB"));
  }
  return choice;
}

// The HTTP API of a head node, when --api-port is given.
absl::StatusOr<std::optional<ApiOptions>> ReadApiFlags(const ArgParser& p) {
  if (!p.Has("api-port")) return std::nullopt;
  ApiOptions api;
  auto port = p.GetInt("api-port", 0, 65535);
  auto sessions = p.GetInt("max-sessions", 1, 1 << 20);
  if (!port.ok()) return port.status();
  if (!sessions.ok()) return sessions.status();
  auto connections = p.GetInt("api-max-connections", 1, 900);
  auto header_ms = p.GetInt("api-header-timeout-ms", 100, 600000);
  auto running = p.GetInt("max-running", 1, 4096);
  auto queued = p.GetInt("max-queued", 0, 65536);
  auto queue_ms = p.GetInt("queue-timeout-ms", 1, 3600000);
  for (const absl::Status& s : {connections.status(), header_ms.status(), running.status(),
                                queued.status(), queue_ms.status()}) {
    if (!s.ok()) return s;
  }
  api.host = p.GetString("api-host");
  api.port = static_cast<uint16_t>(*port);
  api.api_key = p.GetString("api-key");
  api.allowed_hosts = p.GetAll("api-allowed-host");
  api.cors_origins = p.GetAll("api-cors-origin");
  api.max_connections = static_cast<int>(*connections);
  api.header_timeout = std::chrono::milliseconds(*header_ms);
  api.admission = {.max_running = static_cast<int>(*running),
                   .max_queued = static_cast<int>(*queued),
                   .max_wait = absl::Milliseconds(*queue_ms)};
  api.parse_special_in_content = p.GetFlag("parse-special-in-content");
  api.accept_any_model = p.GetFlag("accept-any-model");
  if (p.Has("chat-template")) {
    RINGLM_ASSIGN_OR_RETURN(api.chat_template, ReadChatTemplateFlag(p.GetString("chat-template")));
  }
  api.prefix_cache.enabled = !p.GetFlag("no-prefix-cache");
  api.prefix_cache.max_sessions = static_cast<uint32_t>(*sessions);
  return api;
}

// What the flags say, besides the models (ModelNodeOptions).
struct DaemonFlags {
  NodeOptions node;                        // every model's, but for its file, names and memory
  RingServerOptions server;                // identity, API key and message size come later
  std::optional<MetricsEndpoint> metrics;  // nullopt = no /metrics
};

absl::StatusOr<DaemonFlags> ReadFlags(const ArgParser& p) {
  DaemonFlags flags;
  NodeOptions& o = flags.node;
  uint16_t& grpc_port_flag = flags.server.port;
  o.model_from_peers = p.GetFlag("model-from-peers");
  if ((p.Has("model") || p.Has("models-file")) == o.model_from_peers) {
    return absl::InvalidArgumentError(
        "give --model PATH (or --models-file FILE), or --model-from-peers");
  }
  o.draft_model_path = p.GetString("draft-model");
  if (!o.model_from_peers && (p.Has("model-fingerprint") || p.Has("model-cache-gb"))) {
    return absl::InvalidArgumentError(
        "--model-fingerprint and --model-cache-gb go with --model-from-peers");
  }
  if (p.Has("model-cache-gb")) {
    absl::StatusOr<double> gb = p.GetDouble("model-cache-gb");
    if (!gb.ok()) return gb.status();
    if (!(*gb > 0 && *gb < 1e6)) {
      return absl::InvalidArgumentError("--model-cache-gb must be above 0");
    }
    o.model_cache_bytes = static_cast<uint64_t>(*gb * 1e9);
  }
  auto wait = p.GetInt("model-wait-s", 1, 86400);
  if (!wait.ok()) return wait.status();
  o.model_wait = std::chrono::seconds(*wait);
  o.insecure = p.GetFlag("insecure");
  o.cluster_key_file = ClusterKeyFile(p.GetString("cluster-key"));
  if (o.insecure && !o.cluster_key_file.empty()) {
    return absl::InvalidArgumentError("--insecure and a cluster key exclude each other");
  }
  o.api_key = p.GetString("api-key");
  o.grpc_host = p.GetString("grpc-host");
  o.advertise_host = p.GetString("advertise-host");
  auto grpc_port = p.GetInt("grpc-port", 0, 65535);
  auto disc_port = p.GetInt("discovery-port", 1, 65535);
  auto interval = p.GetInt("announce-interval-ms", 50, 600000);
  auto expiry = p.GetInt("peer-expiry-ms", 100, 3600000);
  auto kv = p.GetInt("kv-cache-mb", 0, int64_t{1} << 30);
  auto sessions = p.GetInt("max-sessions", 1, 1 << 20);
  auto rpc = p.GetInt("rpc-timeout-ms", 50, 600000);
  auto progress = p.GetInt("no-progress-timeout-ms", 500, 3600000);
  auto recoveries = p.GetInt("max-recoveries", 0, 100);
  auto recovery_wait = p.GetInt("recovery-timeout-ms", 100, 600000);
  auto max_drafts = p.GetInt("max-drafts", 0, kMaxDrafts);
  auto in_flight = p.GetInt("steps-in-flight", 1, kMaxStepsInFlight);
  auto busy_chunk = p.GetInt("busy-prefill-chunk", 1, 512);
  auto per_stream = p.GetInt("busy-prefill-chunk-per-stream", 1, 512);
  for (const absl::Status& s :
       {grpc_port.status(), disc_port.status(), interval.status(), expiry.status(), kv.status(),
        sessions.status(), rpc.status(), progress.status(), recoveries.status(),
        recovery_wait.status(), busy_chunk.status(), per_stream.status(), max_drafts.status(),
        in_flight.status()}) {
    if (!s.ok()) return s;
  }
  grpc_port_flag = static_cast<uint16_t>(*grpc_port);
  o.discovery.port = static_cast<uint16_t>(*disc_port);
  o.discovery.announce_interval = std::chrono::milliseconds(*interval);
  o.discovery.peer_expiry = std::chrono::milliseconds(*expiry);
  o.discovery_enabled = !p.GetFlag("no-broadcast");
  o.discovery.loopback_only = p.GetFlag("loopback-only");
  o.cluster.health_interval = std::chrono::milliseconds(*interval);
  o.cluster.first_partition_delay = std::chrono::milliseconds(*interval * 3 / 2);
  o.sessions.budget_bytes = static_cast<uint64_t>(*kv) << 20;
  o.sessions.max_sessions = static_cast<uint32_t>(*sessions);
  o.rpc.control_timeout = std::chrono::milliseconds(*rpc);
  o.rpc.health_timeout = std::chrono::milliseconds(std::min<int64_t>(*rpc, 1000));
  o.origin.no_progress_timeout = std::chrono::milliseconds(*progress);
  o.origin.max_recoveries = static_cast<uint32_t>(*recoveries);
  o.origin.recovery_timeout = std::chrono::milliseconds(*recovery_wait);
  o.origin.max_drafts = static_cast<uint32_t>(*max_drafts);
  o.origin.steps_in_flight = static_cast<uint32_t>(*in_flight);
  o.origin.busy_chunk_tokens = static_cast<uint32_t>(*busy_chunk);
  o.origin.busy_chunk_tokens_per_stream = static_cast<uint32_t>(*per_stream);
  absl::StatusOr<double> busy_depth = p.GetDouble("busy-prefill-depth");
  if (!busy_depth.ok()) return busy_depth.status();
  if (!(*busy_depth >= 0 && *busy_depth <= 1e6)) {
    return absl::InvalidArgumentError("--busy-prefill-depth must be between 0 and 1000000");
  }
  o.origin.busy_chunk_depth_per_embd = *busy_depth;
  o.origin.health_interval = std::chrono::milliseconds(std::min<int64_t>(*interval, 1000));
  if (p.Has("peers")) {
    for (absl::string_view peer : absl::StrSplit(p.GetString("peers"), ',', absl::SkipEmpty())) {
      if (peer.find(':') == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--peers entry '", peer, "' is not HOST:PORT"));
      }
      o.cluster.static_peers.emplace_back(peer);
    }
  }
  if (p.Has("memory-mb")) {
    auto mb = p.GetInt("memory-mb", 1, int64_t{1} << 30);
    if (!mb.ok()) return mb.status();
    o.memory_bytes = static_cast<uint64_t>(*mb) << 20;
  }
  if (p.Has("threads")) {
    auto t = p.GetInt("threads", 1, 1024);
    if (!t.ok()) return t.status();
    o.threads = static_cast<int>(*t);
  }
  if (const std::string placement = p.GetString("placement"); placement == "memory") {
    o.placement = Placement::kMemory;
  } else if (placement != "speed") {
    return absl::InvalidArgumentError(
        absl::StrCat("--placement must be speed or memory, not \"", placement, "\""));
  }
  if (const std::string turns = p.GetString("compute-turns"); turns == "on") {
    o.compute_turns = NodeOptions::ComputeTurns::kOn;
  } else if (turns == "off") {
    o.compute_turns = NodeOptions::ComputeTurns::kOff;
  } else if (turns != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--compute-turns must be auto, on or off, not \"", turns, "\""));
  }
  o.compute_lock_file = p.GetString("compute-lock-file");
  if (p.Has("ctx-size")) {
    auto c = p.GetInt("ctx-size", 1, 1 << 20);
    if (!c.ok()) return c.status();
    o.context_size = static_cast<uint32_t>(*c);
  }
  o.state_dir = p.GetString("state-dir");
  MetricsEndpoint metrics;
  metrics.host = p.GetString("metrics-host");
  if (p.Has("metrics-token-file")) {
    RINGLM_ASSIGN_OR_RETURN(metrics.token, ReadBearerTokenFile(p.GetString("metrics-token-file"),
                                                               "metrics token file"));
  }
  if (p.Has("metrics-port")) {
    auto m = p.GetInt("metrics-port", 0, 65535);
    if (!m.ok()) return m.status();
    metrics.port = static_cast<uint16_t>(*m);
    flags.metrics = metrics;
  } else if (grpc_port_flag != 0 && grpc_port_flag <= 65535 - 1000) {
    metrics.port = static_cast<uint16_t>(grpc_port_flag + 1000);
    metrics.port_is_default = true;
    flags.metrics = metrics;
  }
  flags.server.host = o.grpc_host;
  return flags;
}

// --model-memory NAME=MiB: the bytes of memory fixed for each name.
absl::StatusOr<std::map<std::string, uint64_t>> ReadModelMemoryFlags(const ArgParser& p) {
  std::map<std::string, uint64_t> fixed;
  for (const std::string& value : p.GetAll("model-memory")) {
    const std::vector<std::string> kv = absl::StrSplit(value, absl::MaxSplits('=', 1));
    uint64_t mib = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &mib) || mib == 0 || mib > (uint64_t{1} << 30)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model-memory ", value, ": give NAME=MiB, MiB from 1 to 2^30"));
    }
    fixed[kv[0]] = mib << 20;
  }
  return fixed;
}

// Sets model i's memory part: --model-memory's for `keys[i]` (the name that
// flag uses for it), else `own[i]` (a models file's memory_mb), else a share
// of the rest in proportion to `sizes`. InvalidArgument for a --model-memory
// name no model has.
absl::Status AssignMemoryParts(const ArgParser& p, const std::vector<std::string>& keys,
                               const std::vector<uint64_t>& sizes,
                               const std::vector<std::optional<uint64_t>>& own,
                               std::vector<NodeOptions>& models) {
  RINGLM_ASSIGN_OR_RETURN(auto fixed, ReadModelMemoryFlags(p));
  std::vector<std::optional<uint64_t>> fixed_bytes = own;
  for (size_t i = 0; i < models.size(); ++i) {
    if (auto it = fixed.find(keys[i]); it != fixed.end()) {
      fixed_bytes[i] = it->second;
      fixed.erase(it);
    }
  }
  if (!fixed.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-memory names '", fixed.begin()->first, "', which no model has"));
  }
  RINGLM_ASSIGN_OR_RETURN(std::vector<MemoryPart> parts, DivideMemory(sizes, fixed_bytes));
  for (size_t i = 0; i < models.size(); ++i) models[i].memory_part = parts[i];
  return absl::OkStatus();
}

// With --model-from-peers: one NodeOptions per --model-fingerprint (or one
// for the members' one model), each named by its fingerprint unless
// --served-model-name names a lone one; memory divided evenly unless
// --model-memory FP=MiB fixes a part.
absl::StatusOr<std::vector<NodeOptions>> FromPeersNodeOptions(
    const ArgParser& p, const NodeOptions& base, const std::vector<std::string>& served) {
  std::vector<std::string> fingerprints = p.GetAll("model-fingerprint");
  if (fingerprints.empty()) fingerprints.push_back("");
  if (fingerprints.size() > 1 && !served.empty()) {
    return absl::InvalidArgumentError("--served-model-name goes with one --model-fingerprint");
  }
  std::vector<NodeOptions> models;
  for (const std::string& fingerprint : fingerprints) {
    NodeOptions o = base;
    o.model_fingerprint = fingerprint;
    o.names = served;
    if (o.names.empty() && !fingerprint.empty()) o.names.push_back(fingerprint);
    models.push_back(std::move(o));
  }
  // Evenly: the sizes are not known before the fetch.
  RINGLM_RETURN_IF_ERROR(AssignMemoryParts(p, fingerprints, std::vector<uint64_t>(models.size(), 1),
                                           std::vector<std::optional<uint64_t>>(models.size()),
                                           models));
  return models;
}

// One NodeOptions per model: `base` with each --model's file and names, and
// its part of the memory (by file size). --served-model-name adds names to
// a lone model.
absl::StatusOr<std::vector<NodeOptions>> ModelNodeOptions(
    const ArgParser& p, const NodeOptions& base, const std::vector<ModelsFileEntry>& file_models) {
  std::vector<std::string> served;
  for (const std::string& name : p.GetAll("served-model-name")) {
    if (name.empty() || name.size() > 256) {
      return absl::InvalidArgumentError("--served-model-name must be 1 to 256 bytes");
    }
    served.push_back(name);
  }
  if (base.model_from_peers) return FromPeersNodeOptions(p, base, served);
  // Every model to start with: --model's, then the models file's.
  struct Wanted {
    std::vector<std::string> names;
    std::string path;
    uint64_t memory_bytes = 0;  // 0: see --model-memory, else by size
  };
  std::vector<Wanted> wanted;
  for (const std::string& value : p.GetAll("model")) {
    RINGLM_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(value));
    wanted.push_back(
        {spec.name.empty() ? std::vector<std::string>{} : std::vector{spec.name}, spec.path});
  }
  for (const ModelsFileEntry& e : file_models) wanted.push_back({{e.name}, e.path, e.memory_bytes});
  if (wanted.size() > 1 && !served.empty()) {
    return absl::InvalidArgumentError(
        "--served-model-name goes with one --model; name each of several models with "
        "--model NAME=PATH");
  }
  if (wanted.size() > 1 && !base.draft_model_path.empty()) {
    return absl::InvalidArgumentError("--draft-model goes with one --model");
  }
  std::vector<NodeOptions> models;
  std::vector<uint64_t> sizes;
  std::vector<std::optional<uint64_t>> own;  // a models file's memory_mb
  for (Wanted& w : wanted) {
    std::error_code error;
    const uint64_t size = std::filesystem::file_size(w.path, error);
    if (error) {
      return absl::NotFoundError(absl::StrCat("model file ", w.path, ": ", error.message()));
    }
    NodeOptions o = base;
    o.model_path = w.path;
    // The names: NAME=, then --served-model-name's; else the file's base name.
    o.names = std::move(w.names);
    o.names.insert(o.names.end(), served.begin(), served.end());
    if (o.names.empty()) o.names.push_back(std::filesystem::path(w.path).stem().string());
    models.push_back(std::move(o));
    sizes.push_back(size);
    own.push_back(w.memory_bytes > 0 ? std::optional(w.memory_bytes) : std::nullopt);
  }
  std::vector<std::string> keys;
  for (const NodeOptions& o : models) keys.push_back(o.names.front());
  RINGLM_RETURN_IF_ERROR(AssignMemoryParts(p, keys, sizes, own, models));
  return models;
}

int Main(int argc, char** argv) {
  ArgParser p("ringlmd (--model [NAME=]PATH ... | --model-from-peers) [options]",
              "The ringlm node daemon. Start one on every machine of a LAN with the same models;\n"
              "they find each other by UDP broadcast, split the layers by speed within memory,\n"
              "and pass activations around the ring over gRPC. Stop with Ctrl-C or SIGTERM.");
  AddFlags(p);
  if (absl::Status s = p.Parse(std::vector<std::string>(argv + 1, argv + argc)); !s.ok()) {
    std::fprintf(stderr, "ringlmd: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (p.help_requested()) {
    std::fputs(p.HelpText().c_str(), stdout);
    return 0;
  }
  spdlog::level::level_enum level = spdlog::level::from_str(p.GetString("log-level"));
  if (level == spdlog::level::off && p.GetString("log-level") != "off") {
    std::fprintf(stderr, "ringlmd: unknown --log-level '%s'\n", p.GetString("log-level").c_str());
    return 2;
  }
  spdlog::set_level(level);
  const absl::Status kernels = ApplyKernelFlags(p);
  absl::StatusOr<DaemonFlags> flags = ReadFlags(p);
  absl::StatusOr<std::optional<ApiOptions>> api_options = ReadApiFlags(p);
  absl::StatusOr<std::vector<ModelsFileEntry>> file_models = std::vector<ModelsFileEntry>{};
  if (p.Has("models-file")) file_models = ReadModelsFile(p.GetString("models-file"));
  absl::StatusOr<std::vector<NodeOptions>> models =
      !flags.ok()         ? flags.status()
      : !file_models.ok() ? file_models.status()
                          : ModelNodeOptions(p, flags->node, *file_models);
  for (const absl::Status& s : {kernels, models.status(), api_options.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "ringlmd: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  // Signals are taken by sigwait below, never by a worker thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // re-read the models file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // One node per model, behind one gRPC server.
  absl::StatusOr<std::unique_ptr<ModelHost>> host = ModelHost::Create(flags->node, *models);
  if (!host.ok()) {
    std::fprintf(stderr, "ringlmd: %s\n", host.status().ToString().c_str());
    return 1;
  }
  // Models come and go at run time through the models file or the admin API.
  const bool loads_at_run_time =
      p.Has("models-file") || (api_options->has_value() && !flags->node.api_key.empty());
  if (absl::Status s = (*host)->Start(flags->server, loads_at_run_time); !s.ok()) {
    std::fprintf(stderr, "ringlmd: %s\n", s.ToString().c_str());
    return 1;
  }
  std::unique_ptr<MetricsServer> metrics_server;
  if (flags->metrics.has_value()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> started = StartMetricsServer(
        *flags->metrics, [h = host->get()] { return h->RenderMetrics(); },
        (*host)->advertise_host());
    if (!started.ok()) {
      std::fprintf(stderr, "ringlmd: %s\n", started.status().ToString().c_str());
      return 1;
    }
    metrics_server = *std::move(started);
  }
  std::unique_ptr<ApiServer> api;
  if (api_options->has_value()) {
    absl::StatusOr<AdmissionMetrics> admission_metrics =
        RegisterAdmissionMetrics((*host)->daemon_metrics());
    if (!admission_metrics.ok()) {
      std::fprintf(stderr, "ringlmd: %s\n", admission_metrics.status().ToString().c_str());
      return 1;
    }
    (*api_options)->admission.metrics = *admission_metrics;
    (*api_options)->load_model = [h = host->get()](const ModelLoadRequest& request) {
      return h->Load(request);
    };
    (*api_options)->unload_model = [h = host->get()](const std::string& name,
                                                     std::chrono::milliseconds drain) {
      return h->Unload(name, drain);
    };
    api = std::make_unique<ApiServer>(**api_options, (*host)->ApiModels());
    if (absl::Status s = api->Start(); !s.ok()) {
      std::fprintf(stderr, "ringlmd: %s\n", s.ToString().c_str());
      return 1;
    }
    (*host)->SetApiAddress((*api_options)->host, api->port());
    const std::string api_host =
        (*api_options)->host == "0.0.0.0" ? "127.0.0.1" : (*api_options)->host;
    spdlog::info("OpenAI-compatible API at http://{}:{}/v1, web chat at http://{}:{}/", api_host,
                 api->port(), api_host, api->port());
  }
  constexpr char kInsecureWarning[] =
      "INSECURE: this node runs without a cluster key; any host on the network can join the "
      "cluster, read prompts and replace replies. Use --cluster-key FILE.";
  const bool insecure = flags->node.insecure;
  if (insecure) spdlog::warn(kInsecureWarning);
  std::vector<std::string> from_file;  // the models served from the models file
  for (const ModelsFileEntry& e : *file_models) from_file.push_back(e.name);
  int sig = 0;
  while (true) {
    // Wake once a minute to repeat the insecure warning.
    const timespec minute{60, 0};
    sig = sigtimedwait(&signals, nullptr, &minute);
    if (sig == SIGHUP && p.Has("models-file")) {
      absl::StatusOr<std::vector<ModelsFileEntry>> wanted =
          ReadModelsFile(p.GetString("models-file"));
      if (wanted.ok()) {
        spdlog::info("SIGHUP: re-reading {}", p.GetString("models-file"));
        ApplyModelsFile(*wanted, from_file, **host, api.get());
      } else {
        spdlog::error("SIGHUP: {}; the models stay as they are", wanted.status().ToString());
      }
      continue;
    }
    if (sig == SIGHUP) continue;
    if (sig > 0) break;
    if (insecure) spdlog::warn(kInsecureWarning);
  }
  spdlog::info("signal {}: stopping", sig);
  if (api) api->Stop();
  if (metrics_server) metrics_server->Stop();
  (*host)->Stop();
  return 0;
}

}  // namespace
}  // namespace ringlm

int main(int argc, char** argv) { return ringlm::Main(argc, argv); }
