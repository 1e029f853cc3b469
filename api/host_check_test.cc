#include "api/host_check.h"

#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

using Verdict = HostCheck::OriginVerdict;

TEST(HostCheckTest, NormalizesHostHeaders) {
  EXPECT_EQ(HostOfHeader("127.0.0.1:8080"), "127.0.0.1");
  EXPECT_EQ(HostOfHeader("[::1]:8080"), "::1");
  EXPECT_EQ(HostOfHeader("[::1]"), "::1");
  EXPECT_EQ(HostOfHeader("::1"), "::1");
  EXPECT_EQ(HostOfHeader("[0:0:0:0:0:0:0:1]"), "::1");
  EXPECT_EQ(HostOfHeader("Example.COM.:80"), "example.com");
  EXPECT_EQ(HostOfHeader(" localhost "), "localhost");
  EXPECT_EQ(HostOfHeader("localhost:"), "localhost");
  EXPECT_FALSE(HostOfHeader("").has_value());
  EXPECT_FALSE(HostOfHeader("host:port").has_value());
  EXPECT_FALSE(HostOfHeader("host:99999").has_value());
  EXPECT_FALSE(HostOfHeader("[::1").has_value());
  EXPECT_FALSE(HostOfHeader("evil.com@127.0.0.1").has_value());
  EXPECT_FALSE(HostOfHeader("a/b").has_value());
}

TEST(HostCheckTest, LoopbackAndWildcard) {
  for (const char* h :
       {"localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"0.0.0.0", "::", "10.0.0.1", "192.168.1.5", "example.com", ""}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
  EXPECT_TRUE(IsWildcardHost("0.0.0.0"));
  EXPECT_TRUE(IsWildcardHost("::"));
  EXPECT_TRUE(IsWildcardHost(""));
  EXPECT_FALSE(IsWildcardHost("127.0.0.1"));
}

TEST(HostCheckTest, WarnsWhenExposedWithoutKey) {
  EXPECT_EQ(ExposureWarning("127.0.0.1", false), "");
  EXPECT_EQ(ExposureWarning("localhost", false), "");
  EXPECT_EQ(ExposureWarning("0.0.0.0", true), "");
  EXPECT_NE(ExposureWarning("0.0.0.0", false).find("no API key"), std::string::npos);
  EXPECT_NE(ExposureWarning("192.168.1.5", false).find("192.168.1.5"), std::string::npos);
}

TEST(HostCheckTest, LoopbackBindAllowsLocalNamesOnly) {
  HostCheck check("127.0.0.1", {}, {});
  for (const char* h : {"localhost", "localhost:8080", "127.0.0.1:1", "[::1]:8080", "::1",
                        "LOCALHOST", "localhost."}) {
    EXPECT_TRUE(check.HostAllowed(std::string_view(h))) << h;
  }
  for (const char* h : {"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "",
                        "10.0.0.1", "localhost.evil.example"}) {
    EXPECT_FALSE(check.HostAllowed(std::string_view(h))) << h;
  }
  EXPECT_TRUE(check.HostAllowed(std::nullopt));  // HTTP/1.0 without Host
}

TEST(HostCheckTest, BoundAndListedHosts) {
  HostCheck check("10.1.2.3", {"ringlm.lan", "Box:9000", "[fe80::1]"}, {});
  EXPECT_TRUE(check.HostAllowed(std::string_view("10.1.2.3:8080")));
  EXPECT_TRUE(check.HostAllowed(std::string_view("ringlm.lan:8080")));
  EXPECT_TRUE(check.HostAllowed(std::string_view("box")));  // any port
  EXPECT_TRUE(check.HostAllowed(std::string_view("[fe80::1]:80")));
  EXPECT_FALSE(check.HostAllowed(std::string_view("10.1.2.4")));
  HostCheck any("127.0.0.1", {"*"}, {});
  EXPECT_TRUE(any.HostAllowed(std::string_view("anything.example")));
}

TEST(HostCheckTest, WildcardBindAllowsOwnAddressesAndName) {
  HostCheck check("0.0.0.0", {}, {});
  EXPECT_TRUE(check.HostAllowed(std::string_view("127.0.0.1:8080")));
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  EXPECT_TRUE(check.HostAllowed(std::string_view(std::string(name) + ":8080"))) << name;
  EXPECT_FALSE(check.HostAllowed(std::string_view("rebound.evil.example")));
}

TEST(HostCheckTest, OriginVerdicts) {
  HostCheck off("127.0.0.1", {}, {});
  EXPECT_FALSE(off.cors_enabled());
  EXPECT_EQ(off.CheckOrigin(std::nullopt, "127.0.0.1:8080"), Verdict::kNoOrigin);
  // The web page served by the API itself.
  EXPECT_EQ(off.CheckOrigin("http://127.0.0.1:8080", "127.0.0.1:8080"), Verdict::kSameOrigin);
  EXPECT_EQ(off.CheckOrigin("http://localhost", "localhost:80"), Verdict::kSameOrigin);
  EXPECT_EQ(off.CheckOrigin("http://127.0.0.1:8081", "127.0.0.1:8080"), Verdict::kDenied);
  EXPECT_EQ(off.CheckOrigin("https://evil.example", "127.0.0.1:8080"), Verdict::kDenied);
  EXPECT_EQ(off.CheckOrigin("null", "127.0.0.1:8080"), Verdict::kDenied);

  HostCheck on("127.0.0.1", {}, {"https://app.example:8443", "http://localhost:3000/"});
  EXPECT_TRUE(on.cors_enabled());
  EXPECT_EQ(on.CheckOrigin("https://app.example:8443", "127.0.0.1:8080"), Verdict::kAllowed);
  EXPECT_EQ(on.CheckOrigin("HTTPS://APP.example:8443", "127.0.0.1:8080"), Verdict::kAllowed);
  EXPECT_EQ(on.CheckOrigin("http://localhost:3000", "127.0.0.1:8080"), Verdict::kAllowed);
  EXPECT_EQ(on.CheckOrigin("https://app.example", "127.0.0.1:8080"), Verdict::kDenied);
  EXPECT_EQ(on.CheckOrigin("http://app.example:8443", "127.0.0.1:8080"), Verdict::kDenied);

  HostCheck any("127.0.0.1", {}, {"*"});
  EXPECT_EQ(any.CheckOrigin("https://whatever.example", "127.0.0.1:8080"), Verdict::kAllowed);
  EXPECT_EQ(any.CheckOrigin("null", "127.0.0.1:8080"), Verdict::kDenied);
}

}  // namespace
}  // namespace ringlm
