#include "discovery/announcement.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

constexpr size_t kHeader = 10;              // magic 4 + version 4 + length 2
constexpr size_t kEnvelope = kHeader + 32;  // + HMAC-SHA256 trailer
constexpr size_t kNonceFromEnd = 32 + 16;   // the nonce ends the body, before the MAC
constexpr size_t kTimestampFromEnd = 32 + 16 + 8;

const std::string& Key() {
  static const std::string* const key = new std::string(DeriveAnnouncementMacKey("cluster key A"));
  return *key;
}

Announcement Sample() {
  Announcement a;
  a.node_id = "node-0a1b2c3d4e5f";
  a.instance_id = 0x0123456789abcdefull;
  a.grpc_port = 50051;
  a.model_fingerprint = "llama-3.2-1b-q8_0:sha256:deadbeef";
  a.caps.total_memory_bytes = 16ull << 30;
  a.caps.usable_memory_bytes = 11ull << 30;
  a.caps.matmul_gflops = 42.5;
  a.caps.read_gbps = 17.25;
  a.caps.placement = Placement::kSpeed;
  a.caps.cpu_model = "Intel(R) Core(TM) i5-8250U CPU @ 1.60GHz";
  a.caps.threads = 4;
  a.grpc_host = "10.0.0.7";
  a.spki_fingerprint = Sha256("a node's public key");
  a.timestamp_ms = 1735689600123ull;
  return a;
}

// Recomputes the MAC trailer under `key` after a test edits a frame, so the
// edit reaches the body checks (as a key holder could send it).
void Reseal(std::string& frame, std::string_view key = Key()) {
  frame.resize(frame.size() - 32);
  frame += HmacSha256(key, frame);
}

DecodeFailure FailureOf(std::string_view datagram, std::string_view key = Key()) {
  DecodeFailure f = DecodeFailure::kNone;
  (void)DecodeAnnouncement(datagram, key, &f);
  return f;
}

// `a` as it decodes from `wire`: the nonce is the encoder's.
Announcement WithNonceOf(Announcement a, const std::string& wire) {
  a.nonce = wire.substr(wire.size() - kNonceFromEnd, 16);
  return a;
}

// A genuine version-1 datagram of `a`, as ringlm spoke it before this change:
// no identity, timestamp or nonce, and a CRC-32 trailer.
std::string EncodeVersion1(const Announcement& a) {
  auto put = [](std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  auto put_string = [](std::string& out, std::string_view s) {
    out.push_back(static_cast<char>(s.size()));
    out.append(s);
  };
  std::string body;
  put_string(body, a.node_id);
  put(body, a.instance_id, 8);
  put(body, a.grpc_port, 2);
  put_string(body, a.model_fingerprint);
  put(body, a.caps.total_memory_bytes, 8);
  put(body, a.caps.usable_memory_bytes, 8);
  put(body, std::bit_cast<uint64_t>(a.caps.matmul_gflops), 8);
  put(body, a.caps.threads, 4);
  put_string(body, a.caps.cpu_model);
  put_string(body, a.grpc_host);
  std::string out = "RLMA";
  put(out, 1, 4);
  put(out, body.size(), 2);
  out += body;
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : out) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  put(out, c ^ 0xFFFFFFFFu, 4);
  return out;
}

TEST(AnnouncementTest, RoundTripAllFields) {
  const Announcement a = Sample();
  ASSERT_TRUE(ValidateAnnouncement(a).ok());
  const std::string wire = EncodeAnnouncement(a, Key());
  EXPECT_EQ(wire.substr(0, 4), "RLMA");
  EXPECT_EQ(wire[4], 3);  // protocol version 3
  DecodeFailure f = DecodeFailure::kTooLong;
  absl::StatusOr<Announcement> back = DecodeAnnouncement(wire, Key(), &f);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(f, DecodeFailure::kNone);
  EXPECT_EQ(back->nonce.size(), kAnnouncementNonceBytes);
  EXPECT_EQ(back->timestamp_ms, a.timestamp_ms);
  EXPECT_EQ(back->spki_fingerprint, a.spki_fingerprint);
  EXPECT_EQ(*back, WithNonceOf(a, wire));
}

TEST(AnnouncementTest, RoundTripMinimalFields) {
  Announcement a;
  a.node_id = "x";
  a.grpc_port = 1;
  const std::string wire = EncodeAnnouncement(a, Key());
  absl::StatusOr<Announcement> back = DecodeAnnouncement(wire, Key());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->spki_fingerprint.empty());
  EXPECT_EQ(*back, WithNonceOf(a, wire));
}

TEST(AnnouncementTest, TrailerIsHmacOfEverythingBefore) {
  const std::string wire = EncodeAnnouncement(Sample(), Key());
  const std::string_view covered = std::string_view(wire).substr(0, wire.size() - 32);
  EXPECT_EQ(wire.substr(wire.size() - 32), HmacSha256(Key(), covered));
  // Little-endian timestamp just before the nonce.
  uint64_t ts = 0;
  for (int i = 0; i < 8; ++i) {
    ts |= uint64_t{static_cast<unsigned char>(wire[wire.size() - kTimestampFromEnd + i])}
          << (8 * i);
  }
  EXPECT_EQ(ts, Sample().timestamp_ms);
}

TEST(AnnouncementTest, EveryEncodingHasAFreshNonce) {
  const Announcement a = Sample();
  std::set<std::string> nonces;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<Announcement> back = DecodeAnnouncement(EncodeAnnouncement(a, Key()), Key());
    ASSERT_TRUE(back.ok()) << back.status();
    nonces.insert(back->nonce);
  }
  EXPECT_EQ(nonces.size(), 100u);
  // The caller's nonce is ignored.
  Announcement fixed = a;
  fixed.nonce = std::string(16, 'n');
  EXPECT_NE(DecodeAnnouncement(EncodeAnnouncement(fixed, Key()), Key())->nonce, fixed.nonce);
}

TEST(AnnouncementTest, LargestAnnouncementFitsTheLimit) {
  Announcement a = Sample();
  a.node_id = std::string(kMaxNodeIdBytes, 'n');
  a.model_fingerprint = std::string(kMaxModelFingerprintBytes, '\xff');
  a.caps.cpu_model = std::string(kMaxCpuModelBytes, 'c');
  a.grpc_host = std::string(kMaxGrpcHostBytes, 'h');
  a.timestamp_ms = std::numeric_limits<uint64_t>::max();
  ASSERT_TRUE(ValidateAnnouncement(a).ok());
  const std::string wire = EncodeAnnouncement(a, Key());
  EXPECT_LE(wire.size(), kMaxAnnouncementBytes);
  absl::StatusOr<Announcement> back = DecodeAnnouncement(wire, Key());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, WithNonceOf(a, wire));
}

TEST(AnnouncementTest, EveryTruncationIsRejected) {
  const std::string wire = EncodeAnnouncement(Sample(), Key());
  for (size_t n = 0; n < wire.size(); ++n) {
    DecodeFailure f = DecodeFailure::kNone;
    absl::StatusOr<Announcement> r =
        DecodeAnnouncement(std::string_view(wire).substr(0, n), Key(), &f);
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes decoded";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << n;
    if (n < kEnvelope) {
      EXPECT_EQ(f, DecodeFailure::kTooShort) << n;
      EXPECT_THAT(r.status().message(), HasSubstr("too short")) << n;
    } else {
      EXPECT_EQ(f, DecodeFailure::kBadLength) << n;
      EXPECT_THAT(r.status().message(), HasSubstr("bad length")) << n;
    }
  }
}

// A truncated frame whose body_length is patched to fit, and resealed (so a
// key holder could send it): the body parser meets a body that ends early at
// every possible point and must refuse it without reading past the input.
TEST(AnnouncementTest, EveryTruncatedButResealedBodyIsRejected) {
  const std::string wire = EncodeAnnouncement(Sample(), Key());
  const size_t body_length = wire.size() - kEnvelope;
  for (size_t keep = 0; keep < body_length; ++keep) {
    // Copy into an exact-size buffer so a read past the end is caught by ASan.
    std::string frame = wire.substr(0, kHeader + keep) + std::string(32, '\0');
    frame[8] = static_cast<char>(keep & 0xff);
    frame[9] = static_cast<char>(keep >> 8);
    Reseal(frame);
    DecodeFailure f = DecodeFailure::kNone;
    absl::StatusOr<Announcement> r = DecodeAnnouncement(frame, Key(), &f);
    ASSERT_FALSE(r.ok()) << "body of " << keep << " bytes decoded";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << keep;
    EXPECT_EQ(f, DecodeFailure::kBadLength) << keep << ": " << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("body ends inside")) << keep;
  }
}

TEST(AnnouncementTest, EveryFlippedBitIsRejected) {
  const std::string wire = EncodeAnnouncement(Sample(), Key());
  for (size_t i = 0; i < wire.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = wire;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      DecodeFailure f = DecodeFailure::kNone;
      absl::StatusOr<Announcement> r = DecodeAnnouncement(bad, Key(), &f);
      ASSERT_FALSE(r.ok()) << "byte " << i << " bit " << bit;
      if (i < 4) {
        EXPECT_EQ(f, DecodeFailure::kBadMagic) << i;
      } else if (i < 8) {
        EXPECT_EQ(f, DecodeFailure::kOtherVersion) << i;  // dropped unparsed
      } else if (i < 10) {
        EXPECT_EQ(f, DecodeFailure::kBadLength) << i;
      } else {  // body and MAC
        EXPECT_EQ(f, DecodeFailure::kBadMac) << i << " bit " << bit;
        EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << i;
        EXPECT_THAT(r.status().message(), HasSubstr("bad MAC")) << i;
      }
    }
  }
}

TEST(AnnouncementTest, WrongKeyIsBadMac) {
  const std::string wire = EncodeAnnouncement(Sample(), Key());
  EXPECT_EQ(FailureOf(wire, DeriveAnnouncementMacKey("cluster key B")), DecodeFailure::kBadMac);
  EXPECT_EQ(FailureOf(wire, DeriveAnnouncementMacKey("")), DecodeFailure::kBadMac);  // insecure
  EXPECT_EQ(FailureOf(wire, ""), DecodeFailure::kBadMac);
  EXPECT_EQ(FailureOf(wire, Key().substr(0, 31)), DecodeFailure::kBadMac);
  EXPECT_EQ(FailureOf(wire, Key()), DecodeFailure::kNone);
  // And the other way round: insecure nodes drop a secure cluster's datagrams.
  const std::string insecure = EncodeAnnouncement(Sample(), DeriveAnnouncementMacKey(""));
  EXPECT_EQ(FailureOf(insecure, Key()), DecodeFailure::kBadMac);
  EXPECT_EQ(FailureOf(insecure, DeriveAnnouncementMacKey("")), DecodeFailure::kNone);
}

TEST(AnnouncementTest, MacIsCheckedBeforeTheBodyIsParsed) {
  // A body that would fail parsing (node id length 200 > 64), with a wrong
  // MAC, reports the MAC: the parser never saw it.
  std::string wire = EncodeAnnouncement(Sample(), Key());
  wire[kHeader] = static_cast<char>(200);
  EXPECT_EQ(FailureOf(wire), DecodeFailure::kBadMac);
  Reseal(wire);
  EXPECT_EQ(FailureOf(wire), DecodeFailure::kBadLength);
}

TEST(AnnouncementTest, DeriveAnnouncementMacKeyIsHkdf) {
  EXPECT_EQ(DeriveAnnouncementMacKey("k"), HkdfSha256("k", "ringlm/v1/announce-mac", 32));
  EXPECT_EQ(DeriveAnnouncementMacKey("").size(), kAnnouncementMacKeyBytes);
  EXPECT_NE(DeriveAnnouncementMacKey("a"), DeriveAnnouncementMacKey("b"));
}

TEST(AnnouncementTest, OversizedIsRejected) {
  std::string wire = EncodeAnnouncement(Sample(), Key());
  for (size_t size : {kMaxAnnouncementBytes + 1, size_t{60 * 1024}}) {
    std::string big = wire + std::string(size - wire.size(), 'x');
    absl::StatusOr<Announcement> r = DecodeAnnouncement(big, Key());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("too long"));
    EXPECT_EQ(FailureOf(big), DecodeFailure::kTooLong);
  }
}

TEST(AnnouncementTest, BadMagicIsRejected) {
  std::string wire = EncodeAnnouncement(Sample(), Key());
  wire.replace(0, 4, "HTTP");
  Reseal(wire);
  absl::StatusOr<Announcement> r = DecodeAnnouncement(wire, Key());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("bad magic"));
}

TEST(AnnouncementTest, Version1IsOtherVersion) {
  Announcement a = Sample();
  a.spki_fingerprint.clear();
  const std::string v1 = EncodeVersion1(a);
  DecodeFailure f = DecodeFailure::kNone;
  absl::StatusOr<Announcement> r = DecodeAnnouncement(v1, Key(), &f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(f, DecodeFailure::kOtherVersion);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "protocol version 1, expected 3");

  // Version 2 (no read_gbps or placement), even signed with the cluster key,
  // is dropped from its envelope.
  std::string v2 = EncodeAnnouncement(Sample(), Key());
  v2[4] = 2;
  Reseal(v2);
  r = DecodeAnnouncement(v2, Key(), &f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(f, DecodeFailure::kOtherVersion);
  EXPECT_EQ(r.status().message(), "protocol version 2, expected 3");

  // A future version with a different body is still recognised by its envelope.
  std::string future = "RLMA";
  future += std::string("\x07\x00\x00\x00\x03\x00", 6) + "xyz" + std::string(32, '\0');
  r = DecodeAnnouncement(future, Key(), &f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(f, DecodeFailure::kOtherVersion);
  EXPECT_EQ(r.status().message(), "protocol version 7, expected 3");
}

// Frame offsets for Sample()-like announcements with node id `id`.
size_t PortOffset(const std::string& id) { return kHeader + 1 + id.size() + 8; }

TEST(AnnouncementTest, BadFieldsWithValidMacAreRejected) {
  const Announcement a = Sample();
  const std::string wire = EncodeAnnouncement(a, Key());
  struct Case {
    std::string name;
    std::string frame;
    DecodeFailure failure;
    std::string message;
  };
  std::vector<Case> cases;
  {
    std::string f = wire;
    f[11] = ' ';  // first node id character
    cases.push_back({"space in node id", f, DecodeFailure::kBadField, "bad node id"});
  }
  {
    std::string f = wire;
    f[PortOffset(a.node_id)] = 0;
    f[PortOffset(a.node_id) + 1] = 0;
    cases.push_back({"port 0", f, DecodeFailure::kBadField, "bad grpc_port 0"});
  }
  {
    std::string f = wire;
    f[10] = 65;  // node id length above the limit
    cases.push_back({"long node id", f, DecodeFailure::kBadLength, "node_id is 65 bytes"});
  }
  {
    Announcement empty = a;
    empty.node_id = "";
    cases.push_back({"empty node id", EncodeAnnouncement(empty, Key()), DecodeFailure::kBadField,
                     "bad node id"});
  }
  {
    std::string f = wire;
    f.insert(f.size() - 32, "!");
    f[8] = static_cast<char>(f[8] + 1);
    cases.push_back({"trailing byte", f, DecodeFailure::kBadLength, "1 trailing bytes"});
  }
  {
    Announcement nan = a;
    nan.caps.matmul_gflops = std::numeric_limits<double>::quiet_NaN();
    cases.push_back({"NaN gflops", EncodeAnnouncement(nan, Key()), DecodeFailure::kBadField,
                     "bad matmul_gflops"});
  }
  {
    Announcement slow = a;
    slow.caps.read_gbps = -1;
    cases.push_back({"negative bandwidth", EncodeAnnouncement(slow, Key()),
                     DecodeFailure::kBadField, "bad read_gbps"});
  }
  {
    Announcement odd = a;
    odd.caps.placement = static_cast<Placement>(2);
    cases.push_back({"placement 2", EncodeAnnouncement(odd, Key()), DecodeFailure::kBadField,
                     "bad placement 2"});
  }
  {
    Announcement host = a;
    host.grpc_host = "evil host/";
    cases.push_back(
        {"bad host", EncodeAnnouncement(host, Key()), DecodeFailure::kBadField, "bad grpc_host"});
  }
  {
    Announcement fp = a;
    fp.spki_fingerprint = std::string(20, 'f');
    cases.push_back({"20-byte fingerprint", EncodeAnnouncement(fp, Key()), DecodeFailure::kBadField,
                     "bad spki_fingerprint"});
  }
  {
    // spki_fingerprint length byte 33: above the limit. It sits just before
    // the timestamp; the fingerprint is 32 bytes.
    std::string f = wire;
    f[f.size() - kTimestampFromEnd - 33] = 33;
    cases.push_back(
        {"33-byte fingerprint", f, DecodeFailure::kBadLength, "spki_fingerprint is 33 bytes"});
  }
  for (Case& c : cases) {
    Reseal(c.frame);
    DecodeFailure f = DecodeFailure::kNone;
    absl::StatusOr<Announcement> r = DecodeAnnouncement(c.frame, Key(), &f);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(f, c.failure) << c.name << ": " << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.name;
  }
}

TEST(AnnouncementTest, ValidateRejectsBadAnnouncements) {
  Announcement a = Sample();
  EXPECT_TRUE(ValidateAnnouncement(a).ok());
  a.node_id = "";
  EXPECT_EQ(ValidateAnnouncement(a).code(), absl::StatusCode::kInvalidArgument);
  a = Sample();
  a.node_id = std::string(65, 'a');
  EXPECT_EQ(ValidateAnnouncement(a).code(), absl::StatusCode::kInvalidArgument);
  a = Sample();
  a.grpc_port = 0;
  EXPECT_EQ(ValidateAnnouncement(a).code(), absl::StatusCode::kInvalidArgument);
  a = Sample();
  a.model_fingerprint = std::string(129, 'm');
  EXPECT_EQ(ValidateAnnouncement(a).code(), absl::StatusCode::kInvalidArgument);
  a = Sample();
  a.caps.cpu_model = "tab\there";
  EXPECT_EQ(ValidateAnnouncement(a).code(), absl::StatusCode::kInvalidArgument);
  a = Sample();
  a.protocol_version = 1;
  EXPECT_EQ(ValidateAnnouncement(a).code(), absl::StatusCode::kInvalidArgument);
  a = Sample();
  a.spki_fingerprint = std::string(31, 'f');
  EXPECT_EQ(ValidateAnnouncement(a).code(), absl::StatusCode::kInvalidArgument);
  a.spki_fingerprint.clear();
  EXPECT_TRUE(ValidateAnnouncement(a).ok());
}

TEST(AnnouncementTest, NodeIdCharset) {
  EXPECT_TRUE(IsValidNodeId("node-01.a_B"));
  EXPECT_FALSE(IsValidNodeId(""));
  EXPECT_FALSE(IsValidNodeId("a b"));
  EXPECT_FALSE(IsValidNodeId("a/b"));
  EXPECT_FALSE(IsValidNodeId(std::string("a\0b", 3)));
  EXPECT_TRUE(IsValidNodeId(std::string(64, 'a')));
  EXPECT_FALSE(IsValidNodeId(std::string(65, 'a')));
}

}  // namespace
}  // namespace ringlm
