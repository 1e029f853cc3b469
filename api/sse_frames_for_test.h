// Test-only: the frames of a streamed (SSE) chat or text completion body.
#ifndef RINGLM_API_SSE_FRAMES_FOR_TEST_H_
#define RINGLM_API_SSE_FRAMES_FOR_TEST_H_

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ringlm::testing {

// Splits an SSE body into the JSON of its frames; the last must be [DONE]
// (a failed expectation otherwise, as for a frame that is not one "data:"
// line).
inline std::vector<nlohmann::json> SseFrames(const std::string& body) {
  std::vector<nlohmann::json> frames;
  EXPECT_TRUE(body.size() >= 14 && body.substr(body.size() - 14) == "data: [DONE]\n\n") << body;
  for (absl::string_view frame : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    EXPECT_TRUE(frame.substr(0, 6) == "data: ") << frame;
    EXPECT_EQ(frame.find('\n'), absl::string_view::npos) << frame;
    if (frame == "data: [DONE]") break;
    frames.push_back(nlohmann::json::parse(std::string(frame.substr(6))));
  }
  return frames;
}

}  // namespace ringlm::testing

#endif  // RINGLM_API_SSE_FRAMES_FOR_TEST_H_
