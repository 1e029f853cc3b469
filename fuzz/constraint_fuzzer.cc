// libFuzzer target: output constraints (inference/sampling/output_constraint.h),
// which the head compiles from a client's response_format or tools and the
// last stage compiles again from a peer's step.
//
// The input is a constraint spec, then (after the first 0x00 byte, if any) a
// script of token choices. Checks, for every input:
//  - CompileConstraint never crashes or hangs, and rejects only with
//    InvalidArgument.
//  - A compiled grammar, walked over a vocabulary of every byte but the C0
//    controls other than newline and tab, a few multi-byte pieces and
//    DeepSeek V3's tool-call markers (the control tokens its syntax writes
//    as text, as a real vocabulary has them), always leaves some token allowed
//    (or the end token, once the reply is complete): a masked sampler can
//    never get stuck. Each step picks the allowed token the script names;
//    Accept of an allowed token never fails.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "inference/sampling/output_constraint.h"
#include "inference/sampling/tool_call_syntax.h"

namespace {

using ringlm::ConstrainedSampling;

struct Vocab {
  std::vector<std::string> pieces;
  int32_t end = -1;
  std::shared_ptr<const ringlm::grammar::TokenVocabulary> tokens;
  std::shared_ptr<const std::vector<int32_t>> ends;
  Vocab() {
    for (int c = 0x20; c < 0x7f; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
    for (const char* p : {"\n", "\t", "\xc3\xa9", "\xc3", "\xa9", "\"a\"", "true", "null", "{\"",
                          "<tool_call>", "12"}) {
      pieces.push_back(p);
    }
    // The other bytes of a byte-level vocabulary: every literal of a grammar
    // (DeepSeek's markers are U+FF5C and U+2581) can be spelled byte by byte.
    for (int c = 0x7f; c < 0x100; ++c) {
      if (c != 0xc3 && c != 0xa9) pieces.push_back(std::string(1, static_cast<char>(c)));
    }
    for (std::string_view p :
         ringlm::FindToolCallSyntax(ringlm::ToolCallFamily::kDeepSeekV3)->shown_tokens) {
      pieces.push_back(std::string(p));
    }
    end = static_cast<int32_t>(pieces.size());
    pieces.push_back("");
    tokens = ringlm::MakeTokenVocabulary(
        static_cast<int32_t>(pieces.size()), [&](int32_t id) { return pieces[id]; },
        [&](int32_t id) { return id != end; });
    ends = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{end});
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Vocab vocab;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view spec = input.substr(0, split);
  const std::string_view script = split == std::string_view::npos ? "" : input.substr(split + 1);

  absl::StatusOr<ringlm::grammar::Grammar> grammar = ringlm::CompileConstraint(spec);
  if (!grammar.ok()) {
    FUZZ_CHECK(grammar.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  ConstrainedSampling sampling(*grammar, vocab.tokens, vocab.ends);
  std::vector<float> logits(vocab.pieces.size());
  for (size_t step = 0; step < 64 && step < script.size() + 1; ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    FUZZ_CHECK(sampling.Mask(logits).ok());
    std::vector<int32_t> allowed;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i])) allowed.push_back(static_cast<int32_t>(i));
    }
    FUZZ_CHECK(!allowed.empty());
    const uint8_t pick = step < script.size() ? static_cast<uint8_t>(script[step]) : 0;
    const int32_t token = allowed[pick % allowed.size()];
    FUZZ_CHECK(sampling.Accept(token).ok());
    if (token == vocab.end) break;
  }
  return 0;
}
