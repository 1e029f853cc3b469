#include "security/crypto.h"

#include <set>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

TEST(CryptoTest, HmacMatchesRfc4231Case2) {
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CryptoTest, HkdfMatchesRfc5869Case3) {
  // RFC 5869 test case 3: 22 bytes of 0x0b, no salt, no info.
  EXPECT_EQ(HexEncode(HkdfSha256(std::string(22, '\x0b'), "", 42)),
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
            "9d201395faa4b61a96c8");
}

TEST(CryptoTest, HkdfInfoSeparatesKeys) {
  EXPECT_NE(HkdfSha256("key", "a"), HkdfSha256("key", "b"));
  EXPECT_EQ(HkdfSha256("key", "a"), HkdfSha256("key", "a"));
  EXPECT_EQ(HkdfSha256("", "a").size(), 32u);
}

TEST(CryptoTest, Sha256OfAbc) {
  EXPECT_EQ(HexEncode(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CryptoTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(CryptoTest, RandomIdsAreLongAndDistinct) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(RandomId("req-"));
  EXPECT_EQ(ids.size(), 1000u);
  EXPECT_EQ(ids.begin()->size(), 4u + 32u);
}

}  // namespace
}  // namespace ringlm
