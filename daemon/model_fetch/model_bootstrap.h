// How a node with no model file learns the cluster's model and opens its own
// partial copy of it (docs/model-fetch.md).
#ifndef RINGLM_DAEMON_MODEL_FETCH_MODEL_BOOTSTRAP_H_
#define RINGLM_DAEMON_MODEL_FETCH_MODEL_BOOTSTRAP_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/rpc/peer_client.h"
#include "discovery/discovery_service.h"
#include "model_store/model_cache.h"

namespace ringlm {

struct ModelBootstrapOptions {
  std::string state_dir;  // the cache lives under STATE/models/
  std::string node_id;    // this node (its own announcements are ignored)
  // Listen for announcements (listen_only is set here); off = static peers only.
  bool discovery_enabled = true;
  DiscoveryOptions discovery;
  std::vector<std::string> static_peers;  // host:port
  // The model to fetch; empty = the one model the members serve (an error
  // when they serve several).
  std::string fingerprint;
  // How long to wait for a member that serves the model; a progress line
  // every few seconds meanwhile.
  std::chrono::milliseconds patience{std::chrono::minutes(5)};
};

// The cache and which model it holds.
struct BootstrappedModel {
  std::shared_ptr<ModelCache> cache;
  std::string fingerprint;
  bool reused = false;  // the cache was there already (nothing was fetched)
};

// Finds the members that serve a model: announcements under the cluster key
// (listen-only, any model) and static peers, each then proven by a TLS
// health call. Reuses the cache under the state dir when it is for that
// model. Otherwise asks up to 8 members for the SHA-256 of the model's
// manifest and header and takes the pair most of them agree on
// (FailedPrecondition when they are split evenly), then fetches the manifest
// and the header from one of them, checks both digests, and creates the
// cache: header and file size only, no tensor bytes yet. The caller must
// still check that the header's fingerprint is the one chosen.
// Unavailable when no member answers within `patience`.
absl::StatusOr<BootstrappedModel> BootstrapModel(const ModelBootstrapOptions& options,
                                                 PeerClient& client);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_MODEL_FETCH_MODEL_BOOTSTRAP_H_
