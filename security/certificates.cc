// Building certificates: the deterministic cluster CA and the leaves it
// issues. Reading them back lives in certificate_inspect.cc, the node key in
// node_key.cc.
#include "security/certificates.h"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "security/crypto.h"
#include "security/internal/openssl_util.h"

namespace ringlm {

using security_internal::BignumPtr;
using security_internal::BioPtr;
using security_internal::OpenSslError;
using security_internal::X509ExtPtr;
using security_internal::X509Ptr;

namespace {

constexpr absl::StatusCode kInternal = absl::StatusCode::kInternal;
// Fixed CA validity, so the CA certificate depends on the cluster key only.
constexpr char kCaNotBefore[] = "20200101000000Z";
constexpr char kCaNotAfter[] = "21200101000000Z";
constexpr long kLeafBackdateSeconds = 3600;  // tolerate clocks a little behind
constexpr int kNodeLeafDays = 3652;          // 10 years
constexpr int kClientLeafDays = 1;
constexpr size_t kMaxCommonNameBytes = 64;  // RFC 5280 ub-common-name
constexpr size_t kSerialBytes = 16;

struct Extension {
  int nid;
  const char* value;  // openssl x509v3_config syntax
};

struct NameEntry {
  const char* field;  // "CN", "OU"
  std::string_view value;
};

absl::StatusOr<X509Ptr> NewV3Certificate() {
  X509Ptr cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return OpenSslError(kInternal, "X509_new");
  }
  return cert;
}

// Sets the subject name of `cert` to `entries`, in order.
absl::Status SetSubject(X509* cert, std::initializer_list<NameEntry> entries) {
  X509_NAME* name = X509_get_subject_name(cert);
  for (const NameEntry& e : entries) {
    if (X509_NAME_add_entry_by_txt(name, e.field, MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(e.value.data()),
                                   static_cast<int>(e.value.size()), -1, 0) != 1) {
      return OpenSslError(absl::StatusCode::kInvalidArgument,
                          absl::StrCat("invalid certificate subject field ", e.field));
    }
  }
  return absl::OkStatus();
}

// Adds `extensions` in order; `issuer` is the signing certificate (`cert`
// itself when self-signed). The public key must already be set.
absl::Status AddExtensions(X509* cert, X509* issuer, std::initializer_list<Extension> extensions) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  for (const Extension& e : extensions) {
    X509ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, e.nid, e.value));
    if (ext == nullptr || X509_add_ext(cert, ext.get(), -1) != 1) {
      return OpenSslError(kInternal, absl::StrCat("certificate extension ", OBJ_nid2sn(e.nid)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SignAndEncode(X509* cert, const PrivateKey& signer) {
  // Ed25519 takes no separate digest: md must be null.
  if (X509_sign(cert, signer.pkey(), nullptr) <= 0) return OpenSslError(kInternal, "X509_sign");
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return OpenSslError(kInternal, "PEM_write_bio_X509");
  }
  return security_internal::BioContents(bio.get());
}

absl::Status SetRandomSerial(X509* cert) {
  std::string bytes = RandomBytes(kSerialBytes);
  bytes[0] = static_cast<char>(bytes[0] & 0x7f);  // DER INTEGER stays positive, <= 16 bytes
  BignumPtr bn(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                         static_cast<int>(bytes.size()), nullptr));
  if (bn == nullptr || (BN_is_zero(bn.get()) && BN_one(bn.get()) != 1) ||
      BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) == nullptr) {
    return OpenSslError(kInternal, "certificate serial");
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kNode:
      return "node";
    case Role::kClient:
      return "client";
  }
  return "unknown";
}

absl::StatusOr<ClusterCa> ClusterCa::Derive(const ClusterKey& cluster_key) {
  std::string seed = cluster_key.CaPrivateKeySeed();
  absl::StatusOr<PrivateKey> key = PrivateKey::FromEd25519Seed(seed);
  OPENSSL_cleanse(seed.data(), seed.size());
  if (!key.ok()) return key.status();
  const std::string cluster_id = cluster_key.ClusterId();

  absl::StatusOr<X509Ptr> cert = NewV3Certificate();
  if (!cert.ok()) return cert.status();
  X509* x = cert->get();
  if (ASN1_INTEGER_set(X509_get_serialNumber(x), 1) != 1 ||
      ASN1_TIME_set_string_X509(X509_getm_notBefore(x), kCaNotBefore) != 1 ||
      ASN1_TIME_set_string_X509(X509_getm_notAfter(x), kCaNotAfter) != 1 ||
      X509_set_pubkey(x, key->pkey()) != 1) {
    return OpenSslError(kInternal, "CA certificate fields");
  }
  const std::string common_name = absl::StrCat("ringlm cluster ", cluster_id);
  if (absl::Status s = SetSubject(x, {{"CN", common_name}}); !s.ok()) return s;
  if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1) {
    return OpenSslError(kInternal, "CA issuer name");
  }
  if (absl::Status s = AddExtensions(x, x,
                                     {
                                         {NID_basic_constraints, "critical,CA:TRUE"},
                                         {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                         {NID_subject_key_identifier, "hash"},
                                     });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> pem = SignAndEncode(x, *key);
  if (!pem.ok()) return pem.status();
  return ClusterCa(*std::move(key), *std::move(pem), cluster_id);
}

absl::StatusOr<std::string> IssueLeaf(const ClusterCa& ca, const PrivateKey& subject_key,
                                      std::string_view common_name, Role role) {
  if (common_name.empty() || common_name.size() > kMaxCommonNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("certificate common name must have 1..",
                                                   kMaxCommonNameBytes, " bytes, not ",
                                                   common_name.size()));
  }
  absl::StatusOr<X509Ptr> ca_cert = security_internal::ParseCertificate(ca.cert_pem());
  if (!ca_cert.ok()) return ca_cert.status();
  absl::StatusOr<X509Ptr> cert = NewV3Certificate();
  if (!cert.ok()) return cert.status();
  X509* x = cert->get();
  const int days = role == Role::kNode ? kNodeLeafDays : kClientLeafDays;
  if (absl::Status s = SetRandomSerial(x); !s.ok()) return s;
  if (X509_gmtime_adj(X509_getm_notBefore(x), -kLeafBackdateSeconds) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(x), days, 0, nullptr) == nullptr ||
      X509_set_pubkey(x, subject_key.pkey()) != 1 ||
      X509_set_issuer_name(x, X509_get_subject_name(ca_cert->get())) != 1) {
    return OpenSslError(kInternal, "leaf certificate fields");
  }
  if (absl::Status s = SetSubject(x, {{"OU", RoleName(role)}, {"CN", common_name}}); !s.ok()) {
    return s;
  }
  const std::string san = absl::StrCat("DNS:", std::string(kMemberDnsName));
  if (absl::Status s = AddExtensions(x, ca_cert->get(),
                                     {
                                         {NID_basic_constraints, "critical,CA:FALSE"},
                                         {NID_key_usage, "critical,digitalSignature"},
                                         {NID_ext_key_usage, "serverAuth,clientAuth"},
                                         {NID_subject_alt_name, san.c_str()},
                                         {NID_subject_key_identifier, "hash"},
                                         {NID_authority_key_identifier, "keyid:always"},
                                     });
      !s.ok()) {
    return s;
  }
  return SignAndEncode(x, ca.key());
}

}  // namespace ringlm
