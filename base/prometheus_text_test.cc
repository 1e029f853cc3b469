#include "base/prometheus_text.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

std::vector<PrometheusSample> MustParse(const std::string& text) {
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(text);
  EXPECT_TRUE(samples.ok()) << samples.status() << "\n" << text;
  return samples.ok() ? *samples : std::vector<PrometheusSample>{};
}

TEST(ParsePrometheusTextTest, AcceptsTheFormatsOptionalParts) {
  std::vector<PrometheusSample> samples = MustParse(
      "# A plain comment\n"
      "\n"
      "# HELP m Some help.\n"
      "# TYPE m gauge\n"
      "m{a=\"1\",} 2.5 1712345678000\n"
      "m { a = \"2\" } -Inf\n"
      "untyped_metric 7\n");
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_THAT(FindSample(samples, "m", {{"a", "2"}}),
              Optional(-std::numeric_limits<double>::infinity()));
  EXPECT_THAT(FindSample(samples, "untyped_metric"), Optional(7.0));
}

TEST(ParsePrometheusTextTest, RejectsMalformedText) {
  const char* kHistogramHead = "# TYPE h histogram\n";
  const std::vector<std::string> bad = {
      "m 1",                                    // no final newline
      "9m 1\n",                                 // bad name
      "m{9a=\"x\"} 1\n",                        // bad label name
      "m{a=x} 1\n",                             // unquoted value
      "m{a=\"x} 1\n",                           // unterminated value
      "m{a=\"\\t\"} 1\n",                       // bad escape
      "m{a=\"1\",a=\"2\"} 1\n",                 // duplicate label
      "m 1.2.3\n",                              // bad value
      "m 0x10\n",                               // hex is not accepted
      "m\n",                                    // no value
      "m 1 2 3\n",                              // trailing text
      "m 1 1.5\n",                              // float timestamp
      "m 1\nm 2\n",                             // duplicate series
      "m 1\n# TYPE m gauge\n",                  // TYPE after samples
      "# TYPE m gauge\n# TYPE m gauge\nm 1\n",  // two TYPEs
      "# HELP m a\n# HELP m b\nm 1\n",          // two HELPs
      "# TYPE m sometype\nm 1\n",               // unknown type
      "# HELP m bad \\q escape\nm 1\n",         // bad HELP escape
      "m{a=\"1\"} 1\nn 1\nm{a=\"2\"} 1\n",      // family split in two groups
      "# TYPE c counter\nc -1\n",               // negative counter
      std::string(kHistogramHead) + "h 1\n",    // histogram sample without suffix
      std::string(kHistogramHead) +             // no +Inf bucket
          "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
      std::string(kHistogramHead) +  // not cumulative
          "h_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n"
          "h_count 2\n",
      std::string(kHistogramHead) +  // le not increasing
          "h_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\n"
          "h_count 1\n",
      std::string(kHistogramHead) +  // +Inf differs from _count
          "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
      std::string(kHistogramHead) +  // no _sum
          "h_bucket{le=\"+Inf\"} 2\nh_count 2\n",
      std::string(kHistogramHead) +  // bucket without le
          "h_bucket 2\nh_sum 1\nh_count 2\n",
  };
  for (const std::string& text : bad) {
    absl::StatusOr<std::vector<PrometheusSample>> parsed = ParsePrometheusText(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  // A correct histogram for contrast.
  MustParse(std::string(kHistogramHead) +
            "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n");
}

}  // namespace
}  // namespace ringlm
