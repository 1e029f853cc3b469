// Text: a UTF-8 string that remembers, per byte, where it came from.
//
// ringlm keeps a chat template's own characters (role markers such as
// "<|im_start|>") apart from what a client sent, so that a user who types a
// special-token string cannot forge a turn. A Text stores its bytes plus a list
// of runs, each marking a stretch of bytes as control (template literal or a
// trusted context value) or content (from an untrusted context value).
//
// Contract:
//  - runs() covers str() exactly; adjacent runs of the same kind are merged and
//    no run is empty.
//  - Substr/Append map provenance through byte for byte.
//  - A Text is a value type; it is not thread-safe to mutate one from two
//    threads, but const access is.
#ifndef RINGLM_CHAT_JINJA_TEXT_H_
#define RINGLM_CHAT_JINJA_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ringlm::jinja {

class Text {
 public:
  struct Run {
    size_t length;
    bool control;
  };

  Text() = default;
  Text(std::string_view bytes, bool control) { Append(bytes, control); }

  const std::string& str() const { return bytes_; }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  const std::vector<Run>& runs() const { return runs_; }

  // True when no byte is content (an empty Text is all control).
  bool AllControl() const;

  void Append(std::string_view bytes, bool control);
  void Append(const Text& other);
  // Bytes [pos, pos + len) with their provenance; clamps to size().
  Text Substr(size_t pos, size_t len = std::string::npos) const;
  // `bytes` is derived from this text as a whole (e.g. upper-cased): control
  // only if every byte of this text is control.
  Text Derived(std::string bytes) const { return Text(bytes, AllControl()); }

  friend bool operator==(const Text& a, const Text& b) { return a.bytes_ == b.bytes_; }

 private:
  std::string bytes_;
  std::vector<Run> runs_;
};

}  // namespace ringlm::jinja

#endif  // RINGLM_CHAT_JINJA_TEXT_H_
