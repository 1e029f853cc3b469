// An Ed25519 signing key: the cluster CA's key (derived from the cluster
// key) or a node's or client's own key. Wraps an OpenSSL EVP_PKEY so that the
// rest of ringlm never touches OpenSSL types directly.
#ifndef RINGLM_SECURITY_PRIVATE_KEY_H_
#define RINGLM_SECURITY_PRIVATE_KEY_H_

#include <openssl/types.h>

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringlm {

// An Ed25519 private key and its public half.
//
// Ownership: owns its EVP_PKEY; move-only (a moved-from key is empty and may
// only be destroyed or assigned). Thread-safety: const methods are safe to
// call concurrently. The secret never appears in a Status message.
class PrivateKey {
 public:
  // A fresh key from OpenSSL's CSPRNG.
  static absl::StatusOr<PrivateKey> Generate();
  // The key whose RFC 8032 private key is `seed` (32 bytes): deterministic.
  // InvalidArgument on another length.
  static absl::StatusOr<PrivateKey> FromEd25519Seed(std::string_view seed);
  // An unencrypted PKCS#8 PEM ("BEGIN PRIVATE KEY"). InvalidArgument when it
  // does not parse or is not an Ed25519 key.
  static absl::StatusOr<PrivateKey> FromPem(std::string_view pem);

  PrivateKey(PrivateKey&& other) noexcept;
  PrivateKey& operator=(PrivateKey&& other) noexcept;
  PrivateKey(const PrivateKey&) = delete;
  PrivateKey& operator=(const PrivateKey&) = delete;
  ~PrivateKey();

  // Unencrypted PKCS#8 PEM of the private key. Secret.
  absl::StatusOr<std::string> ToPem() const;

  // DER SubjectPublicKeyInfo of the public half.
  const std::string& spki_der() const { return spki_der_; }

  // SHA-256 of spki_der(): 32 raw bytes, the key's public identity.
  std::string SpkiFingerprint() const;

  // The OpenSSL key, borrowed (for code inside security/).
  EVP_PKEY* pkey() const { return pkey_; }

 private:
  PrivateKey(EVP_PKEY* pkey, std::string spki_der) : pkey_(pkey), spki_der_(std::move(spki_der)) {}
  // Takes ownership of `pkey` (which may be null: then reports `what`).
  static absl::StatusOr<PrivateKey> Adopt(EVP_PKEY* pkey, const std::string& what);

  EVP_PKEY* pkey_ = nullptr;
  std::string spki_der_;
};

// SHA-256 of the DER SubjectPublicKeyInfo of `key`: 32 raw bytes.
std::string SpkiFingerprint(const PrivateKey& key);

}  // namespace ringlm

#endif  // RINGLM_SECURITY_PRIVATE_KEY_H_
