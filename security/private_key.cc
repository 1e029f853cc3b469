#include "security/private_key.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "security/crypto.h"
#include "security/internal/openssl_util.h"

namespace ringlm {

using security_internal::BioPtr;
using security_internal::OpenSslError;
using security_internal::PkeyCtxPtr;

namespace {
constexpr size_t kEd25519SeedBytes = 32;
}  // namespace

absl::StatusOr<PrivateKey> PrivateKey::Adopt(EVP_PKEY* pkey, const std::string& what) {
  if (pkey == nullptr) return OpenSslError(absl::StatusCode::kInternal, what);
  security_internal::PkeyPtr owned(pkey);
  if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not an Ed25519 key"));
  }
  absl::StatusOr<std::string> spki = security_internal::SpkiDer(pkey);
  if (!spki.ok()) return spki.status();
  return PrivateKey(owned.release(), *std::move(spki));
}

absl::StatusOr<PrivateKey> PrivateKey::Generate() {
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
  EVP_PKEY* pkey = nullptr;
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) <= 0 ||
      EVP_PKEY_keygen(ctx.get(), &pkey) <= 0) {
    return OpenSslError(absl::StatusCode::kInternal, "Ed25519 key generation");
  }
  return Adopt(pkey, "Ed25519 key generation");
}

absl::StatusOr<PrivateKey> PrivateKey::FromEd25519Seed(std::string_view seed) {
  if (seed.size() != kEd25519SeedBytes) {
    return absl::InvalidArgumentError(absl::StrCat("an Ed25519 private key has ", kEd25519SeedBytes,
                                                   " bytes, not ", seed.size()));
  }
  return Adopt(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr,
                                            reinterpret_cast<const unsigned char*>(seed.data()),
                                            seed.size()),
               "EVP_PKEY_new_raw_private_key");
}

absl::StatusOr<PrivateKey> PrivateKey::FromPem(std::string_view pem) {
  BioPtr bio = security_internal::MemoryBio(pem);
  if (bio == nullptr) return OpenSslError(absl::StatusCode::kInternal, "BIO_new_mem_buf");
  EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (pkey == nullptr) {
    return OpenSslError(absl::StatusCode::kInvalidArgument, "not a PEM private key");
  }
  return Adopt(pkey, "PEM private key");
}

PrivateKey::PrivateKey(PrivateKey&& other) noexcept
    : pkey_(std::exchange(other.pkey_, nullptr)), spki_der_(std::move(other.spki_der_)) {}

PrivateKey& PrivateKey::operator=(PrivateKey&& other) noexcept {
  if (this != &other) {
    EVP_PKEY_free(pkey_);
    pkey_ = std::exchange(other.pkey_, nullptr);
    spki_der_ = std::move(other.spki_der_);
  }
  return *this;
}

PrivateKey::~PrivateKey() { EVP_PKEY_free(pkey_); }

absl::StatusOr<std::string> PrivateKey::ToPem() const {
  BioPtr bio(BIO_new(BIO_s_secmem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), pkey_, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError(absl::StatusCode::kInternal, "PEM_write_bio_PrivateKey");
  }
  return security_internal::BioContents(bio.get());
}

std::string PrivateKey::SpkiFingerprint() const { return Sha256(spki_der_); }

std::string SpkiFingerprint(const PrivateKey& key) { return key.SpkiFingerprint(); }

}  // namespace ringlm
