#include "inference/context_limit.h"

#include "gtest/gtest.h"

namespace ringlm {
namespace {

constexpr uint32_t kContext = 64;

TEST(ContextLimitTest, APromptOneShortOfTheContextFitsWithRoomForOneToken) {
  EXPECT_TRUE(CheckPromptFits(kContext - 1, kContext).ok());
  EXPECT_EQ(MaxCompletionTokens(kContext - 1, kContext), 1u);
}

TEST(ContextLimitTest, APromptAsLongAsTheContextLeavesNoRoomAndIsRefused) {
  absl::Status s = CheckPromptFits(kContext, kContext);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("maximum context length is 64 tokens"), std::string::npos) << s;
  EXPECT_NE(s.message().find("resulted in 64 tokens"), std::string::npos) << s;
  EXPECT_EQ(MaxCompletionTokens(kContext, kContext), 0u);
}

TEST(ContextLimitTest, APromptPastTheContextIsRefused) {
  EXPECT_EQ(CheckPromptFits(kContext + 1, kContext).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MaxCompletionTokens(kContext + 1, kContext), 0u);
}

TEST(ContextLimitTest, AnEmptyPromptIsRefused) {
  EXPECT_EQ(CheckPromptFits(0, kContext).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ContextLimitTest, AOneTokenPromptMayFillTheRest) {
  EXPECT_TRUE(CheckPromptFits(1, kContext).ok());
  EXPECT_EQ(MaxCompletionTokens(1, kContext), kContext - 1);
}

}  // namespace
}  // namespace ringlm
