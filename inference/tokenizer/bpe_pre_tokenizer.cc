#include "inference/tokenizer/bpe_pre_tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "inference/tokenizer/split_sequence.h"
#include "inference/tokenizer/unicode.h"

namespace ringlm::tokenizer_internal {
namespace {

constexpr uint32_t kOutOfRange = 0xFFFFFFFF;

// One scan over the code points of a fragment, mirroring llama.cpp's
// unicode_regex_split_custom_llama3 / _gpt2. llama.cpp runs the qwen2 regex
// through std::regex on "collapsed" text instead; with only letters, numbers,
// whitespace and "other" to tell apart, that regex matches exactly what the
// llama3 scan matches with digit runs cut to length 1, so the scan is shared.
class Splitter {
 public:
  explicit Splitter(const std::vector<uint32_t>& cpts) : cpts_(cpts) {
    classes_.reserve(cpts.size());
    for (uint32_t c : cpts) classes_.push_back(Coarse(ClassifyCodepoint(c)));
  }

  // Lengths (in code points) of the pre-tokens.
  std::vector<size_t> SplitLlama3Style(size_t max_digits) {
    const size_t end = cpts_.size();
    for (size_t pos = 0; pos < end;) {
      const uint32_t cpt = Cpt(pos);
      const CodepointClass cls = Class(pos);

      // (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
      if (size_t n = Contraction(pos, /*ignore_case=*/true); n > 0) {
        pos = Emit(pos + n);
        continue;
      }
      // [^\r\n\p{L}\p{N}]?\p{L}+
      if (!(cpt == '\r' || cpt == '\n' || cls == CodepointClass::kNumber) &&
          (cls == CodepointClass::kLetter || Class(pos + 1) == CodepointClass::kLetter)) {
        ++pos;
        while (Class(pos) == CodepointClass::kLetter) ++pos;
        pos = Emit(pos);
        continue;
      }
      // \p{N}{1,3} (llama3) or \p{N} (qwen2)
      if (cls == CodepointClass::kNumber) {
        size_t start = pos;
        while (Class(pos) == CodepointClass::kNumber) {
          if (++pos - start >= max_digits) start = Emit(pos);
        }
        pos = Emit(pos);
        continue;
      }
      // " ?[^\s\p{L}\p{N}]+[\r\n]*"
      if (IsOther(cpt == ' ' ? pos + 1 : pos)) {
        pos += (cpt == ' ');
        while (IsOther(pos)) ++pos;
        while (Cpt(pos) == '\r' || Cpt(pos) == '\n') ++pos;
        pos = Emit(pos);
        continue;
      }
      size_t n_space = 0;
      size_t last_newline_end = 0;
      while (Class(pos + n_space) == CodepointClass::kWhitespace) {
        const uint32_t c = Cpt(pos + n_space);
        if (c == '\r' || c == '\n') last_newline_end = pos + n_space + 1;
        ++n_space;
      }
      // \s*[\r\n]+
      if (last_newline_end > 0) {
        pos = Emit(last_newline_end);
        continue;
      }
      pos = Emit(WhitespaceEnd(pos, n_space));
    }
    return std::move(lengths_);
  }

  std::vector<size_t> SplitGpt2() {
    const size_t end = cpts_.size();
    for (size_t pos = 0; pos < end;) {
      const uint32_t cpt = Cpt(pos);
      // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
      if (size_t n = Contraction(pos, /*ignore_case=*/false); n > 0) {
        pos = Emit(pos + n);
        continue;
      }
      const size_t first = cpt == ' ' ? pos + 1 : pos;
      const CodepointClass cls = Class(first);
      // " ?\p{L}+", " ?\p{N}+"
      if (cls == CodepointClass::kLetter || cls == CodepointClass::kNumber) {
        pos = first;
        while (Class(pos) == cls) ++pos;
        pos = Emit(pos);
        continue;
      }
      // " ?[^\s\p{L}\p{N}]+"
      if (IsOther(first)) {
        pos = first;
        while (IsOther(pos)) ++pos;
        pos = Emit(pos);
        continue;
      }
      size_t n_space = 0;
      while (Class(pos + n_space) == CodepointClass::kWhitespace) ++n_space;
      pos = Emit(WhitespaceEnd(pos, n_space));
    }
    return std::move(lengths_);
  }

 private:
  // These regexes tell apart only \p{L}, \p{N}, \s and the rest: marks,
  // punctuation and symbols are all "other" here.
  static CodepointClass Coarse(CodepointClass cls) {
    switch (cls) {
      case CodepointClass::kMark:
      case CodepointClass::kPunctuation:
      case CodepointClass::kSymbol:
        return CodepointClass::kOther;
      default:
        return cls;
    }
  }

  uint32_t Cpt(size_t pos) const { return pos < cpts_.size() ? cpts_[pos] : kOutOfRange; }
  // Past the end is kOther here, but IsOther() is false there: like llama.cpp's
  // empty flags, it is neither letter, number, whitespace nor "other".
  CodepointClass Class(size_t pos) const {
    return pos < classes_.size() ? classes_[pos] : CodepointClass::kOther;
  }
  bool IsOther(size_t pos) const {
    return pos < classes_.size() && classes_[pos] == CodepointClass::kOther;
  }

  // Length of an English contraction starting at pos ('s 't 're 've 'm 'll 'd), or 0.
  size_t Contraction(size_t pos, bool ignore_case) const {
    if (Cpt(pos) != '\'' || pos + 1 >= cpts_.size()) return 0;
    auto lower = [ignore_case](uint32_t c) {
      return (ignore_case && c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
    };
    const uint32_t c1 = lower(Cpt(pos + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 >= cpts_.size()) return 0;
    const uint32_t c2 = lower(Cpt(pos + 2));
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
  }

  // \s+(?!\S) then \s+: a run of n_space whitespace that is followed by a
  // non-space leaves its last space to the next pre-token; a lone
  // non-whitespace code point nobody matched becomes its own pre-token.
  size_t WhitespaceEnd(size_t pos, size_t n_space) const {
    if (n_space > 1 && Cpt(pos + n_space) != kOutOfRange) return pos + n_space - 1;
    if (n_space > 0) return pos + n_space;
    return pos + 1;
  }

  // Ends the current pre-token at `end` (skipped when empty); returns `end`.
  size_t Emit(size_t end) {
    if (end > prev_end_) lengths_.push_back(end - prev_end_);
    prev_end_ = end;
    return end;
  }

  const std::vector<uint32_t>& cpts_;
  std::vector<CodepointClass> classes_;
  std::vector<size_t> lengths_;
  size_t prev_end_ = 0;
};

}  // namespace

absl::StatusOr<PreTokenizerConfig> PreTokenizerConfigFor(std::string_view pre) {
  auto is_any = [pre](std::initializer_list<std::string_view> names) {
    for (std::string_view name : names) {
      if (pre == name) return true;
    }
    return false;
  };
  PreTokenizerConfig config;
  if (is_any({"llama3", "llama-v3", "llama-bpe", "falcon3"})) {
    config.kind = PreTokenizerKind::kLlama3;
    config.ignore_merges = true;
    config.default_add_bos = true;
  } else if (is_any({"qwen2", "deepseek-r1-qwen"})) {
    config.kind = PreTokenizerKind::kQwen2;
    config.clean_spaces = false;
  } else if (pre == "deepseek-v3") {
    config.kind = PreTokenizerKind::kDeepseekV3;
    config.clean_spaces = false;
  } else if (pre == "tekken") {
    config.kind = PreTokenizerKind::kTekken;
    config.ignore_merges = true;
    config.clean_spaces = false;
    config.default_add_bos = true;
  } else if (pre == "deepseek-llm") {
    config.kind = PreTokenizerKind::kDeepseekLlm;
    config.clean_spaces = false;
  } else if (is_any({"stablelm2", "megrez"})) {
    config.kind = PreTokenizerKind::kQwen2;
  } else if (is_any({"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v2-es",
                     "jina-v2-de", "gigachat"})) {
    config.kind = PreTokenizerKind::kGpt2;
  } else {
    return absl::UnimplementedError(absl::StrCat(
        "pre-tokenizer \"", absl::CHexEscape(std::string(pre)),
        "\" (tokenizer.ggml.pre) is not implemented; supported: llama3, llama-v3, llama-bpe, "
        "falcon3, qwen2, deepseek-r1-qwen, stablelm2, megrez, gpt-2, phi-2, mpt, olmo, jais, "
        "jina-es, jina-de, jina-v2-es, jina-v2-de, gigachat, deepseek-v3, deepseek-llm, tekken"));
  }
  return config;
}

std::vector<std::string> PreTokenize(std::string_view text, PreTokenizerKind kind) {
  const std::vector<uint32_t> cpts = DecodeUtf8Lenient(text);
  std::vector<size_t> lengths;
  switch (kind) {
    case PreTokenizerKind::kLlama3:
      lengths = Splitter(cpts).SplitLlama3Style(/*max_digits=*/3);
      break;
    case PreTokenizerKind::kQwen2:
      lengths = Splitter(cpts).SplitLlama3Style(/*max_digits=*/1);
      break;
    case PreTokenizerKind::kGpt2:
      lengths = Splitter(cpts).SplitGpt2();
      break;
    case PreTokenizerKind::kDeepseekV3:
      lengths = SplitDeepseekV3(cpts);
      break;
    case PreTokenizerKind::kDeepseekLlm:
      lengths = SplitDeepseekLlm(cpts);
      break;
    case PreTokenizerKind::kTekken:
      lengths = SplitTekken(cpts);
      break;
  }
  std::vector<std::string> words;
  words.reserve(lengths.size());
  std::string utf8;
  size_t start = 0;
  for (const size_t length : lengths) {
    utf8.clear();
    for (size_t i = start; i < start + length; ++i) AppendUtf8(cpts[i], utf8);
    start += length;
    std::string& word = words.emplace_back();
    for (const char byte : utf8) AppendUtf8(ByteToCodepoint(static_cast<uint8_t>(byte)), word);
  }
  return words;
}

}  // namespace ringlm::tokenizer_internal
