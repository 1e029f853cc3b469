#include "api/json_limits.h"

#include <string>

#include "api/api_error.h"
#include "api/completion_request.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using Json = nlohmann::json;

std::string Nested(int depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

void ExpectRejected(const absl::StatusOr<Json>& r, const std::string& words) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find(words), std::string::npos) << r.status();
}

TEST(JsonLimitsTest, ParsesLikeNlohmann) {
  const std::string text =
      R"({"a":[1,-2,3.5,"x\u00e9",true,false,null,{"b":{}}],"c":18446744073709551615})";
  absl::StatusOr<Json> j = ParseJsonWithLimits(text, {});
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(*j, Json::parse(text));
  EXPECT_TRUE((*j)["c"].is_number_unsigned());
}

TEST(JsonLimitsTest, DepthIsBounded) {
  JsonLimits limits;
  limits.max_depth = 64;
  EXPECT_TRUE(ParseJsonWithLimits(Nested(64), limits).ok());
  ExpectRejected(ParseJsonWithLimits(Nested(65), limits), "nested deeper than 64");
  // Objects count as levels too.
  std::string objects;
  for (int i = 0; i < 65; ++i) objects += R"({"k":)";
  objects += "1" + std::string(65, '}');
  ExpectRejected(ParseJsonWithLimits(objects, limits), "nested deeper");
  // 1 MB of "[" stops at once, without building anything.
  ExpectRejected(ParseJsonWithLimits(std::string(1 << 20, '['), limits), "nested deeper");
}

TEST(JsonLimitsTest, ElementCountIsBounded) {
  JsonLimits limits;
  limits.max_elements = 10;
  // The array and 9 numbers: 10 elements.
  EXPECT_TRUE(ParseJsonWithLimits("[1,2,3,4,5,6,7,8,9]", limits).ok());
  ExpectRejected(ParseJsonWithLimits("[1,2,3,4,5,6,7,8,9,10]", limits), "more than 10");
  // Keys count: the object, 5 keys, 5 values = 11.
  ExpectRejected(ParseJsonWithLimits(R"({"a":1,"b":2,"c":3,"d":4,"e":5})", limits), "more than");
}

TEST(JsonLimitsTest, MalformedJsonIsInvalidArgument) {
  for (const char* text : {"", "{", "[1,]", "{\"a\":1} x", "\"\xff\"", "nul"}) {
    absl::StatusOr<Json> r = ParseJsonWithLimits(text, {});
    ExpectRejected(r, "not valid JSON");
    EXPECT_EQ(ErrorParam(r.status()), "");
  }
}

TEST(JsonLimitsTest, RequestParsersApplyTheLimits) {
  JsonLimits limits;
  limits.max_depth = 4;
  const std::string deep = R"({"messages":[{"role":"user","content":"x"}],"x":)" + Nested(4) + "}";
  absl::StatusOr<CompletionRequest> r = ParseChatCompletionRequest(deep, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      ParseChatCompletionRequest(R"({"messages":[{"role":"user","content":"x"}]})", limits).ok());
  EXPECT_FALSE(ParseTextCompletionRequest(R"({"prompt":"x","y":)" + Nested(4) + "}", limits).ok());
}

}  // namespace
}  // namespace ringlm
