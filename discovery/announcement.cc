#include "discovery/announcement.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

constexpr std::string_view kMagic = "RLMA";
// magic + version + body_length.
constexpr size_t kHeaderBytes = 4 + 4 + 2;
constexpr size_t kTrailerBytes = kAnnouncementMacBytes;
constexpr size_t kEnvelopeBytes = kHeaderBytes + kTrailerBytes;

void PutU16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutString(std::string& out, std::string_view s, size_t max_bytes) {
  if (s.size() > max_bytes) s = s.substr(0, max_bytes);
  out.push_back(static_cast<char>(s.size()));
  out.append(s);
}

uint64_t LoadLe(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return v;
}

// Bounds-checked reader over the body; every read reports what it was reading.
class BodyReader {
 public:
  explicit BodyReader(std::string_view body) : rest_(body) {}

  absl::Status Int(const char* field, size_t bytes, uint64_t* out) {
    if (rest_.size() < bytes) return Truncated(field);
    *out = LoadLe(rest_.substr(0, bytes));
    rest_.remove_prefix(bytes);
    return absl::OkStatus();
  }
  absl::Status String(const char* field, size_t max_bytes, std::string* out) {
    if (rest_.empty()) return Truncated(field);
    size_t len = static_cast<unsigned char>(rest_[0]);
    rest_.remove_prefix(1);
    if (len > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad length: ", field, " is ", len, " bytes, at most ", max_bytes));
    }
    if (rest_.size() < len) return Truncated(field);
    out->assign(rest_.data(), len);
    rest_.remove_prefix(len);
    return absl::OkStatus();
  }
  absl::Status Bytes(const char* field, size_t bytes, std::string* out) {
    if (rest_.size() < bytes) return Truncated(field);
    out->assign(rest_.data(), bytes);
    rest_.remove_prefix(bytes);
    return absl::OkStatus();
  }
  size_t remaining() const { return rest_.size(); }

 private:
  static absl::Status Truncated(const char* field) {
    return absl::InvalidArgumentError(absl::StrCat("bad length: body ends inside ", field));
  }
  std::string_view rest_;
};

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == ':' || c == '_' || c == '-';
}
bool IsPrintable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Field checks shared by ValidateAnnouncement (before sending) and the decoder.
absl::Status CheckFields(const Announcement& a) {
  if (!IsValidNodeId(a.node_id)) {
    return absl::InvalidArgumentError(absl::StrCat("bad node id \"", absl::CHexEscape(a.node_id),
                                                   "\": want 1..", kMaxNodeIdBytes,
                                                   " bytes of [A-Za-z0-9._-]"));
  }
  if (a.grpc_port == 0) return absl::InvalidArgumentError("bad grpc_port 0");
  if (a.model_fingerprint.size() > kMaxModelFingerprintBytes) {
    return absl::InvalidArgumentError(absl::StrCat("model_fingerprint is ",
                                                   a.model_fingerprint.size(), " bytes, at most ",
                                                   kMaxModelFingerprintBytes));
  }
  if (a.caps.cpu_model.size() > kMaxCpuModelBytes || !IsPrintable(a.caps.cpu_model)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad cpu_model: want at most ", kMaxCpuModelBytes, " printable ASCII bytes"));
  }
  if (!std::isfinite(a.caps.matmul_gflops) || a.caps.matmul_gflops < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad matmul_gflops ", a.caps.matmul_gflops, ": want finite and >= 0"));
  }
  if (!std::isfinite(a.caps.read_gbps) || a.caps.read_gbps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad read_gbps ", a.caps.read_gbps, ": want finite and >= 0"));
  }
  if (a.caps.placement != Placement::kMemory && a.caps.placement != Placement::kSpeed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad placement ", static_cast<int>(a.caps.placement), ": want 0 (memory) or 1 (speed)"));
  }
  if (a.grpc_host.size() > kMaxGrpcHostBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("grpc_host is ", a.grpc_host.size(), " bytes, at most ", kMaxGrpcHostBytes));
  }
  for (char c : a.grpc_host) {
    if (!IsHostChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad grpc_host \"", absl::CHexEscape(a.grpc_host), "\": want [A-Za-z0-9.:_-]"));
    }
  }
  if (!a.spki_fingerprint.empty() && a.spki_fingerprint.size() != kSpkiFingerprintBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad spki_fingerprint: ", a.spki_fingerprint.size(), " bytes, want 0 or ",
                     kSpkiFingerprintBytes));
  }
  return absl::OkStatus();
}

// Parses the version-3 body into `a`; checks lengths only, not field content.
// Runs only on authenticated bytes, and still bounds-checks every read.
absl::Status ParseBodyV3(std::string_view body, Announcement* a) {
  BodyReader r(body);
  uint64_t port = 0, threads = 0, gflops_bits = 0, read_bits = 0, placement = 0;
  // A braced list evaluates left to right, in wire order. Reads after a failed
  // one stay bounds-checked and harmless; the first error is the one returned.
  for (absl::Status s :
       {r.String("node_id", kMaxNodeIdBytes, &a->node_id), r.Int("instance_id", 8, &a->instance_id),
        r.Int("grpc_port", 2, &port),
        r.String("model_fingerprint", kMaxModelFingerprintBytes, &a->model_fingerprint),
        r.Int("total_memory", 8, &a->caps.total_memory_bytes),
        r.Int("usable_memory", 8, &a->caps.usable_memory_bytes),
        r.Int("matmul_gflops", 8, &gflops_bits), r.Int("read_gbps", 8, &read_bits),
        r.Int("placement", 1, &placement), r.Int("threads", 4, &threads),
        r.String("cpu_model", kMaxCpuModelBytes, &a->caps.cpu_model),
        r.String("grpc_host", kMaxGrpcHostBytes, &a->grpc_host),
        r.String("spki_fingerprint", kSpkiFingerprintBytes, &a->spki_fingerprint),
        r.Int("timestamp_ms", 8, &a->timestamp_ms),
        r.Bytes("nonce", kAnnouncementNonceBytes, &a->nonce)}) {
    if (!s.ok()) return s;
  }
  if (r.remaining() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad length: ", r.remaining(), " trailing bytes after nonce"));
  }
  a->grpc_port = static_cast<uint16_t>(port);
  a->caps.threads = static_cast<uint32_t>(threads);
  a->caps.matmul_gflops = std::bit_cast<double>(gflops_bits);
  a->caps.read_gbps = std::bit_cast<double>(read_bits);
  a->caps.placement = static_cast<Placement>(placement);
  return absl::OkStatus();
}

absl::Status Fail(DecodeFailure kind, DecodeFailure* failure, absl::Status status) {
  if (failure != nullptr) *failure = kind;
  return status;
}

}  // namespace

std::string_view DecodeFailureName(DecodeFailure failure) {
  switch (failure) {
    case DecodeFailure::kNone:
      return "none";
    case DecodeFailure::kTooShort:
      return "too short";
    case DecodeFailure::kTooLong:
      return "too long";
    case DecodeFailure::kBadMagic:
      return "bad magic";
    case DecodeFailure::kBadLength:
      return "bad length";
    case DecodeFailure::kBadMac:
      return "bad MAC";
    case DecodeFailure::kOtherVersion:
      return "other protocol version";
    case DecodeFailure::kBadField:
      return "bad field";
    case DecodeFailure::kStale:
      return "stale";
    case DecodeFailure::kReplayed:
      return "replayed";
    case DecodeFailure::kReordered:
      return "reordered";
  }
  return "unknown";
}

std::string DeriveAnnouncementMacKey(std::string_view cluster_key) {
  return HkdfSha256(cluster_key, kAnnouncementMacKeyInfo, kAnnouncementMacKeyBytes);
}

bool IsValidNodeId(std::string_view id) {
  if (id.empty() || id.size() > kMaxNodeIdBytes) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::Status ValidateAnnouncement(const Announcement& a) {
  if (a.protocol_version != kDiscoveryProtocolVersion) {
    return absl::InvalidArgumentError(absl::StrCat("protocol_version ", a.protocol_version,
                                                   ", expected ", kDiscoveryProtocolVersion));
  }
  return CheckFields(a);
}

std::string EncodeAnnouncement(const Announcement& a, std::string_view mac_key) {
  std::string body;
  body.reserve(256);
  PutString(body, a.node_id, kMaxNodeIdBytes);
  PutU64(body, a.instance_id);
  PutU16(body, a.grpc_port);
  PutString(body, a.model_fingerprint, kMaxModelFingerprintBytes);
  PutU64(body, a.caps.total_memory_bytes);
  PutU64(body, a.caps.usable_memory_bytes);
  PutU64(body, std::bit_cast<uint64_t>(a.caps.matmul_gflops));
  PutU64(body, std::bit_cast<uint64_t>(a.caps.read_gbps));
  body.push_back(static_cast<char>(a.caps.placement));
  PutU32(body, a.caps.threads);
  PutString(body, a.caps.cpu_model, kMaxCpuModelBytes);
  PutString(body, a.grpc_host, kMaxGrpcHostBytes);
  PutString(body, a.spki_fingerprint, kSpkiFingerprintBytes);
  PutU64(body, a.timestamp_ms);
  body.append(RandomBytes(kAnnouncementNonceBytes));

  // The truncating limits above bound the body to
  // 65+8+2+129+8+8+8+8+1+4+129+254+33+8+16 = 681 bytes, well below
  // kMaxAnnouncementBytes - kEnvelopeBytes.
  std::string out;
  out.reserve(kEnvelopeBytes + body.size());
  out.append(kMagic);
  PutU32(out, kDiscoveryProtocolVersion);
  PutU16(out, static_cast<uint16_t>(body.size()));
  out.append(body);
  out.append(HmacSha256(mac_key, out));
  return out;
}

absl::StatusOr<Announcement> DecodeAnnouncement(std::string_view datagram, std::string_view mac_key,
                                                DecodeFailure* failure) {
  if (failure != nullptr) *failure = DecodeFailure::kNone;
  // Envelope (unauthenticated; only its fixed-size header fields are read).
  if (datagram.size() < kEnvelopeBytes) {
    return Fail(DecodeFailure::kTooShort, failure,
                absl::InvalidArgumentError(absl::StrCat("too short: ", datagram.size(),
                                                        " bytes, at least ", kEnvelopeBytes)));
  }
  if (datagram.size() > kMaxAnnouncementBytes) {
    return Fail(DecodeFailure::kTooLong, failure,
                absl::InvalidArgumentError(absl::StrCat(
                    "too long: ", datagram.size(), " bytes, at most ", kMaxAnnouncementBytes)));
  }
  if (datagram.substr(0, 4) != kMagic) {
    return Fail(DecodeFailure::kBadMagic, failure,
                absl::InvalidArgumentError(absl::StrCat(
                    "bad magic \"", absl::CHexEscape(std::string(datagram.substr(0, 4))),
                    "\", want \"RLMA\"")));
  }
  // Another version has another trailer, so its MAC cannot be checked here;
  // it is dropped without looking at its body.
  const uint32_t version = static_cast<uint32_t>(LoadLe(datagram.substr(4, 4)));
  if (version != kDiscoveryProtocolVersion) {
    return Fail(DecodeFailure::kOtherVersion, failure,
                absl::FailedPreconditionError(absl::StrCat(
                    "protocol version ", version, ", expected ", kDiscoveryProtocolVersion)));
  }
  const size_t body_length = LoadLe(datagram.substr(8, 2));
  if (kHeaderBytes + body_length + kTrailerBytes != datagram.size()) {
    return Fail(DecodeFailure::kBadLength, failure,
                absl::InvalidArgumentError(absl::StrCat("bad length: body_length ", body_length,
                                                        " does not fit a datagram of ",
                                                        datagram.size(), " bytes")));
  }

  // Authenticate before parsing anything else.
  const std::string_view covered = datagram.substr(0, datagram.size() - kTrailerBytes);
  const std::string_view mac = datagram.substr(covered.size());
  if (!ConstantTimeEquals(mac, HmacSha256(mac_key, covered))) {
    return Fail(
        DecodeFailure::kBadMac, failure,
        absl::InvalidArgumentError("bad MAC: corrupt, forged, or sent with another cluster key"));
  }

  Announcement a;
  a.protocol_version = version;
  if (absl::Status s = ParseBodyV3(datagram.substr(kHeaderBytes, body_length), &a); !s.ok()) {
    return Fail(DecodeFailure::kBadLength, failure, s);
  }
  if (absl::Status fields = CheckFields(a); !fields.ok()) {
    return Fail(DecodeFailure::kBadField, failure, fields);
  }
  return a;
}

}  // namespace ringlm
