#include "api/stop_filter.h"

#include <algorithm>

namespace ringlm {

StopFilter::StopFilter(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopFilter::Push(std::string_view text) {
  if (stopped_) return "";
  held_.append(text);
  // held_ never contains a whole stop string (it would have matched earlier),
  // so searching it all finds matches that span Push calls.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that some stop string starts with.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (std::string_view(held_).substr(held_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopFilter::Finish() {
  std::string out = stopped_ ? std::string() : std::move(held_);
  held_.clear();
  return out;
}

}  // namespace ringlm
