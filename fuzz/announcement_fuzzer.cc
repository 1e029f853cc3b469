// libFuzzer target: the discovery announcement codec (discovery/announcement.h).
//
// Checks, for every input, three readings of the same bytes:
//  1. As a received datagram, under the fixed key kMacKey: DecodeAnnouncement
//     never crashes; a rejection reports a codec failure kind and the
//     documented code (FailedPrecondition for another version, else
//     InvalidArgument); whatever it accepts validates and re-encodes to the same bytes (except the
//     nonce and MAC, which the encoder draws afresh).
//  2. As a body to sign: the harness wraps the body (the input's body if it
//     looks like a datagram, else the whole input) in a correct envelope and
//     MAC, so the fuzzer reaches ParseBodyV3 and the field checks, which only
//     run on authenticated bytes. Such a datagram may fail only as too long,
//     bad length or bad field; one that decodes re-encodes to itself (the
//     encoding is canonical). Then one byte, chosen by a hash of the input, is
//     flipped: the result must be rejected, as bad magic, other version or bad
//     length when the byte is in the envelope header, else as bad MAC.
//  3. As fields: an Announcement built from the bytes (FuzzedDataProvider).
//     ValidateAnnouncement(a) passes exactly when DecodeAnnouncement(
//     EncodeAnnouncement(a)) gives back `a` (nonce aside, which decoding
//     fills with 16 fresh bytes); an invalid `a` still encodes to a
//     well-formed datagram, which decodes or fails only as bad field.
#include <fuzzer/FuzzedDataProvider.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "discovery/announcement.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_constants.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

constexpr size_t kHeaderBytes = 4 + 4 + 2;  // magic, version, body_length
constexpr size_t kMacBytes = kAnnouncementMacBytes;

using fuzz::kMacKey;

uint64_t Fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// A version-2 envelope around `body`, with the MAC under kMacKey. (A body
// over 64 KiB would wrap body_length, but such a datagram is too long anyway.)
std::string Sign(std::string_view body) {
  std::string out("RLMA");
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>((kDiscoveryProtocolVersion >> (8 * i)) & 0xff));
  }
  out.push_back(static_cast<char>(body.size() & 0xff));
  out.push_back(static_cast<char>((body.size() >> 8) & 0xff));
  out.append(body);
  out.append(HmacSha256(kMacKey, out));
  return out;
}

// `a` and `b` agree on every field but the nonce.
bool SameButNonce(Announcement a, const Announcement& b) {
  a.nonce = b.nonce;
  return a == b;
}

// What any successfully decoded announcement must satisfy.
void CheckDecoded(const Announcement& a, DecodeFailure failure) {
  FUZZ_CHECK(failure == DecodeFailure::kNone);
  FUZZ_CHECK(ValidateAnnouncement(a).ok());
  FUZZ_CHECK(a.protocol_version == kDiscoveryProtocolVersion);
  FUZZ_CHECK(a.nonce.size() == kAnnouncementNonceBytes);
}

// `datagram` decoded to `a`: encoding `a` again gives the same bytes but the
// nonce and MAC, and that encoding decodes to `a` but the nonce.
void CheckCanonical(std::string_view datagram, const Announcement& a) {
  const std::string again = EncodeAnnouncement(a, kMacKey);
  FUZZ_CHECK(again.size() == datagram.size());
  const size_t fixed = datagram.size() - kMacBytes - kAnnouncementNonceBytes;
  FUZZ_CHECK(again.compare(0, fixed, datagram.substr(0, fixed)) == 0);
  DecodeFailure failure = DecodeFailure::kBadField;
  absl::StatusOr<Announcement> b = DecodeAnnouncement(again, kMacKey, &failure);
  FUZZ_CHECK(b.ok());
  CheckDecoded(*b, failure);
  FUZZ_CHECK(SameButNonce(a, *b));
}

// A rejection names its kind, one the codec sets, with the documented code:
// FailedPrecondition for another version, InvalidArgument for the rest.
void CheckRejected(const absl::Status& status, DecodeFailure failure) {
  FUZZ_CHECK(!status.ok());
  FUZZ_CHECK(failure != DecodeFailure::kNone && failure != DecodeFailure::kStale &&
             failure != DecodeFailure::kReplayed && failure != DecodeFailure::kReordered);
  FUZZ_CHECK(status.code() == (failure == DecodeFailure::kOtherVersion
                                   ? absl::StatusCode::kFailedPrecondition
                                   : absl::StatusCode::kInvalidArgument));
}

// Reading 1: the input as received.
void FuzzReceived(std::string_view datagram) {
  DecodeFailure failure = DecodeFailure::kNone;
  absl::StatusOr<Announcement> a = DecodeAnnouncement(datagram, kMacKey, &failure);
  if (!a.ok()) {
    CheckRejected(a.status(), failure);
    return;
  }
  CheckDecoded(*a, failure);
  CheckCanonical(datagram, *a);
}

// Reading 2: the input's body, signed by the harness, then one byte flipped.
void FuzzSignedBody(std::string_view input) {
  std::string_view body = input;
  if (input.size() >= kHeaderBytes + kMacBytes && input.substr(0, 4) == "RLMA") {
    body = input.substr(kHeaderBytes, input.size() - kHeaderBytes - kMacBytes);
  }
  const std::string datagram = Sign(body);
  DecodeFailure failure = DecodeFailure::kNone;
  absl::StatusOr<Announcement> a = DecodeAnnouncement(datagram, kMacKey, &failure);
  if (a.ok()) {
    CheckDecoded(*a, failure);
    CheckCanonical(datagram, *a);
  } else if (datagram.size() > kMaxAnnouncementBytes) {
    CheckRejected(a.status(), failure);
    FUZZ_CHECK(failure == DecodeFailure::kTooLong);
  } else {
    // Correctly framed and signed: only the body itself can be wrong.
    CheckRejected(a.status(), failure);
    FUZZ_CHECK(failure == DecodeFailure::kBadLength || failure == DecodeFailure::kBadField);
  }

  // Flip one byte. Which one, and how, follows from the input, so a crash
  // reproduces from its input alone.
  const uint64_t h = Fnv1a(input);
  const size_t pos = h % datagram.size();
  const char mask = static_cast<char>(1 + (h >> 32) % 255);
  std::string flipped = datagram;
  flipped[pos] = static_cast<char>(flipped[pos] ^ mask);
  DecodeFailure flipped_failure = DecodeFailure::kNone;
  absl::StatusOr<Announcement> b = DecodeAnnouncement(flipped, kMacKey, &flipped_failure);
  CheckRejected(b.status(), flipped_failure);
  if (flipped.size() > kMaxAnnouncementBytes) {
    FUZZ_CHECK(flipped_failure == DecodeFailure::kTooLong);
  } else if (pos < 4) {
    FUZZ_CHECK(flipped_failure == DecodeFailure::kBadMagic);
  } else if (pos < 8) {
    FUZZ_CHECK(flipped_failure == DecodeFailure::kOtherVersion);
  } else if (pos < kHeaderBytes) {
    FUZZ_CHECK(flipped_failure == DecodeFailure::kBadLength);
  } else {
    FUZZ_CHECK(flipped_failure == DecodeFailure::kBadMac);
  }
}

// Reading 3: the input split into an Announcement's fields.
void FuzzFields(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Announcement a;
  a.node_id = in.ConsumeRandomLengthString(80);
  a.instance_id = in.ConsumeIntegral<uint64_t>();
  a.protocol_version =
      in.ConsumeBool() ? kDiscoveryProtocolVersion : in.ConsumeIntegral<uint32_t>();
  a.grpc_port = in.ConsumeIntegral<uint16_t>();
  a.model_fingerprint = in.ConsumeRandomLengthString(160);
  a.caps.total_memory_bytes = in.ConsumeIntegral<uint64_t>();
  a.caps.usable_memory_bytes = in.ConsumeIntegral<uint64_t>();
  // Any bit pattern: NaN, infinities, negative zero, subnormals.
  a.caps.matmul_gflops = std::bit_cast<double>(in.ConsumeIntegral<uint64_t>());
  a.caps.read_gbps = std::bit_cast<double>(in.ConsumeIntegral<uint64_t>());
  a.caps.placement = static_cast<Placement>(in.ConsumeIntegral<uint8_t>());
  a.caps.threads = in.ConsumeIntegral<uint32_t>();
  a.caps.cpu_model = in.ConsumeRandomLengthString(160);
  a.grpc_host = in.ConsumeRandomLengthString(280);
  a.spki_fingerprint = in.ConsumeRandomLengthString(40);
  a.timestamp_ms = in.ConsumeIntegral<uint64_t>();
  a.nonce = in.ConsumeRandomLengthString(20);  // ignored by the encoder

  const bool valid = ValidateAnnouncement(a).ok();
  const std::string datagram = EncodeAnnouncement(a, kMacKey);
  FUZZ_CHECK(datagram.size() <= kMaxAnnouncementBytes);
  DecodeFailure failure = DecodeFailure::kNone;
  absl::StatusOr<Announcement> b = DecodeAnnouncement(datagram, kMacKey, &failure);
  if (b.ok()) {
    CheckDecoded(*b, failure);
    FUZZ_CHECK(SameButNonce(a, *b) == valid);
  } else {
    FUZZ_CHECK(!valid);
    FUZZ_CHECK(failure == DecodeFailure::kBadField);
  }
}

}  // namespace
}  // namespace ringlm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  ringlm::FuzzReceived(input);
  ringlm::FuzzSignedBody(input);
  ringlm::FuzzFields(data, size);
  return 0;
}
