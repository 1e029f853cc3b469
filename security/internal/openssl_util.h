// Owning handles for the OpenSSL objects security/ uses, and a helper that
// turns OpenSSL's thread-local error queue into an absl::Status. Internal to
// security/: nothing outside this folder includes it.
#ifndef RINGLM_SECURITY_INTERNAL_OPENSSL_UTIL_H_
#define RINGLM_SECURITY_INTERNAL_OPENSSL_UTIL_H_

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringlm::security_internal {

template <typename T, void (*Free)(T*)>
struct OpenSslDeleter {
  void operator()(T* p) const { Free(p); }
};

using BioPtr = std::unique_ptr<BIO, OpenSslDeleter<BIO, BIO_free_all>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpenSslDeleter<BIGNUM, BN_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDeleter<EVP_PKEY, EVP_PKEY_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, OpenSslDeleter<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;
using X509Ptr = std::unique_ptr<X509, OpenSslDeleter<X509, X509_free>>;
using X509ExtPtr =
    std::unique_ptr<X509_EXTENSION, OpenSslDeleter<X509_EXTENSION, X509_EXTENSION_free>>;
using X509StorePtr = std::unique_ptr<X509_STORE, OpenSslDeleter<X509_STORE, X509_STORE_free>>;
using X509StoreCtxPtr =
    std::unique_ptr<X509_STORE_CTX, OpenSslDeleter<X509_STORE_CTX, X509_STORE_CTX_free>>;

// `code` with "`what`: <OpenSSL's queued errors>"; clears the queue. Error
// strings from OpenSSL never contain key material.
absl::Status OpenSslError(absl::StatusCode code, const std::string& what);

// A read-only memory BIO over `data` (which must outlive it).
BioPtr MemoryBio(std::string_view data);

// Everything written to a memory BIO so far.
std::string BioContents(BIO* bio);

// The first certificate in `pem`. InvalidArgument when there is none.
absl::StatusOr<X509Ptr> ParseCertificate(std::string_view pem);

// The DER SubjectPublicKeyInfo of `key` (public half only).
absl::StatusOr<std::string> SpkiDer(const EVP_PKEY* key);

}  // namespace ringlm::security_internal

#endif  // RINGLM_SECURITY_INTERNAL_OPENSSL_UTIL_H_
