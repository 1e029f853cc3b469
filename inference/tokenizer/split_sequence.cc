#include "inference/tokenizer/split_sequence.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "inference/tokenizer/unicode.h"

namespace ringlm::tokenizer_internal {
namespace {

constexpr uint32_t kNone = 0xFFFFFFFF;

// One piece of the text, as a regex running over it alone sees it: reads
// past its end give kNone and no class, like the end of the string.
class Piece {
 public:
  Piece(const std::vector<uint32_t>& cpts, const std::vector<CodepointClass>& classes, size_t begin,
        size_t size)
      : cpts_(cpts.data() + begin), classes_(classes.data() + begin), size_(size) {}

  size_t size() const { return size_; }
  uint32_t Cpt(size_t i) const { return i < size_ ? cpts_[i] : kNone; }
  // Whether code point i exists and has class `cls`.
  bool Is(size_t i, CodepointClass cls) const { return i < size_ && classes_[i] == cls; }
  bool IsLetterOrMark(size_t i) const {
    return Is(i, CodepointClass::kLetter) || Is(i, CodepointClass::kMark);
  }
  bool IsPunctuationOrSymbol(size_t i) const {
    return Is(i, CodepointClass::kPunctuation) || Is(i, CodepointClass::kSymbol);
  }
  bool IsNewline(size_t i) const { return Cpt(i) == '\r' || Cpt(i) == '\n'; }
  // End of the run of code points from `i` on that satisfy `pred`.
  template <typename Pred>
  size_t RunEnd(size_t i, Pred pred) const {
    while (i < size_ && pred(i)) ++i;
    return i;
  }

 private:
  const uint32_t* cpts_;
  const CodepointClass* classes_;
  size_t size_;
};

// Length of the match of one regex that starts at `pos` (regex alternatives
// tried in order, as a backtracking engine does), or 0 for no match there.
// None of the regexes here matches the empty string.
using Matcher = size_t (*)(const Piece& piece, size_t pos);

// The pieces so far, as lengths in code points over the whole text.
class IsolatedSplitter {
 public:
  explicit IsolatedSplitter(const std::vector<uint32_t>& cpts) : cpts_(cpts) {
    classes_.reserve(cpts.size());
    for (uint32_t c : cpts) classes_.push_back(ClassifyCodepoint(c));
    if (!cpts.empty()) lengths_.push_back(cpts.size());
  }

  // Split(regex, "Isolated") over every piece: the leftmost match, then the
  // next one after it, and so on (find-all); matches and the non-empty
  // stretches between them become pieces.
  void Apply(Matcher match) {
    std::vector<size_t> out;
    out.reserve(lengths_.size());
    size_t begin = 0;
    for (const size_t length : lengths_) {
      const Piece piece(cpts_, classes_, begin, length);
      size_t gap_start = 0;
      for (size_t pos = 0; pos < length;) {
        const size_t n = match(piece, pos);
        if (n == 0) {
          ++pos;
          continue;
        }
        if (pos > gap_start) out.push_back(pos - gap_start);
        out.push_back(n);
        pos += n;
        gap_start = pos;
      }
      if (length > gap_start) out.push_back(length - gap_start);
      begin += length;
    }
    lengths_ = std::move(out);
  }

  std::vector<size_t> TakeLengths() { return std::move(lengths_); }

 private:
  const std::vector<uint32_t>& cpts_;
  std::vector<CodepointClass> classes_;
  std::vector<size_t> lengths_;
};

bool IsAsciiLetter(uint32_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

// The 32 ASCII punctuation and symbol characters, !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~.
bool IsAsciiPunctuation(uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

// \p{N}{1,3}
size_t MatchDigitsUpToThree(const Piece& p, size_t pos) {
  size_t end = pos;
  while (end - pos < 3 && p.Is(end, CodepointClass::kNumber)) ++end;
  return end - pos;
}

// [一-龥぀-ゟ゠-ヿ]+: CJK ideographs U+4E00..U+9FA5, hiragana U+3040..U+309F
// and katakana U+30A0..U+30FF.
size_t MatchCjkKana(const Piece& p, size_t pos) {
  auto in_class = [&p](size_t i) {
    const uint32_t c = p.Cpt(i);
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
  };
  return p.RunEnd(pos, in_class) - pos;
}

// Whitespace alternatives shared with Llama 3's regex:
// \s*[\r\n]+ | \s+(?!\S) | \s+
size_t MatchWhitespace(const Piece& p, size_t pos) {
  const size_t end = p.RunEnd(pos, [&p](size_t i) { return p.Is(i, CodepointClass::kWhitespace); });
  // \s*[\r\n]+: \s* backs off to the last newline of the run.
  for (size_t i = end; i > pos; --i) {
    if (p.IsNewline(i - 1)) return i - pos;
  }
  const size_t n = end - pos;
  // \s+(?!\S): before a non-space, the run leaves its last space behind.
  if (n > 1 && end < p.size()) return n - 1;
  // \s+ (also the whole run at the end of the piece)
  return n;
}

// Regex 3 of DeepSeek V3, its alternatives in order.
size_t MatchDeepseekV3Words(const Piece& p, size_t pos) {
  const uint32_t c = p.Cpt(pos);
  // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
  if (IsAsciiPunctuation(c) && IsAsciiLetter(p.Cpt(pos + 1))) {
    return p.RunEnd(pos + 1, [&p](size_t i) { return IsAsciiLetter(p.Cpt(i)); }) - pos;
  }
  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ : a leading mark reaches the same
  // end whether it counts as the prefix or as part of the run.
  auto letter_or_mark = [&p](size_t i) { return p.IsLetterOrMark(i); };
  if (p.IsLetterOrMark(pos)) return p.RunEnd(pos, letter_or_mark) - pos;
  if (pos < p.size() && !p.IsNewline(pos) && !p.IsPunctuationOrSymbol(pos) &&
      p.IsLetterOrMark(pos + 1)) {
    return p.RunEnd(pos + 1, letter_or_mark) - pos;
  }
  // " ?[\p{P}\p{S}]+[\r\n]*"
  const size_t first = c == ' ' ? pos + 1 : pos;
  if (p.IsPunctuationOrSymbol(first)) {
    const size_t end = p.RunEnd(first, [&p](size_t i) { return p.IsPunctuationOrSymbol(i); });
    return p.RunEnd(end, [&p](size_t i) { return p.IsNewline(i); }) - pos;
  }
  return MatchWhitespace(p, pos);
}

}  // namespace

std::vector<size_t> SplitDeepseekV3(const std::vector<uint32_t>& cpts) {
  IsolatedSplitter splitter(cpts);
  splitter.Apply(MatchDigitsUpToThree);
  splitter.Apply(MatchCjkKana);
  splitter.Apply(MatchDeepseekV3Words);
  return splitter.TakeLengths();
}

}  // namespace ringlm::tokenizer_internal
