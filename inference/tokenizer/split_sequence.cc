#include "inference/tokenizer/split_sequence.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
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
      : cpts_(cpts.data() + begin), classes_(classes.data() + begin), size_(size) {
    trailing_space_ = size_;
    while (trailing_space_ > 0 && classes_[trailing_space_ - 1] == CodepointClass::kWhitespace) {
      --trailing_space_;
    }
  }

  size_t size() const { return size_; }
  // Where the whitespace that runs to the piece's end begins (size() when
  // it ends in something else): found once, so that \s+$ is O(1) at each
  // position, not a scan (quadratic over a long run of spaces).
  size_t trailing_space() const { return trailing_space_; }
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
  // Letter category of code point i (kNotLetter past the end). Looked up on
  // demand: only the tekken regex asks, and only about letters.
  LetterCategory Letter(size_t i) const {
    return Is(i, CodepointClass::kLetter) ? ClassifyLetter(cpts_[i]) : LetterCategory::kNotLetter;
  }
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
  size_t trailing_space_;
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

// The run from `pos` of code points within [lo1, hi1] or [lo2, hi2]
// (inclusive): a bracket class of two ranges, repeated (+).
size_t MatchTwoRangeRun(const Piece& p, size_t pos, uint32_t lo1, uint32_t hi1, uint32_t lo2,
                        uint32_t hi2) {
  auto in_class = [&](size_t i) {
    const uint32_t c = p.Cpt(i);
    return (c >= lo1 && c <= hi1) || (c >= lo2 && c <= hi2);
  };
  return p.RunEnd(pos, in_class) - pos;
}

// [一-龥぀-ゟ゠-ヿ]+: CJK ideographs U+4E00..U+9FA5, hiragana U+3040..U+309F
// and katakana U+30A0..U+30FF.
size_t MatchCjkKana(const Piece& p, size_t pos) {
  return MatchTwoRangeRun(p, pos, 0x4E00, 0x9FA5, 0x3040, 0x30FF);
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

// \s?[class]+ : a whitespace code point joins a run of `in_class` after it.
// The optional space backs off when no run follows it, so a whitespace code
// point that is itself in the class (U+3000 in DeepSeek LLM's punctuation)
// still starts a run of its own.
template <typename InClass>
size_t MatchOptionalSpaceThenRun(const Piece& p, size_t pos, InClass in_class) {
  auto in = [&p, &in_class](size_t i) { return i < p.size() && in_class(p.Cpt(i)); };
  if (p.Is(pos, CodepointClass::kWhitespace) && in(pos + 1)) return p.RunEnd(pos + 1, in) - pos;
  if (in(pos)) return p.RunEnd(pos, in) - pos;
  return 0;
}

// DeepSeek LLM's regex 2 class, [A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃] (cased letters
// of several scripts, but not all of them), as sorted, merged ranges.
struct CodepointSpan {
  uint32_t first;
  uint32_t last;  // inclusive
};
// clang-format off
constexpr CodepointSpan kDeepseekLlmLetters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
    {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
    {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
    {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
    {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// clang-format on

bool IsDeepseekLlmLetter(uint32_t c) {
  const CodepointSpan* end = std::end(kDeepseekLlmLetters);
  const CodepointSpan* it =
      std::lower_bound(std::begin(kDeepseekLlmLetters), end, c,
                       [](const CodepointSpan& r, uint32_t cpt) { return r.last < cpt; });
  return it != end && it->first <= c;
}

// [\r\n]
size_t MatchNewline(const Piece& p, size_t pos) { return p.IsNewline(pos) ? 1 : 0; }

// \s?[A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃]+
size_t MatchDeepseekLlmLetters(const Piece& p, size_t pos) {
  return MatchOptionalSpaceThenRun(p, pos, IsDeepseekLlmLetter);
}

// \s?[!-/:-~！-／：-～‘-‟　-。]+ : note that :-~ takes in the ASCII letters.
size_t MatchDeepseekLlmPunctuation(const Piece& p, size_t pos) {
  return MatchOptionalSpaceThenRun(p, pos, [](uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) || (c >= 0xFF01 && c <= 0xFF0F) ||
           (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) ||
           (c >= 0x3000 && c <= 0x3002);
  });
}

// \s+$ : whitespace that runs to the end of the piece.
size_t MatchTrailingWhitespace(const Piece& p, size_t pos) {
  return pos >= p.trailing_space() ? p.size() - pos : 0;
}

// [一-龥ࠀ-一가-퟿]+ : U+0800..U+9FA5 (the two first ranges meet at 一) and
// U+AC00..U+D7FF.
size_t MatchDeepseekLlmCjk(const Piece& p, size_t pos) {
  return MatchTwoRangeRun(p, pos, 0x0800, 0x9FA5, 0xAC00, 0xD7FF);
}

// \p{N}+
size_t MatchNumbers(const Piece& p, size_t pos) {
  return p.RunEnd(pos, [&p](size_t i) { return p.Is(i, CodepointClass::kNumber); }) - pos;
}

// Tekken's two letter classes. "Upper" is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
// and "lower" is [\p{Ll}\p{Lm}\p{Lo}\p{M}]: modifier and other letters
// (CJK, kana, Arabic, ...) and marks are in both.
bool IsTekkenUpper(const Piece& p, size_t i) {
  const LetterCategory c = p.Letter(i);
  return c == LetterCategory::kLu || c == LetterCategory::kLt || c == LetterCategory::kLm ||
         c == LetterCategory::kLo || p.Is(i, CodepointClass::kMark);
}
bool IsTekkenLower(const Piece& p, size_t i) {
  const LetterCategory c = p.Letter(i);
  return c == LetterCategory::kLl || c == LetterCategory::kLm || c == LetterCategory::kLo ||
         p.Is(i, CodepointClass::kMark);
}

// End of [upper]*[lower]+ matched from `start`, or `start` for no match. A
// backtracking engine lets [upper]* take its whole run first; when a lower
// code point (Ll, which is not upper) follows, [lower]+ takes its run from
// there. Otherwise [upper]* gives code points back one at a time until one
// it gave back is lower (Lm, Lo or M, in both classes): [lower]+ matches
// from there and stops right after it, since the ones given back before it
// were not lower. So "HTTPServer" is one match, and "日本ABC" ends after 本.
size_t TekkenCasedWordEnd(const Piece& p, size_t start) {
  const size_t upper_end = p.RunEnd(start, [&p](size_t i) { return IsTekkenUpper(p, i); });
  if (IsTekkenLower(p, upper_end)) {
    return p.RunEnd(upper_end, [&p](size_t i) { return IsTekkenLower(p, i); });
  }
  for (size_t end = upper_end; end > start; --end) {
    if (IsTekkenLower(p, end - 1)) return end;
  }
  return start;
}

// End of [upper]+[lower]* matched from `start` (greedy, nothing to give
// back), or `start` for no match.
size_t TekkenUpperWordEnd(const Piece& p, size_t start) {
  const size_t upper_end = p.RunEnd(start, [&p](size_t i) { return IsTekkenUpper(p, i); });
  if (upper_end == start) return start;
  return p.RunEnd(upper_end, [&p](size_t i) { return IsTekkenLower(p, i); });
}

// Mistral's tekken regex, its alternatives in order.
size_t MatchTekken(const Piece& p, size_t pos) {
  // [^\r\n\p{L}\p{N}]? : tried with the prefix first, then without it
  // (which matters only for a mark, both a prefix and a letter here).
  const bool prefix = pos < p.size() && !p.IsNewline(pos) && !p.Is(pos, CodepointClass::kLetter) &&
                      !p.Is(pos, CodepointClass::kNumber);
  // [^\r\n\p{L}\p{N}]?[upper]*[lower]+, then [^\r\n\p{L}\p{N}]?[upper]+[lower]*
  for (size_t (*word_end)(const Piece&, size_t) : {TekkenCasedWordEnd, TekkenUpperWordEnd}) {
    if (prefix) {
      if (const size_t end = word_end(p, pos + 1); end > pos + 1) return end - pos;
    }
    if (const size_t end = word_end(p, pos); end > pos) return end - pos;
  }
  // \p{N}
  if (p.Is(pos, CodepointClass::kNumber)) return 1;
  // " ?[^\s\p{L}\p{N}]+[\r\n/]*"
  auto is_other = [&p](size_t i) {
    return i < p.size() && !p.Is(i, CodepointClass::kWhitespace) &&
           !p.Is(i, CodepointClass::kLetter) && !p.Is(i, CodepointClass::kNumber);
  };
  const size_t first = p.Cpt(pos) == ' ' ? pos + 1 : pos;
  if (is_other(first)) {
    const size_t end = p.RunEnd(first, is_other);
    return p.RunEnd(end, [&p](size_t i) { return p.IsNewline(i) || p.Cpt(i) == '/'; }) - pos;
  }
  // \s*[\r\n]+ | \s+(?!\S) | \s+
  return MatchWhitespace(p, pos);
}

// The pieces of `cpts` after each of `matchers`' Isolated splits, in order.
std::vector<size_t> SplitInTurn(const std::vector<uint32_t>& cpts,
                                std::initializer_list<Matcher> matchers) {
  IsolatedSplitter splitter(cpts);
  for (const Matcher match : matchers) splitter.Apply(match);
  return splitter.TakeLengths();
}

}  // namespace

std::vector<size_t> SplitTekken(const std::vector<uint32_t>& cpts) {
  return SplitInTurn(cpts, {MatchTekken});
}

std::vector<size_t> SplitDeepseekLlm(const std::vector<uint32_t>& cpts) {
  return SplitInTurn(cpts, {MatchNewline, MatchDeepseekLlmLetters, MatchDeepseekLlmPunctuation,
                            MatchTrailingWhitespace, MatchDeepseekLlmCjk, MatchNumbers});
}

std::vector<size_t> SplitDeepseekV3(const std::vector<uint32_t>& cpts) {
  return SplitInTurn(cpts, {MatchDigitsUpToThree, MatchCjkKana, MatchDeepseekV3Words});
}

}  // namespace ringlm::tokenizer_internal
