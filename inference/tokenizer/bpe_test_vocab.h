// Test-only: a small byte-level ("gpt2") vocabulary built by hand: the 256
// byte symbols (ids 0..255, in byte order), some merges, special tokens.

#ifndef RINGLM_INFERENCE_TOKENIZER_BPE_TEST_VOCAB_H_
#define RINGLM_INFERENCE_TOKENIZER_BPE_TEST_VOCAB_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm::testing {

// UTF-8 of the code point GPT-2's bytes_to_unicode assigns to `byte`, written
// out independently of the tokenizer: printable bytes stand for themselves,
// the other 68 take U+0100, U+0101, ... in byte order.
inline std::string ByteSymbol(uint8_t byte) {
  auto printable = [](int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  };
  uint32_t cpt = byte;
  if (!printable(byte)) {
    cpt = 256;
    for (int b = 0; b < byte; ++b) cpt += !printable(b);
  }
  std::string out;
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
  return out;
}

// Byte-level spelling of raw text ("a b" -> "aĠb").
inline std::string Spell(const std::string& raw) {
  std::string out;
  for (char c : raw) out += ByteSymbol(static_cast<uint8_t>(c));
  return out;
}

class BpeVocabBuilder {
 public:
  explicit BpeVocabBuilder(std::string pre) {
    vocab_.model = "gpt2";
    vocab_.pre = std::move(pre);
    vocab_.add_space_prefix = false;
    vocab_.add_bos = false;
    for (int b = 0; b < 256; ++b) Add(ByteSymbol(static_cast<uint8_t>(b)));
  }
  // Adds the merge "left right" (raw text; spelled byte-level here) and its
  // result piece if new.
  BpeVocabBuilder& Merge(const std::string& left, const std::string& right) {
    vocab_.merges.push_back(Spell(left) + " " + Spell(right));
    if (Find(Spell(left + right)) < 0) Add(Spell(left + right));
    return *this;
  }
  BpeVocabBuilder& Add(std::string piece, TokenType type = TokenType::kNormal) {
    vocab_.pieces.push_back(std::move(piece));
    vocab_.types.push_back(type);
    return *this;
  }
  int32_t Find(const std::string& piece) const {
    for (size_t i = 0; i < vocab_.pieces.size(); ++i) {
      if (vocab_.pieces[i] == piece) return static_cast<int32_t>(i);
    }
    return -1;
  }
  // Id of the piece spelling raw text `raw` (or of a special token's text).
  int32_t Id(const std::string& raw) const {
    int32_t id = Find(Spell(raw));
    if (id < 0) id = Find(raw);
    if (id < 0) ADD_FAILURE() << "no piece for " << raw;
    return id;
  }
  Vocabulary& vocab() { return vocab_; }

 private:
  Vocabulary vocab_;
};

// Merges in rank order, then special tokens. Ranks: "h e" 0, " t" 1,
// " t"+"he" 2, "l l" 3, "o u" 4, " y" 5, " y"+"ou" 6, "'"+"ll" 7, "1 2" 8,
// "12 3" 9, "4 5" 10, "  " 11, "\n\n" 12, "a b" 13, "b c" 14.
inline BpeVocabBuilder SmallBpeVocab(std::string pre) {
  BpeVocabBuilder b(std::move(pre));
  b.Merge("h", "e").Merge(" ", "t").Merge(" t", "he").Merge("l", "l").Merge("o", "u");
  b.Merge(" ", "y").Merge(" y", "ou").Merge("'", "ll").Merge("1", "2").Merge("12", "3");
  b.Merge("4", "5").Merge(" ", " ").Merge("\n", "\n").Merge("a", "b").Merge("b", "c");
  b.Add("<|begin_of_text|>", TokenType::kControl).Add("<|end_of_text|>", TokenType::kControl);
  b.Add("<|eot_id|>", TokenType::kControl).Add("<tool>", TokenType::kUserDefined);
  b.vocab().bos_id = b.Find("<|begin_of_text|>");
  b.vocab().eos_id = b.Find("<|end_of_text|>");
  return b;
}

}  // namespace ringlm::testing

#endif  // RINGLM_INFERENCE_TOKENIZER_BPE_TEST_VOCAB_H_
