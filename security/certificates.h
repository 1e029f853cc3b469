// The X.509 side of ringlm's cluster security (docs/security.md):
//  - the cluster CA, a self-signed certificate every cluster-key holder
//    derives identically from the key;
//  - each node's own long-lived key, kept in its state dir;
//  - leaf certificates the CA key issues to nodes and clients;
//  - reading a leaf back (common name, role, SPKI fingerprint) and checking
//    that it chains to a CA.
// All functions are thread-safe; none logs.
#ifndef RINGLM_SECURITY_CERTIFICATES_H_
#define RINGLM_SECURITY_CERTIFICATES_H_

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "security/cluster_key.h"
#include "security/private_key.h"

namespace ringlm {

// What a leaf certificate's holder is. Encoded in the leaf as the subject's
// single organizationalUnitName: "node" or "client".
enum class Role { kNode, kClient };

// "node" or "client".
std::string_view RoleName(Role role);

// The DNS subjectAltName of every leaf; clients verify the server against it
// (see tls_credentials.h AddChannelArgs).
inline constexpr std::string_view kMemberDnsName = "ringlm-member";

// The cluster CA: its private key, derived from the cluster key, and its
// self-signed certificate:
//   Ed25519 key = HKDF(cluster key, "ringlm/v1/ca-ed25519"), X.509 v3,
//   serial 1, validity 2020-01-01T00:00:00Z .. 2120-01-01T00:00:00Z,
//   subject = issuer = CN "ringlm cluster <cluster-id>",
//   basicConstraints CA:TRUE (critical), keyUsage keyCertSign|cRLSign
//   (critical), subjectKeyIdentifier (SHA-1 of the public key).
// Ed25519 signatures are deterministic, so the PEM is byte-identical for
// every holder of the same cluster key.
//
// Ownership: owns the CA private key; move-only. Thread-safety: const
// methods are safe to call concurrently.
class ClusterCa {
 public:
  static absl::StatusOr<ClusterCa> Derive(const ClusterKey& key);

  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& cluster_id() const { return cluster_id_; }
  const PrivateKey& key() const { return key_; }

 private:
  ClusterCa(PrivateKey key, std::string cert_pem, std::string cluster_id)
      : key_(std::move(key)), cert_pem_(std::move(cert_pem)), cluster_id_(std::move(cluster_id)) {}

  PrivateKey key_;
  std::string cert_pem_;
  std::string cluster_id_;
};

// A leaf certificate (PEM) for `subject_key`'s public half, signed by `ca`:
//   subject OU = RoleName(role), CN = common_name; SAN DNS kMemberDnsName;
//   random positive 127-bit serial; validity now-1h .. now+10 years (kNode)
//   or now+1 day (kClient); basicConstraints CA:FALSE (critical); keyUsage
//   digitalSignature (critical); extendedKeyUsage serverAuth, clientAuth;
//   subject and authority key identifiers.
// InvalidArgument when common_name is empty, longer than 64 bytes or not
// UTF-8.
absl::StatusOr<std::string> IssueLeaf(const ClusterCa& ca, const PrivateKey& subject_key,
                                      std::string_view common_name, Role role);

// SHA-256 of the DER SubjectPublicKeyInfo of the first certificate in
// `pem`: 32 raw bytes, equal to SpkiFingerprint() of its key.
// InvalidArgument when `pem` holds no certificate.
absl::StatusOr<std::string> SpkiFingerprintOfPem(std::string_view pem);

// What a ringlm leaf certificate says about its holder.
struct LeafInfo {
  std::string common_name;
  Role role = Role::kClient;
  std::string spki_fingerprint;  // 32 raw bytes
};

// Reads common name, role and SPKI fingerprint from the first certificate in
// `pem`. Does not verify anything (see VerifyLeaf). InvalidArgument when the
// certificate does not parse, lacks a CN, or lacks a single OU naming a role.
absl::StatusOr<LeafInfo> InspectLeaf(std::string_view pem);

// OK when the first certificate in `leaf_pem` chains to the CA certificate
// `ca_pem` and is valid now (X509_verify_cert). Unauthenticated with
// OpenSSL's reason otherwise; InvalidArgument when either does not parse.
absl::Status VerifyLeaf(std::string_view ca_pem, std::string_view leaf_pem);

// This node's own Ed25519 key, kept in `state_dir`/node_key.pem (unencrypted
// PKCS#8 PEM, mode 0600). Creates `state_dir` (mode 0700, with missing
// parents) and a fresh key on first use; later calls return the same key.
// Errors: DataLoss naming the path when the file is corrupt or not an
// Ed25519 key; FailedPrecondition when the file is readable by group or
// others (message says `chmod 600 PATH`); PermissionDenied / other errno
// codes from the file system.
absl::StatusOr<PrivateKey> LoadOrCreateNodeKey(const std::string& state_dir);

}  // namespace ringlm

#endif  // RINGLM_SECURITY_CERTIFICATES_H_
