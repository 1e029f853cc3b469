// Reading ringlm certificates back: SPKI fingerprint, common name and role,
// and chain verification against the cluster CA.
#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "security/certificates.h"
#include "security/crypto.h"
#include "security/internal/openssl_util.h"

namespace ringlm {

using security_internal::OpenSslError;
using security_internal::X509Ptr;

namespace {

absl::StatusOr<std::string> FingerprintOf(X509* cert) {
  const EVP_PKEY* key = X509_get0_pubkey(cert);
  if (key == nullptr) {
    return OpenSslError(absl::StatusCode::kInvalidArgument, "certificate public key");
  }
  absl::StatusOr<std::string> der = security_internal::SpkiDer(key);
  if (!der.ok()) return der.status();
  return Sha256(*der);
}

// The value of the only `nid` entry in `name`, as UTF-8; nullopt when there
// is none, more than one, or it does not convert.
std::optional<std::string> SingleEntry(const X509_NAME* name, int nid) {
  const int index = X509_NAME_get_index_by_NID(name, nid, -1);
  if (index < 0 || X509_NAME_get_index_by_NID(name, nid, index) >= 0) return std::nullopt;
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index));
  unsigned char* utf8 = nullptr;
  const int len = ASN1_STRING_to_UTF8(&utf8, data);
  if (len < 0) return std::nullopt;
  std::string out(reinterpret_cast<const char*>(utf8), static_cast<size_t>(len));
  OPENSSL_free(utf8);
  return out;
}

}  // namespace

absl::StatusOr<std::string> SpkiFingerprintOfPem(std::string_view pem) {
  absl::StatusOr<X509Ptr> cert = security_internal::ParseCertificate(pem);
  if (!cert.ok()) return cert.status();
  return FingerprintOf(cert->get());
}

absl::StatusOr<LeafInfo> InspectLeaf(std::string_view pem) {
  absl::StatusOr<X509Ptr> cert = security_internal::ParseCertificate(pem);
  if (!cert.ok()) return cert.status();
  const X509_NAME* subject = X509_get_subject_name(cert->get());
  std::optional<std::string> cn = SingleEntry(subject, NID_commonName);
  if (!cn.has_value() || cn->empty()) {
    return absl::InvalidArgumentError("certificate has no single common name");
  }
  std::optional<std::string> ou = SingleEntry(subject, NID_organizationalUnitName);
  LeafInfo info;
  if (ou == RoleName(Role::kNode)) {
    info.role = Role::kNode;
  } else if (ou == RoleName(Role::kClient)) {
    info.role = Role::kClient;
  } else {
    return absl::InvalidArgumentError("certificate has no ringlm role (OU=node or OU=client)");
  }
  info.common_name = *std::move(cn);
  absl::StatusOr<std::string> fingerprint = FingerprintOf(cert->get());
  if (!fingerprint.ok()) return fingerprint.status();
  info.spki_fingerprint = *std::move(fingerprint);
  return info;
}

absl::Status VerifyLeaf(std::string_view ca_pem, std::string_view leaf_pem) {
  absl::StatusOr<X509Ptr> ca = security_internal::ParseCertificate(ca_pem);
  if (!ca.ok()) return ca.status();
  absl::StatusOr<X509Ptr> leaf = security_internal::ParseCertificate(leaf_pem);
  if (!leaf.ok()) return leaf.status();
  security_internal::X509StorePtr store(X509_STORE_new());
  security_internal::X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (store == nullptr || ctx == nullptr || X509_STORE_add_cert(store.get(), ca->get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), leaf->get(), nullptr) != 1) {
    return OpenSslError(absl::StatusCode::kInternal, "X509 store");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::UnauthenticatedError(absl::StrCat("certificate does not verify against the CA: ",
                                                   X509_verify_cert_error_string(err)));
  }
  return absl::OkStatus();
}

}  // namespace ringlm
