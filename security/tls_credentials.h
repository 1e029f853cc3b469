// gRPC TLS for ringlm (docs/security.md): a node's or client's identity
// (leaf certificate under the cluster CA), the server and channel
// credentials built from it, and reading the verified peer of a call.
//
// Wire contract:
//  - Servers present their leaf, trust only the cluster CA, and request a
//    client certificate, verifying it when presented
//    (GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY). A certificate from
//    another CA fails the handshake; a TLS client without a certificate gets
//    through the handshake, and every handler must then refuse it: call
//    RequireAuthenticated(IdentityOf(*context)) first.
//  - Channels trust only the cluster CA, present their leaf, and must be
//    created with AddChannelArgs() so that the server is checked against
//    the SAN `ringlm-member` rather than the host name dialled.
#ifndef RINGLM_SECURITY_TLS_CREDENTIALS_H_
#define RINGLM_SECURITY_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "security/certificates.h"
#include "security/cluster_key.h"

namespace grpc {
class AuthContext;
class ChannelArguments;
class ChannelCredentials;
class ClientContext;
class ServerContextBase;
class ServerCredentials;
}  // namespace grpc

namespace ringlm {

// Everything a process needs to speak TLS in the cluster. A plain value;
// key_pem is the secret half, so do not log it. Thread-compatible.
struct TlsIdentity {
  std::string ca_pem;            // the cluster CA certificate
  std::string key_pem;           // own private key, PKCS#8 PEM (secret)
  std::string cert_pem;          // own leaf certificate, signed by the CA
  std::string spki_fingerprint;  // SHA-256 of the leaf's SPKI, 32 raw bytes
  Role role = Role::kNode;
  std::string common_name;  // the node id, or `client-<8 hex>`
};

// A node's identity: its persistent key from `state_dir` (see
// LoadOrCreateNodeKey; created on first use) and a fresh leaf with
// CN = node_id, role kNode, valid 10 years. The fingerprint is stable across
// restarts with the same state dir. Errors from LoadOrCreateNodeKey and
// IssueLeaf (InvalidArgument for an empty or over-long node id).
absl::StatusOr<TlsIdentity> MakeNodeIdentity(const ClusterKey& key, const std::string& state_dir,
                                             const std::string& node_id);

// A client's (CLI's) identity: a fresh in-memory key and a leaf with
// CN = `client-<8 random hex>`, role kClient, valid 1 day.
absl::StatusOr<TlsIdentity> MakeClientIdentity(const ClusterKey& key);

// Server credentials presenting `identity`, trusting only its CA, requesting
// and verifying client certificates (see the wire contract above).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsIdentity& identity);

// Channel credentials trusting only the CA and presenting `identity` as the
// client certificate. Use with AddChannelArgs().
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsIdentity& identity);

// Sets GRPC_SSL_TARGET_NAME_OVERRIDE_ARG ("grpc.ssl_target_name_override")
// to kMemberDnsName, the SAN of every leaf.
void AddChannelArgs(grpc::ChannelArguments* args);

// Who is at the other end of a call. `authenticated` is true only when gRPC
// verified the peer's certificate against the cluster CA during the
// handshake and it carries a ringlm CN and role; otherwise the other fields
// are empty / kClient and must not be trusted.
struct PeerIdentity {
  bool authenticated = false;
  Role role = Role::kClient;
  std::string common_name;
  std::string spki_fingerprint;  // 32 raw bytes
};

// Reads the verified peer certificate (property GRPC_X509_PEM_CERT_PROPERTY_NAME,
// "x509_pem_cert") of an auth context. Unauthenticated unless
// IsPeerAuthenticated() and the certificate parses as a ringlm leaf.
PeerIdentity IdentityOf(const grpc::AuthContext& auth);

// The client of the current call, seen by a handler.
PeerIdentity IdentityOf(const grpc::ServerContextBase& context);

// The server of a finished (or at least started) call, seen by its client.
// Unauthenticated when the call never reached a secure transport.
PeerIdentity IdentityOf(const grpc::ClientContext& context);

// OK for an authenticated peer; Unauthenticated otherwise.
absl::Status RequireAuthenticated(const PeerIdentity& peer);

}  // namespace ringlm

#endif  // RINGLM_SECURITY_TLS_CREDENTIALS_H_
