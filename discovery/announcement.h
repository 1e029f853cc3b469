// The wire format of one discovery announcement: a small, versioned,
// checksummed binary datagram that a node broadcasts every interval.
//
// Layout (all integers little-endian):
//   envelope, the same in every protocol version:
//     "RLMA"            4 bytes magic
//     version           u32
//     body_length       u16   bytes of body that follow
//     body              body_length bytes, version-specific
//     crc32             u32   IEEE CRC-32 of every byte before it
//   body of version 1:
//     node_id           u8 length + bytes   (1..64, [A-Za-z0-9._-])
//     instance_id       u64
//     grpc_port         u16                 (not 0)
//     model_fingerprint u8 length + bytes   (0..128)
//     total_memory      u64
//     usable_memory     u64
//     matmul_gflops     f64 bit pattern     (finite, >= 0)
//     threads           u32
//     cpu_model         u8 length + bytes   (0..128, printable ASCII)
//     grpc_host         u8 length + bytes   (0..253, [A-Za-z0-9.:_-])
//
// The checksum covers the envelope, so a flipped version byte reads as a
// checksum error rather than as a bogus "other version". A datagram of another
// version is recognised from the envelope alone and is never parsed further.
//
// Datagrams come from the network and are untrusted: the decoder checks every
// length and field before use and never reads past the input.
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

inline constexpr uint32_t kDiscoveryProtocolVersion = 1;
// Largest datagram we send or accept; stays below any sane path MTU.
inline constexpr size_t kMaxAnnouncementBytes = 1200;
inline constexpr size_t kMaxNodeIdBytes = 64;
inline constexpr size_t kMaxModelFingerprintBytes = 128;
inline constexpr size_t kMaxCpuModelBytes = 128;
inline constexpr size_t kMaxGrpcHostBytes = 253;

// One node's announcement. Plain data.
struct Announcement {
  std::string node_id;       // <= 64 bytes, [A-Za-z0-9._-]
  uint64_t instance_id = 0;  // random per process start: tells a restart and a duplicate id apart
  uint32_t protocol_version = kDiscoveryProtocolVersion;
  uint16_t grpc_port = 0;
  std::string model_fingerprint;  // <= 128 bytes
  DeviceCapabilities caps;
  std::string grpc_host;  // optional advertised host; empty = use the sender's address

  bool operator==(const Announcement&) const = default;
};

// Why a datagram was rejected; lets the receiver count rejections by kind
// without parsing status messages.
enum class DecodeFailure {
  kNone,
  kTooShort,      // shorter than the envelope
  kTooLong,       // longer than kMaxAnnouncementBytes
  kBadMagic,      // not "RLMA"
  kBadLength,     // body_length disagrees with the datagram size
  kBadChecksum,   // CRC-32 mismatch
  kOtherVersion,  // a protocol version other than kDiscoveryProtocolVersion
  kBadField,      // a field's length or content is invalid
};
std::string_view DecodeFailureName(DecodeFailure failure);

// True when `id` is 1..64 bytes of [A-Za-z0-9._-].
bool IsValidNodeId(std::string_view id);

// Checks that `a` can be encoded without loss and will decode: every field
// within its limits, grpc_port != 0, protocol_version == 1. InvalidArgument
// naming the field otherwise.
absl::Status ValidateAnnouncement(const Announcement& a);

// Encodes `a` as one datagram of at most kMaxAnnouncementBytes.
// Precondition: ValidateAnnouncement(a).ok(); `a.protocol_version` is ignored
// (always writes kDiscoveryProtocolVersion). Over-long strings are truncated
// to their limits so the output is always well-formed.
std::string EncodeAnnouncement(const Announcement& a);

// Decodes one datagram. InvalidArgument with a precise reason for a datagram
// that is too short, too long, has a bad magic, bad lengths, a bad checksum or
// a bad field; FailedPrecondition "protocol version N, expected 1" for another
// version. When `failure` is not null it receives the kind of failure
// (kNone on success).
absl::StatusOr<Announcement> DecodeAnnouncement(std::string_view datagram,
                                                DecodeFailure* failure = nullptr);

// IEEE 802.3 CRC-32 (the zlib one); exposed for tests.
uint32_t Crc32(std::string_view data);

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_ANNOUNCEMENT_H_
