// libFuzzer target for the BPE pre-tokenizers (inference/tokenizer/
// bpe_pre_tokenizer.h, split_sequence.h): they split every prompt a client
// sends, with hand-written matchers for each model family's regexes.
//
// Input: one byte choosing the pre-tokenizer (modulo the number of kinds),
// then the text.
//
// Checks, for every input and kind:
//  - PreTokenize never crashes or hangs (ASan/UBSan, libFuzzer's timeout).
//  - No piece is empty.
//  - For well-formed UTF-8 text, the pieces concatenate to the text's
//    byte-level form (each byte as ByteToCodepoint's code point): splitting
//    loses, adds or reorders nothing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/utf8_check.h"
#include "inference/tokenizer/bpe_pre_tokenizer.h"
#include "inference/tokenizer/unicode.h"

namespace {

using ringlm::tokenizer_internal::PreTokenize;
using ringlm::tokenizer_internal::PreTokenizerKind;

constexpr PreTokenizerKind kKinds[] = {
    PreTokenizerKind::kLlama3,     PreTokenizerKind::kQwen2,       PreTokenizerKind::kGpt2,
    PreTokenizerKind::kDeepseekV3, PreTokenizerKind::kDeepseekLlm, PreTokenizerKind::kTekken};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const PreTokenizerKind kind = kKinds[data[0] % (sizeof(kKinds) / sizeof(kKinds[0]))];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<std::string> pieces = PreTokenize(text, kind);
  std::string joined;
  for (const std::string& piece : pieces) {
    FUZZ_CHECK(!piece.empty());
    joined += piece;
  }
  if (ringlm::fuzz::IsStrictUtf8(text)) {
    std::string byte_level;
    for (const char c : text) {
      ringlm::tokenizer_internal::AppendUtf8(
          ringlm::tokenizer_internal::ByteToCodepoint(static_cast<uint8_t>(c)), byte_level);
    }
    FUZZ_CHECK(joined == byte_level);
  }
  return 0;
}
