// Stop strings over streamed text: decides which text may be shown now, which
// must be held back because it could be the start of a stop string, and where
// generation stops.
#ifndef RINGLM_API_STOP_FILTER_H_
#define RINGLM_API_STOP_FILTER_H_

#include <string>
#include <string_view>
#include <vector>

namespace ringlm {

// Feed it the decoded text as it arrives. The first occurrence of any stop
// string ends the output: the text before it is emitted, the stop string and
// everything after it never are. Until then, the longest tail that is a
// proper prefix of some stop string is held back. Text split across Push calls
// is matched as if it had arrived at once. Input must be valid UTF-8 (as from
// StreamingDecoder); held-back tails then start on a character boundary, so
// emitted text is valid UTF-8 too.
//
// Not thread-safe; one per request.
class StopFilter {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopFilter(std::vector<std::string> stops);

  // Returns the text that can be shown now. After a stop string matched,
  // returns "" and ignores its input.
  std::string Push(std::string_view text);
  // At the end of generation (no stop matched): the held-back tail.
  std::string Finish();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ringlm

#endif  // RINGLM_API_STOP_FILTER_H_
