// The wire format of one discovery announcement: a small, versioned,
// authenticated binary datagram that a node broadcasts every interval.
//
// Layout (all integers little-endian):
//   envelope, the same in every protocol version:
//     "RLMA"            4 bytes magic
//     version           u32
//     body_length       u16   bytes of body that follow
//     body              body_length bytes, version-specific
//   trailer of version 3:
//     mac               32 bytes  HMAC-SHA256, under the cluster's announcement
//                                 key, of every byte before it (envelope + body)
//   body of version 3:
//     node_id           u8 length + bytes   (1..64, [A-Za-z0-9._-])
//     instance_id       u64
//     grpc_port         u16                 (not 0)
//     model_fingerprint u8 length + bytes   (0..128)
//     total_memory      u64
//     usable_memory     u64
//     matmul_gflops     f64 bit pattern     (finite, >= 0)
//     read_gbps         f64 bit pattern     (finite, >= 0)
//     placement         u8                  (0 memory, 1 speed)
//     threads           u32
//     cpu_model         u8 length + bytes   (0..128, printable ASCII)
//     grpc_host         u8 length + bytes   (0..253, [A-Za-z0-9.:_-])
//     spki_fingerprint  u8 length + bytes   (0 or 32: SHA-256 of the node's TLS
//                                            SubjectPublicKeyInfo, DER)
//     timestamp_ms      u64                 Unix wall-clock ms when sent
//     nonce             16 bytes            random, fresh per datagram
//   (Version 2 had no read_gbps or placement. Version 1 had no
//   spki_fingerprint, timestamp_ms or nonce either, and a CRC-32 trailer
//   instead of the MAC. Both are recognised and dropped, never parsed.)
//
// Decoding order, and why: the envelope's size, magic and version are read
// first, because the trailer (and so what the MAC covers) depends on the
// version; a datagram of another version is dropped from the envelope alone.
// Then body_length must account for the datagram exactly, and then the MAC
// is checked (in constant time) BEFORE any body byte is parsed: untrusted
// bytes are parsed only once authenticated, and still bounds-checked
// throughout. A flipped bit in the magic, version or body_length therefore
// reads as bad magic, other version or bad length; anywhere else, as bad MAC.
//
// What the MAC proves: the sender holds the cluster key. It does not prove
// the datagram is fresh (see DiscoveryService: timestamp window and replay
// cache) nor that the sender owns the node id it claims (see PeerTable:
// fingerprint pinning, and the daemon's TLS health check before use).
#ifndef RINGLM_DISCOVERY_ANNOUNCEMENT_H_
#define RINGLM_DISCOVERY_ANNOUNCEMENT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "partition/capabilities.h"

namespace ringlm {

inline constexpr uint32_t kDiscoveryProtocolVersion = 3;
// Largest datagram we send or accept; stays below any sane path MTU.
inline constexpr size_t kMaxAnnouncementBytes = 1200;
inline constexpr size_t kMaxNodeIdBytes = 64;
inline constexpr size_t kMaxModelFingerprintBytes = 128;
inline constexpr size_t kMaxCpuModelBytes = 128;
inline constexpr size_t kMaxGrpcHostBytes = 253;
// spki_fingerprint is either empty (no TLS identity) or exactly this long.
inline constexpr size_t kSpkiFingerprintBytes = 32;
inline constexpr size_t kAnnouncementNonceBytes = 16;
inline constexpr size_t kAnnouncementMacBytes = 32;
// The MAC key the codec and DiscoveryOptions::mac_key expect.
inline constexpr size_t kAnnouncementMacKeyBytes = 32;
// HKDF info string of the announcement MAC key (docs/security.md).
inline constexpr std::string_view kAnnouncementMacKeyInfo = "ringlm/v1/announce-mac";

// One node's announcement. Plain data.
struct Announcement {
  std::string node_id;       // <= 64 bytes, [A-Za-z0-9._-]
  uint64_t instance_id = 0;  // random per process start: tells a restart and a duplicate id apart
  uint32_t protocol_version = kDiscoveryProtocolVersion;
  uint16_t grpc_port = 0;
  std::string model_fingerprint;  // <= 128 bytes
  DeviceCapabilities caps;
  std::string grpc_host;         // optional advertised host; empty = use the sender's address
  std::string spki_fingerprint;  // 0 or 32 raw bytes: SHA-256 of the TLS public key (SPKI DER)
  // Unix wall-clock milliseconds when sent. Set by the sender (the service
  // stamps its own announcements); receivers drop ones too far from theirs.
  uint64_t timestamp_ms = 0;
  // 16 random bytes after decoding; ignored on encoding (each encoding draws
  // a fresh one).
  std::string nonce;

  bool operator==(const Announcement&) const = default;
};

// Why a datagram was rejected; lets the receiver count rejections by kind
// without parsing status messages. The codec sets kTooShort..kBadField; the
// service assigns kStale, kReplayed and kReordered to datagrams that decoded.
enum class DecodeFailure {
  kNone,
  kTooShort,      // shorter than the envelope and MAC
  kTooLong,       // longer than kMaxAnnouncementBytes
  kBadMagic,      // not "RLMA"
  kBadLength,     // body_length disagrees with the datagram size, or a field's length is bad
  kBadMac,        // HMAC-SHA256 mismatch: corrupt, forged, or another cluster's key
  kOtherVersion,  // a protocol version other than kDiscoveryProtocolVersion
  kBadField,      // a field's content is invalid
  kStale,         // (service) timestamp further than max_clock_skew from our clock
  kReplayed,      // (service) nonce seen before, or too old to tell
  kReordered,     // (service) not newer than the last accepted one of its instance
};
std::string_view DecodeFailureName(DecodeFailure failure);

// True when `id` is 1..64 bytes of [A-Za-z0-9._-].
bool IsValidNodeId(std::string_view id);

// The announcement MAC key of a cluster: HKDF-SHA256(cluster_key,
// "ringlm/v1/announce-mac"), 32 bytes. Insecure mode passes the empty key, so
// the codec is the same and secure nodes drop insecure announcements.
std::string DeriveAnnouncementMacKey(std::string_view cluster_key);

// Checks that `a` can be encoded without loss and will decode: every field
// within its limits, grpc_port != 0, spki_fingerprint empty or 32 bytes,
// protocol_version == kDiscoveryProtocolVersion. `nonce` is not checked (the
// encoder replaces it). InvalidArgument naming the field otherwise.
absl::Status ValidateAnnouncement(const Announcement& a);

// Encodes `a` as one datagram of at most kMaxAnnouncementBytes, with a fresh
// random nonce, `a.timestamp_ms` as given, and the MAC under `mac_key`.
// Preconditions: ValidateAnnouncement(a).ok(); mac_key is
// kAnnouncementMacKeyBytes long (any length works, but only that one is
// accepted by DiscoveryService). `a.protocol_version` and `a.nonce` are
// ignored. Over-long strings are truncated to their limits so the output is
// always well-formed.
std::string EncodeAnnouncement(const Announcement& a, std::string_view mac_key);

// Decodes and authenticates one datagram under `mac_key`. InvalidArgument
// with a precise reason for a datagram that is too short, too long, has a bad
// magic, bad lengths, a bad MAC or a bad field; FailedPrecondition "protocol
// version N, expected 2" for another version. When `failure` is not null it
// receives the kind of failure (kNone on success). Does not judge freshness:
// timestamp_ms and nonce are returned for the caller to check.
absl::StatusOr<Announcement> DecodeAnnouncement(std::string_view datagram, std::string_view mac_key,
                                                DecodeFailure* failure = nullptr);

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_ANNOUNCEMENT_H_
