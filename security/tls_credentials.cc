#include "security/tls_credentials.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/auth_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/channel_arguments.h>

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

constexpr size_t kClientSuffixBytes = 4;  // 8 hex digits

absl::StatusOr<TlsIdentity> MakeIdentity(const ClusterKey& cluster_key, const PrivateKey& key,
                                         const std::string& common_name, Role role) {
  absl::StatusOr<ClusterCa> ca = ClusterCa::Derive(cluster_key);
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = IssueLeaf(*ca, key, common_name, role);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key_pem = key.ToPem();
  if (!key_pem.ok()) return key_pem.status();
  TlsIdentity identity;
  identity.ca_pem = ca->cert_pem();
  identity.key_pem = *std::move(key_pem);
  identity.cert_pem = *std::move(cert);
  identity.spki_fingerprint = key.SpkiFingerprint();
  identity.role = role;
  identity.common_name = common_name;
  return identity;
}

// Parsing a certificate with OpenSSL 3 costs about half a millisecond (its
// decoder framework takes locks and allocates a great deal), and every call
// of the ring needs its caller's identity. The handful of certificates a
// node ever sees are parsed once, keyed by the SHA-256 of their PEM.
// Bounded: cleared when full. Thread-safe.
class LeafIdentityCache {
 public:
  static LeafIdentityCache& Get() {
    static LeafIdentityCache* cache = new LeafIdentityCache;  // never destroyed
    return *cache;
  }

  PeerIdentity Lookup(std::string_view pem) {
    const std::string digest = Sha256(pem);
    {
      absl::MutexLock lock(&mu_);
      if (auto it = cache_.find(digest); it != cache_.end()) return it->second;
    }
    PeerIdentity peer;
    absl::StatusOr<LeafInfo> leaf = InspectLeaf(pem);
    if (leaf.ok()) {
      peer.authenticated = true;
      peer.role = leaf->role;
      peer.common_name = std::move(leaf->common_name);
      peer.spki_fingerprint = std::move(leaf->spki_fingerprint);
    }
    absl::MutexLock lock(&mu_);
    if (cache_.size() >= kMaxEntries) cache_.clear();
    cache_.emplace(digest, peer);
    return peer;
  }

 private:
  static constexpr size_t kMaxEntries = 1024;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, PeerIdentity> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<TlsIdentity> MakeNodeIdentity(const ClusterKey& key, const std::string& state_dir,
                                             const std::string& node_id) {
  absl::StatusOr<PrivateKey> node_key = LoadOrCreateNodeKey(state_dir);
  if (!node_key.ok()) return node_key.status();
  return MakeIdentity(key, *node_key, node_id, Role::kNode);
}

absl::StatusOr<TlsIdentity> MakeClientIdentity(const ClusterKey& key) {
  absl::StatusOr<PrivateKey> client_key = PrivateKey::Generate();
  if (!client_key.ok()) return client_key.status();
  return MakeIdentity(key, *client_key,
                      absl::StrCat("client-", HexEncode(RandomBytes(kClientSuffixBytes))),
                      Role::kClient);
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsIdentity& identity) {
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = identity.ca_pem;
  options.pem_key_cert_pairs.push_back({identity.key_pem, identity.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsIdentity& identity) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = identity.ca_pem;
  options.pem_private_key = identity.key_pem;
  options.pem_cert_chain = identity.cert_pem;
  return grpc::SslCredentials(options);
}

void AddChannelArgs(grpc::ChannelArguments* args) {
  args->SetSslTargetNameOverride(std::string(kMemberDnsName));
}

PeerIdentity IdentityOf(const grpc::AuthContext& auth) {
  if (!auth.IsPeerAuthenticated()) return PeerIdentity();
  const std::vector<grpc::string_ref> pems =
      auth.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pems.empty()) return PeerIdentity();
  return LeafIdentityCache::Get().Lookup(std::string_view(pems[0].data(), pems[0].size()));
}

PeerIdentity IdentityOf(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  return auth == nullptr ? PeerIdentity() : IdentityOf(*auth);
}

PeerIdentity IdentityOf(const grpc::ClientContext& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  return auth == nullptr ? PeerIdentity() : IdentityOf(*auth);
}

absl::Status RequireAuthenticated(const PeerIdentity& peer) {
  if (peer.authenticated) return absl::OkStatus();
  return absl::UnauthenticatedError(
      "caller presented no certificate of this cluster (is it using the cluster key?)");
}

}  // namespace ringlm
