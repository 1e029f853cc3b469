// A node's long-lived Ed25519 key in its state dir (certificates.h).
#include <openssl/crypto.h>

#include "absl/strings/str_cat.h"
#include "security/certificates.h"
#include "security/internal/secret_file.h"

namespace ringlm {
namespace {

constexpr std::string_view kNodeKeyFile = "node_key.pem";
constexpr size_t kMaxNodeKeyBytes = 16 * 1024;

absl::StatusOr<PrivateKey> ReadNodeKey(const std::string& path) {
  absl::StatusOr<std::string> pem =
      security_internal::ReadSecretFile(path, "node key file", kMaxNodeKeyBytes);
  if (!pem.ok()) return pem.status();
  absl::StatusOr<PrivateKey> key = PrivateKey::FromPem(*pem);
  OPENSSL_cleanse(pem->data(), pem->size());
  if (!key.ok()) {
    return absl::DataLossError(absl::StrCat("node key file ", path,
                                            " is corrupt (not an Ed25519 PEM private key); "
                                            "move it away to make this node a new identity"));
  }
  return key;
}

}  // namespace

absl::StatusOr<PrivateKey> LoadOrCreateNodeKey(const std::string& state_dir) {
  if (absl::Status s = security_internal::MakePrivateDirs(state_dir); !s.ok()) return s;
  const std::string path = absl::StrCat(state_dir, "/", std::string(kNodeKeyFile));
  absl::StatusOr<PrivateKey> existing = ReadNodeKey(path);
  if (existing.ok() || !absl::IsNotFound(existing.status())) return existing;

  absl::StatusOr<PrivateKey> fresh = PrivateKey::Generate();
  if (!fresh.ok()) return fresh.status();
  absl::StatusOr<std::string> pem = fresh->ToPem();
  if (!pem.ok()) return pem.status();
  absl::Status written = security_internal::WriteSecretFile(path, *pem, /*overwrite=*/false);
  OPENSSL_cleanse(pem->data(), pem->size());
  // Another process created it first: use that one, so all agree.
  if (absl::IsAlreadyExists(written)) return ReadNodeKey(path);
  if (!written.ok()) return written;
  return fresh;
}

}  // namespace ringlm
