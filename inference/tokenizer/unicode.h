// Internal to inference/tokenizer: the Unicode pieces the byte-level BPE
// ("gpt2") tokenizer needs, each mirroring llama.cpp's src/unicode.cpp:
// lenient UTF-8 decoding, code point classes, and GPT-2's bytes_to_unicode.

#ifndef RINGLM_INFERENCE_TOKENIZER_UNICODE_H_
#define RINGLM_INFERENCE_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringlm::tokenizer_internal {

constexpr uint32_t kReplacementCharacter = 0xFFFD;

// The classes the pre-tokenizer regexes ask about (\p{L}, \p{N}, \s, \p{M},
// \p{P}, \p{S}). No White_Space code point is in L, N, M, P or S, so one
// class per code point is enough.
enum class CodepointClass : uint8_t {
  kOther = 0,    // C* (controls, format, private use, unassigned), non-space Z*
  kLetter,       // general category L* (Lu Ll Lt Lm Lo)
  kNumber,       // general category N* (Nd Nl No)
  kWhitespace,   // the White_Space property (ASCII \t..\r and ' ' included)
  kMark,         // general category M* (Mn Mc Me)
  kPunctuation,  // general category P* (Pc Pd Ps Pe Pi Pf Po)
  kSymbol,       // general category S* (Sm Sc Sk So)
};

struct CodepointRange {
  uint32_t first;
  uint32_t last;  // inclusive
  CodepointClass cls;
};

// Generated table (unicode_tables.cc), sorted by `first`.
extern const CodepointRange kCodepointRanges[];
extern const size_t kNumCodepointRanges;

// Class of `cpt`; kOther for anything not in the table (controls, format
// characters, unassigned, surrogates, values above U+10FFFF).
CodepointClass ClassifyCodepoint(uint32_t cpt);

// The general category of a letter, for regexes that tell letter cases
// apart (\p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo}: Mistral's tekken). Kept
// apart from CodepointClass so that the splitters that only ask \p{L} see
// the same classes as before. A code point is a letter here exactly when
// ClassifyCodepoint gives kLetter (same generator, same Unicode version).
enum class LetterCategory : uint8_t {
  kNotLetter = 0,
  kLu,  // uppercase letter
  kLl,  // lowercase letter
  kLt,  // titlecase letter (digraphs such as U+01C5 "Dž")
  kLm,  // modifier letter
  kLo,  // other letter (CJK ideographs, kana, Arabic, Hebrew, ...)
};

struct LetterRange {
  uint32_t first;
  uint32_t last;  // inclusive
  LetterCategory category;
};

// Generated table (unicode_tables.cc), sorted by `first`.
extern const LetterRange kLetterRanges[];
extern const size_t kNumLetterRanges;

// Letter category of `cpt`; kNotLetter for anything that is not a letter.
// A binary search over kLetterRanges (about 1,900 ranges): thread-safe.
LetterCategory ClassifyLetter(uint32_t cpt);

// llama.cpp's unicode_cpts_from_utf8: decodes by the lead byte's bit pattern,
// checking only that the continuation bytes exist and look like 10xxxxxx
// (overlong forms and surrogates are accepted). Each byte that cannot start a
// sequence becomes U+FFFD and decoding resumes at the next byte. Unlike
// llama.cpp (which throws later, when re-encoding), 4-byte forms above
// U+10FFFF are treated as invalid too.
std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text);

// Appends the UTF-8 encoding of `cpt` (<= U+10FFFF; larger values append U+FFFD).
void AppendUtf8(uint32_t cpt, std::string& out);

// GPT-2's bytes_to_unicode: the code point that stands for `byte` in
// byte-level vocabularies (printable bytes map to themselves, the rest to
// U+0100 + n in byte order; ' ' is U+0120 "Ġ").
uint32_t ByteToCodepoint(uint8_t byte);

// Inverse of ByteToCodepoint; -1 for code points that stand for no byte.
int CodepointToByte(uint32_t cpt);

}  // namespace ringlm::tokenizer_internal

#endif  // RINGLM_INFERENCE_TOKENIZER_UNICODE_H_
