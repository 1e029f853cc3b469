#include "chat/jinja/text.h"

#include <algorithm>

namespace ringlm::jinja {

bool Text::AllControl() const {
  for (const Run& run : runs_) {
    if (!run.control) return false;
  }
  return true;
}

void Text::Append(std::string_view bytes, bool control) {
  if (bytes.empty()) return;
  bytes_.append(bytes);
  if (!runs_.empty() && runs_.back().control == control) {
    runs_.back().length += bytes.size();
  } else {
    runs_.push_back({bytes.size(), control});
  }
}

void Text::Append(const Text& other) {
  size_t offset = 0;
  for (const Run& run : other.runs_) {
    Append(std::string_view(other.bytes_).substr(offset, run.length), run.control);
    offset += run.length;
  }
}

Text Text::Substr(size_t pos, size_t len) const {
  Text out;
  if (pos >= bytes_.size()) return out;
  size_t end = len > bytes_.size() - pos ? bytes_.size() : pos + len;
  size_t run_start = 0;
  for (const Run& run : runs_) {
    size_t run_end = run_start + run.length;
    size_t lo = std::max(run_start, pos);
    size_t hi = std::min(run_end, end);
    if (lo < hi) {
      out.Append(std::string_view(bytes_).substr(lo, hi - lo), run.control);
    }
    if (run_end >= end) break;
    run_start = run_end;
  }
  return out;
}

}  // namespace ringlm::jinja
