// The cluster key: the one shared secret of a ringlm cluster. Every node and
// client that holds it derives the same cluster CA (so it can issue itself
// certificates the others accept), the same announcement MAC key and the same
// public cluster id. See docs/security.md.
#ifndef RINGLM_SECURITY_CLUSTER_KEY_H_
#define RINGLM_SECURITY_CLUSTER_KEY_H_

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringlm {

// 32 secret bytes, and the keys derived from them with HKDF-SHA256.
//
// File format: one line `ringlm-cluster-key-v1:<64 lowercase hex>\n`, in a
// file of mode 0600 (a file readable by group or others is refused).
//
// Ownership: the object owns the secret and wipes it on destruction. It is
// move-only so that the secret is not duplicated by accident; Clone() makes
// an explicit copy. A moved-from key is all zeros (valid but useless).
// Thread-safety: const methods are safe to call concurrently.
// No method logs the secret or puts it into a Status message.
class ClusterKey {
 public:
  static constexpr size_t kBytes = 32;
  static constexpr std::string_view kFilePrefix = "ringlm-cluster-key-v1:";

  // A fresh key from OpenSSL's CSPRNG.
  static absl::StatusOr<ClusterKey> Generate();

  // Parses the file format. Trailing whitespace (the newline) is allowed;
  // hex digits may be upper or lower case. InvalidArgument otherwise, with a
  // message that says what is wrong but does not echo the text.
  static absl::StatusOr<ClusterKey> Parse(std::string_view text);

  // Reads and parses the key file at `path`. Errors name the path:
  // NotFound, PermissionDenied (unreadable), FailedPrecondition (mode has
  // group/other bits; the message says `chmod 600 PATH`), InvalidArgument
  // (bad contents).
  static absl::StatusOr<ClusterKey> LoadFile(const std::string& path);

  // A key made of exactly these 32 bytes (tests, tools). InvalidArgument on
  // another length.
  static absl::StatusOr<ClusterKey> FromBytes(std::string_view bytes);

  ClusterKey(ClusterKey&& other) noexcept;
  ClusterKey& operator=(ClusterKey&& other) noexcept;
  ClusterKey(const ClusterKey&) = delete;
  ClusterKey& operator=(const ClusterKey&) = delete;
  ~ClusterKey();

  // An explicit copy of the secret.
  ClusterKey Clone() const;

  // Writes Serialize() to `path` with mode 0600 and fsyncs. With !overwrite
  // an existing file gives AlreadyExists and is left alone; with overwrite it
  // is replaced atomically. A missing directory gives NotFound.
  absl::Status WriteFile(const std::string& path, bool overwrite) const;

  // The file format, newline included. Contains the secret: handle with care.
  std::string Serialize() const;

  // HMAC-SHA256 key for discovery announcements (32 bytes, HKDF info
  // `ringlm/v1/announce-mac`).
  std::string AnnounceMacKey() const;

  // The announcement MAC key of insecure mode: derived from the empty key, so
  // that secure nodes drop insecure announcements.
  static std::string InsecureAnnounceMacKey();

  // A public label of the cluster: 16 lowercase hex digits (8 bytes, HKDF
  // info `ringlm/v1/cluster-id`). Safe to log and announce.
  std::string ClusterId() const;

  // The raw Ed25519 private key (32 bytes, HKDF info `ringlm/v1/ca-ed25519`)
  // of the cluster CA. Secret. See certificates.h for the CA itself.
  std::string CaPrivateKeySeed() const;

 private:
  ClusterKey() = default;
  std::string_view bytes() const;

  std::array<unsigned char, kBytes> secret_{};
};

// The cluster key file a command was given: `flag_value` when not empty,
// else $RINGLM_CLUSTER_KEY_FILE, else "".
std::string ClusterKeyFile(const std::string& flag_value);

}  // namespace ringlm

#endif  // RINGLM_SECURITY_CLUSTER_KEY_H_
