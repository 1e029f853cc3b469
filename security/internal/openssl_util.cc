#include "security/internal/openssl_util.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include "absl/strings/str_cat.h"

namespace ringlm::security_internal {

absl::Status OpenSslError(absl::StatusCode code, const std::string& what) {
  std::string detail;
  while (unsigned long err = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(err, buf, sizeof(buf));
    absl::StrAppend(&detail, detail.empty() ? "" : "; ", buf);
  }
  if (detail.empty()) return absl::Status(code, what);
  return absl::Status(code, absl::StrCat(what, ": ", detail));
}

BioPtr MemoryBio(std::string_view data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

std::string BioContents(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string(data, static_cast<size_t>(len)) : std::string();
}

absl::StatusOr<X509Ptr> ParseCertificate(std::string_view pem) {
  BioPtr bio = MemoryBio(pem);
  if (bio == nullptr) return OpenSslError(absl::StatusCode::kInternal, "BIO_new_mem_buf");
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return OpenSslError(absl::StatusCode::kInvalidArgument, "not a PEM X.509 certificate");
  }
  return cert;
}

absl::StatusOr<std::string> SpkiDer(const EVP_PKEY* key) {
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(key, &der);
  if (len <= 0) return OpenSslError(absl::StatusCode::kInternal, "i2d_PUBKEY");
  std::string out(reinterpret_cast<const char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

}  // namespace ringlm::security_internal
