#include "discovery/announcement.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

constexpr size_t kEnvelope = 14;  // magic 4 + version 4 + length 2 + crc 4

Announcement Sample() {
  Announcement a;
  a.node_id = "node-0a1b2c3d4e5f";
  a.instance_id = 0x0123456789abcdefull;
  a.grpc_port = 50051;
  a.model_fingerprint = "llama-3.2-1b-q8_0:sha256:deadbeef";
  a.caps.total_memory_bytes = 16ull << 30;
  a.caps.usable_memory_bytes = 11ull << 30;
  a.caps.matmul_gflops = 42.5;
  a.caps.cpu_model = "Intel(R) Core(TM) i5-8250U CPU @ 1.60GHz";
  a.caps.threads = 4;
  a.grpc_host = "10.0.0.7";
  return a;
}

// Recomputes the CRC trailer after a test edits a frame.
void Reseal(std::string& frame) {
  const uint32_t crc = Crc32(std::string_view(frame).substr(0, frame.size() - 4));
  for (int i = 0; i < 4; ++i) frame[frame.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
}

DecodeFailure FailureOf(std::string_view datagram) {
  DecodeFailure f = DecodeFailure::kNone;
  (void)DecodeAnnouncement(datagram, &f);
  return f;
}

TEST(Crc32Test, MatchesKnownVector) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);
  EXPECT_EQ(Crc32(""), 0u);
}

TEST(AnnouncementTest, RoundTripAllFields) {
  const Announcement a = Sample();
  ASSERT_TRUE(ValidateAnnouncement(a).ok());
  const std::string wire = EncodeAnnouncement(a);
  EXPECT_EQ(wire.substr(0, 4), "RLMA");
  DecodeFailure f = DecodeFailure::kTooLong;
  absl::StatusOr<Announcement> back = DecodeAnnouncement(wire, &f);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(f, DecodeFailure::kNone);
  EXPECT_EQ(*back, a);
}

TEST(AnnouncementTest, RoundTripMinimalFields) {
  Announcement a;
  a.node_id = "x";
  a.grpc_port = 1;
  absl::StatusOr<Announcement> back = DecodeAnnouncement(EncodeAnnouncement(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
}

TEST(AnnouncementTest, LargestAnnouncementFitsTheLimit) {
  Announcement a = Sample();
  a.node_id = std::string(kMaxNodeIdBytes, 'n');
  a.model_fingerprint = std::string(kMaxModelFingerprintBytes, '\xff');
  a.caps.cpu_model = std::string(kMaxCpuModelBytes, 'c');
  a.grpc_host = std::string(kMaxGrpcHostBytes, 'h');
  ASSERT_TRUE(ValidateAnnouncement(a).ok());
  const std::string wire = EncodeAnnouncement(a);
  EXPECT_LE(wire.size(), kMaxAnnouncementBytes);
  absl::StatusOr<Announcement> back = DecodeAnnouncement(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
}

TEST(AnnouncementTest, EveryTruncationIsRejected) {
  const std::string wire = EncodeAnnouncement(Sample());
  for (size_t n = 0; n < wire.size(); ++n) {
    DecodeFailure f = DecodeFailure::kNone;
    absl::StatusOr<Announcement> r = DecodeAnnouncement(std::string_view(wire).substr(0, n), &f);
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

TEST(AnnouncementTest, EveryFlippedByteIsRejected) {
  const std::string wire = EncodeAnnouncement(Sample());
  for (size_t i = 0; i < wire.size(); ++i) {
    for (unsigned mask : {0x01u, 0x80u, 0xffu}) {
      std::string bad = wire;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      DecodeFailure f = DecodeFailure::kNone;
      absl::StatusOr<Announcement> r = DecodeAnnouncement(bad, &f);
      ASSERT_FALSE(r.ok()) << "byte " << i << " mask " << mask;
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << i;
      if (i < 4) {
        EXPECT_EQ(f, DecodeFailure::kBadMagic) << i;
      } else if (i == 8 || i == 9) {
        EXPECT_EQ(f, DecodeFailure::kBadLength) << i;
      } else {
        EXPECT_EQ(f, DecodeFailure::kBadChecksum) << i;
        EXPECT_THAT(r.status().message(), HasSubstr("bad checksum")) << i;
      }
    }
  }
}

TEST(AnnouncementTest, OversizedIsRejected) {
  std::string wire = EncodeAnnouncement(Sample());
  for (size_t size : {kMaxAnnouncementBytes + 1, size_t{60 * 1024}}) {
    std::string big = wire + std::string(size - wire.size(), 'x');
    absl::StatusOr<Announcement> r = DecodeAnnouncement(big);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("too long"));
    EXPECT_EQ(FailureOf(big), DecodeFailure::kTooLong);
  }
}

TEST(AnnouncementTest, BadMagicIsRejected) {
  std::string wire = EncodeAnnouncement(Sample());
  wire.replace(0, 4, "HTTP");
  Reseal(wire);
  absl::StatusOr<Announcement> r = DecodeAnnouncement(wire);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("bad magic"));
}

TEST(AnnouncementTest, OtherVersionIsFailedPrecondition) {
  std::string wire = EncodeAnnouncement(Sample());
  wire[4] = 2;
  Reseal(wire);
  DecodeFailure f = DecodeFailure::kNone;
  absl::StatusOr<Announcement> r = DecodeAnnouncement(wire, &f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "protocol version 2, expected 1");
  EXPECT_EQ(f, DecodeFailure::kOtherVersion);

  // A future version with a different body is still recognised by its envelope.
  std::string future = "RLMA";
  future += std::string("\x07\x00\x00\x00\x03\x00", 6) + "xyz" + std::string(4, '\0');
  Reseal(future);
  r = DecodeAnnouncement(future);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "protocol version 7, expected 1");
}

// Frame offsets for Sample()-like announcements with node id `id`.
size_t PortOffset(const std::string& id) { return 10 + 1 + id.size() + 8; }

TEST(AnnouncementTest, BadFieldsWithValidChecksumAreRejected) {
  const Announcement a = Sample();
  const std::string wire = EncodeAnnouncement(a);
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
    cases.push_back(
        {"empty node id", EncodeAnnouncement(empty), DecodeFailure::kBadField, "bad node id"});
  }
  {
    std::string f = wire;
    f.insert(f.size() - 4, "!");
    f[8] = static_cast<char>(f[8] + 1);
    cases.push_back({"trailing byte", f, DecodeFailure::kBadLength, "1 trailing bytes"});
  }
  {
    Announcement nan = a;
    nan.caps.matmul_gflops = std::numeric_limits<double>::quiet_NaN();
    cases.push_back(
        {"NaN gflops", EncodeAnnouncement(nan), DecodeFailure::kBadField, "bad matmul_gflops"});
  }
  {
    Announcement host = a;
    host.grpc_host = "evil host/";
    cases.push_back(
        {"bad host", EncodeAnnouncement(host), DecodeFailure::kBadField, "bad grpc_host"});
  }
  for (Case& c : cases) {
    Reseal(c.frame);
    DecodeFailure f = DecodeFailure::kNone;
    absl::StatusOr<Announcement> r = DecodeAnnouncement(c.frame, &f);
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
  a.protocol_version = 2;
  EXPECT_EQ(ValidateAnnouncement(a).code(), absl::StatusCode::kInvalidArgument);
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
