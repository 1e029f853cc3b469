#include "daemon/model_fetch/model_bootstrap.h"

#include <map>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "daemon/model_fetch/peer_tensor_source.h"
#include "security/crypto.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(500);
constexpr auto kProgressEvery = std::chrono::seconds(5);
constexpr size_t kMaxAsked = 8;
// A header larger than this is refused (real ones are a few MiB: the
// vocabulary and merges).
constexpr uint64_t kMaxHeaderBytes = 512ull << 20;

struct Member {
  std::string node_id;
  std::string address;
};

// Members that answered a TLS health call as who they announced, by the
// model fingerprint they serve.
std::map<std::string, std::vector<Member>> ProvenMembers(const ModelBootstrapOptions& options,
                                                         DiscoveryService* discovery,
                                                         PeerClient& client) {
  std::vector<Member> candidates;
  for (const std::string& address : options.static_peers) candidates.push_back({"", address});
  std::map<std::string, std::string> announced_spki;
  if (discovery != nullptr) {
    for (const PeerInfo& p : discovery->peers().Snapshot()) {
      candidates.push_back({p.node_id, p.address});
      announced_spki[p.node_id] = p.spki_fingerprint;
    }
  }
  std::map<std::string, std::vector<Member>> by_model;
  for (const Member& c : candidates) {
    v1::HealthReply reply;
    std::string spki;
    if (!client.Health(c.address, &reply, &spki).ok()) continue;
    if (reply.node_id() == options.node_id || reply.model_fingerprint().empty()) continue;
    if (!c.node_id.empty() &&
        (reply.node_id() != c.node_id || !ConstantTimeEquals(spki, announced_spki[c.node_id]))) {
      continue;  // not the node that announced itself there
    }
    by_model[reply.model_fingerprint()].push_back({reply.node_id(), c.address});
  }
  return by_model;
}

// The header, chunk by chunk, in order.
absl::StatusOr<std::string> FetchHeader(PeerClient& client, const Member& m,
                                        const std::string& fingerprint, uint64_t header_size,
                                        const std::string& header_sha256) {
  v1::FetchTensorRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.set_model_fingerprint(fingerprint);
  request.set_header(true);
  std::string header;
  uint64_t expected = 0;
  absl::Status bad;
  RINGLM_RETURN_IF_ERROR(
      client.FetchTensor(m.address, request, header_size, [&](const v1::TensorChunk& c) {
        if (c.chunk() != expected || header.size() + c.data().size() > header_size) {
          bad = absl::DataLossError("the header arrived out of order or too long");
          return false;
        }
        header += c.data();
        ++expected;
        return true;
      }));
  RINGLM_RETURN_IF_ERROR(bad);
  if (header.size() != header_size || !ConstantTimeEquals(Sha256(header), header_sha256)) {
    return absl::DataLossError("the header is not the one the members agree on");
  }
  return header;
}

// Asks up to kMaxAsked members for the manifest and header digests, takes
// the majority,
// and creates the cache from one member of it.
absl::StatusOr<std::shared_ptr<ModelCache>> CreateFromMembers(PeerClient& client,
                                                              const std::vector<Member>& members,
                                                              const std::string& fingerprint,
                                                              const std::string& dir) {
  struct Answer {
    v1::GetModelReply reply;
    std::vector<Member> members;
  };
  std::map<std::string, Answer> answers;  // by digest, file and header size
  absl::Status last = absl::UnavailableError("no member answered");
  for (size_t i = 0; i < members.size() && i < kMaxAsked; ++i) {
    v1::GetModelReply reply;
    if (absl::Status s =
            client.GetModel(members[i].address, GetModelRequestFor(fingerprint), &reply);
        !s.ok()) {
      last = s;
      continue;
    }
    const std::string key = absl::StrCat(reply.manifest_digest(), "/", reply.header_sha256(), "/",
                                         reply.file_size(), "/", reply.header_size());
    answers[key].reply = reply;
    answers[key].members.push_back(members[i]);
  }
  if (answers.empty()) return last;
  std::vector<const Answer*> ranked;
  for (const auto& [key, a] : answers) ranked.push_back(&a);
  std::sort(ranked.begin(), ranked.end(),
            [](const Answer* a, const Answer* b) { return a->members.size() > b->members.size(); });
  if (ranked.size() > 1 && ranked[0]->members.size() == ranked[1]->members.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the members disagree about the model's bytes (", ranked.size(),
                     " different manifests, none held by a majority); make their copies the same"));
  }
  const Answer& chosen = *ranked[0];
  if (chosen.reply.header_size() == 0 || chosen.reply.header_size() > kMaxHeaderBytes ||
      chosen.reply.header_size() > chosen.reply.file_size()) {
    return absl::DataLossError(
        absl::StrCat("members announce a header of ", chosen.reply.header_size(), " bytes"));
  }
  for (const Member& m : chosen.members) {
    v1::GetModelReply reply;
    absl::Status s = client.GetModel(m.address, GetModelRequestFor(fingerprint, true), &reply);
    if (s.ok() && !ConstantTimeEquals(Sha256(reply.manifest()), chosen.reply.manifest_digest())) {
      s = absl::DataLossError("its manifest does not match the digest the members agree on");
    }
    absl::StatusOr<std::string> header =
        s.ok() ? FetchHeader(client, m, fingerprint, chosen.reply.header_size(),
                             chosen.reply.header_sha256())
               : absl::StatusOr<std::string>(s);
    absl::StatusOr<std::unique_ptr<ModelCache>> cache =
        header.ok() ? ModelCache::Create(dir, *header, chosen.reply.file_size(), reply.manifest())
                    : absl::StatusOr<std::unique_ptr<ModelCache>>(header.status());
    if (cache.ok()) {
      spdlog::info(
          "model fetch: header ({:.1f} KiB) and manifest from {}; {} of {} member(s) "
          "agree on the manifest",
          header->size() / 1024.0, m.node_id, chosen.members.size(),
          std::min(members.size(), kMaxAsked));
      return std::shared_ptr<ModelCache>(*std::move(cache));
    }
    spdlog::warn("model fetch: cannot take the model from {}: {}", m.node_id,
                 cache.status().ToString());
    last = cache.status();
  }
  return last;
}

}  // namespace

absl::StatusOr<BootstrappedModel> BootstrapModel(const ModelBootstrapOptions& options,
                                                 PeerClient& client) {
  std::unique_ptr<DiscoveryService> discovery;
  if (options.discovery_enabled) {
    DiscoveryOptions d = options.discovery;
    d.listen_only = true;
    discovery = std::make_unique<DiscoveryService>(d);
    Announcement self;
    self.node_id = options.node_id;
    self.grpc_port = 1;  // never sent: listen-only
    RINGLM_RETURN_IF_ERROR(discovery->Start(self));
  }
  const auto started = std::chrono::steady_clock::now();
  auto next_progress = started + kProgressEvery;
  absl::Status last = absl::UnavailableError("no member of the cluster answered");
  while (true) {
    std::map<std::string, std::vector<Member>> by_model =
        ProvenMembers(options, discovery.get(), client);
    std::string fingerprint = options.fingerprint;
    if (fingerprint.empty() && by_model.size() > 1) {
      std::vector<std::string> names;
      for (const auto& [fp, members] : by_model) {
        names.push_back(absl::StrCat("\"", absl::CHexEscape(fp), "\" (", members.size(), ")"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "the cluster's members serve ", by_model.size(), " models: ", absl::StrJoin(names, ", "),
          "; pass --model-fingerprint to choose one"));
    }
    if (fingerprint.empty() && by_model.size() == 1) fingerprint = by_model.begin()->first;
    auto found = by_model.find(fingerprint);
    if (found != by_model.end()) {
      const std::string dir = ModelCacheDir(options.state_dir, fingerprint);
      absl::StatusOr<std::unique_ptr<ModelCache>> cached = ModelCache::Open(dir);
      if (cached.ok()) {
        spdlog::info("model fetch: reusing the copy in {} ({} tensors held)", dir,
                     (*cached)->Held().size());
        return BootstrappedModel{std::move(*cached), fingerprint, true};
      }
      if (cached.status().code() != absl::StatusCode::kNotFound) {
        spdlog::warn("model fetch: the copy in {} is unusable ({}); starting afresh", dir,
                     cached.status().ToString());
      }
      absl::StatusOr<std::shared_ptr<ModelCache>> cache =
          CreateFromMembers(client, found->second, fingerprint, dir);
      if (cache.ok()) return BootstrappedModel{*std::move(cache), fingerprint, false};
      if (cache.status().code() != absl::StatusCode::kUnavailable) return cache.status();
      last = cache.status();  // e.g. the source is still computing its manifest
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - started >= options.patience) {
      return absl::UnavailableError(
          absl::StrCat("no member of the cluster served the model within ",
                       std::chrono::duration_cast<std::chrono::seconds>(options.patience).count(),
                       " s: ", last.message()));
    }
    if (now >= next_progress) {
      spdlog::info("model fetch: waiting for a member that serves {} ({} s; {})",
                   fingerprint.empty() ? std::string("a model") : "the model",
                   std::chrono::duration_cast<std::chrono::seconds>(now - started).count(),
                   std::string(last.message()));
      next_progress = now + kProgressEvery;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace ringlm
