#include "inference/token_digest.h"

#include <vector>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

TEST(TokenDigestTest, IsSha256OfLittleEndianIds) {
  // sha256 of the empty string, and of bytes 01 00 00 00 (the id 1).
  EXPECT_EQ(Hex(TokenDigest({})),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::vector<int32_t> one = {1};
  EXPECT_EQ(Hex(TokenDigest(one)),
            "67abdd721024f0ff4e0b3f4c2fc13bc5bad42d0b7851d456d88d203d15aaa450");
}

TEST(TokenDigestTest, DiffersForAnyChangeAndSpansBufferBoundaries) {
  std::vector<int32_t> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i * 7919 % 32000);
  const std::string base = TokenDigest(a);
  EXPECT_EQ(base.size(), 32u);
  for (size_t i : {0u, 255u, 256u, 511u, 999u}) {
    std::vector<int32_t> b = a;
    b[i] += 1;
    EXPECT_NE(TokenDigest(b), base) << i;
  }
  std::vector<int32_t> shorter(a.begin(), a.end() - 1);
  EXPECT_NE(TokenDigest(shorter), base);
}

TEST(TokenDigestTest, TheDigesterReadsEveryPrefixInOnePass) {
  std::vector<int32_t> a(700);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i * 31 - 5000);
  TokenDigester digester;
  size_t fed = 0;
  for (size_t n : {0u, 1u, 255u, 256u, 257u, 699u, 700u}) {
    digester.Add(std::span<const int32_t>(a.data() + fed, n - fed));
    fed = n;
    EXPECT_EQ(digester.Digest(), TokenDigest(std::span<const int32_t>(a.data(), n))) << n;
  }
}

}  // namespace
}  // namespace ringlm
