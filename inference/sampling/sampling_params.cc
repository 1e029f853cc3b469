#include "inference/sampling/sampling_params.h"

#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

// Written as !(lo <= v && v <= hi) so that NaN fails.
bool InClosedRange(float v, float lo, float hi) { return lo <= v && v <= hi; }

absl::Status OutOfRange(const char* field, float value, const char* range) {
  return absl::InvalidArgumentError(absl::StrCat("sampling parameter ", field, " = ", value,
                                                 " is out of range: must be in ", range));
}

}  // namespace

absl::Status SamplingParams::Validate() const {
  if (!InClosedRange(temperature, 0.0f, kMaxTemperature)) {
    return OutOfRange("temperature", temperature, "[0, 100]");
  }
  if (top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling parameter top_k = ", top_k, " is out of range: must be >= 0"));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return OutOfRange("top_p", top_p, "(0, 1]");
  }
  if (!InClosedRange(min_p, 0.0f, 1.0f)) {
    return OutOfRange("min_p", min_p, "[0, 1]");
  }
  if (!InClosedRange(presence_penalty, -kMaxAbsPenalty, kMaxAbsPenalty)) {
    return OutOfRange("presence_penalty", presence_penalty, "[-2, 2]");
  }
  if (!InClosedRange(frequency_penalty, -kMaxAbsPenalty, kMaxAbsPenalty)) {
    return OutOfRange("frequency_penalty", frequency_penalty, "[-2, 2]");
  }
  return absl::OkStatus();
}

}  // namespace ringlm
