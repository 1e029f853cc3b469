// The "gpt2" (byte-level BPE) tokenizer on a small hand-built vocabulary
// (bpe_test_vocab.h), where every expected id sequence is checked by hand.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/bpe_test_vocab.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {
namespace {

using testing::BpeVocabBuilder;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::SmallBpeVocab;

std::unique_ptr<Tokenizer> Build(const Vocabulary& vocab) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(vocab);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(BpeTokenizerTest, MergesLowestRankFirst) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  auto t = Build(b.vocab());
  ASSERT_NE(t, nullptr);
  // "a b" (rank 13) beats "b c" (rank 14).
  EXPECT_THAT(t->Encode("abc", false, false), ElementsAre(b.Id("ab"), b.Id("c")));
  // Swap the two ranks: now "bc" wins.
  std::swap(b.vocab().merges[13], b.vocab().merges[14]);
  auto swapped = Build(b.vocab());
  EXPECT_THAT(swapped->Encode("abc", false, false), ElementsAre(b.Id("a"), b.Id("bc")));
  // Merges chain: " t" then "he" then " t"+"he"; "h e" has the lowest rank.
  EXPECT_THAT(t->Encode(" the", false, false), ElementsAre(b.Id(" the")));
  EXPECT_THAT(t->Encode("the", false, false), ElementsAre(b.Id("t"), b.Id("he")));
  // "12 3" needs "1 2" first; "45" is its own pre-token's merge.
  EXPECT_THAT(t->Encode("12345", false, false), ElementsAre(b.Id("123"), b.Id("45")));
}

TEST(BpeTokenizerTest, PreTokensBoundMerges) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  auto t = Build(b.vocab());
  // "you'll": "you" and "'ll" are separate pre-tokens; " you" is only
  // reachable with the space.
  EXPECT_THAT(t->Encode("you'll", false, false), ElementsAre(b.Id("y"), b.Id("ou"), b.Id("'ll")));
  EXPECT_THAT(t->Encode(" you'll", false, false), ElementsAre(b.Id(" you"), b.Id("'ll")));
  // Three spaces before a word: "  " (merged) then " the".
  EXPECT_THAT(t->Encode("   the", false, false), ElementsAre(b.Id("  "), b.Id(" the")));
  EXPECT_THAT(t->Encode("a\n\n", false, false), ElementsAre(b.Id("a"), b.Id("\n\n")));
}

TEST(BpeTokenizerTest, Qwen2SplitsDigitsBeforeMerging) {
  BpeVocabBuilder b = SmallBpeVocab("qwen2");
  auto t = Build(b.vocab());
  EXPECT_THAT(t->Encode("12345", false, false),
              ElementsAre(b.Id("1"), b.Id("2"), b.Id("3"), b.Id("4"), b.Id("5")));
}

TEST(BpeTokenizerTest, Llama3IgnoresMergesForWholePieces) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  b.Add(testing::Spell("xyz"));  // a piece no merge produces
  auto llama3 = Build(b.vocab());
  EXPECT_THAT(llama3->Encode("xyz", false, false), ElementsAre(b.Id("xyz")));
  b.vocab().pre = "qwen2";
  auto qwen2 = Build(b.vocab());
  EXPECT_THAT(qwen2->Encode("xyz", false, false), ElementsAre(b.Id("x"), b.Id("y"), b.Id("z")));
}

TEST(BpeTokenizerTest, SpecialTokensAndBos) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  b.vocab().add_bos = true;
  auto t = Build(b.vocab());
  const int32_t bos = b.Id("<|begin_of_text|>");
  const int32_t eot = b.Id("<|eot_id|>");
  EXPECT_THAT(t->Encode("", true, true), ElementsAre(bos));
  EXPECT_THAT(t->Encode("", false, true), IsEmpty());
  EXPECT_THAT(t->Encode("<|begin_of_text|>he<|eot_id|>", false, true),
              ElementsAre(bos, b.Id("he"), eot));
  EXPECT_THAT(t->Encode("he<|eot_id|>", true, true), ElementsAre(bos, b.Id("he"), eot));
  // Without parse_special control texts are plain text; user-defined tokens
  // always match.
  const std::vector<int32_t> literal = t->Encode("<|eot_id|><tool>", false, false);
  EXPECT_EQ(literal.back(), b.Id("<tool>"));
  EXPECT_EQ(std::count(literal.begin(), literal.end(), eot), 0);
  EXPECT_EQ(t->Decode(literal), "<|eot_id|><tool>");
  // Text around a special token is pre-tokenized on its own.
  EXPECT_THAT(t->Encode(" the<tool> the", false, false),
              ElementsAre(b.Id(" the"), b.Id("<tool>"), b.Id(" the")));
}

TEST(BpeTokenizerTest, SegmentsKeepContentSpecialsAsText) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  auto t = Build(b.vocab());
  const int32_t eot = b.Id("<|eot_id|>");
  const std::vector<PromptSegment> segments = {
      {"<|begin_of_text|>", true}, {"he<|eot_id|><tool> the", false}, {"<|eot_id|>", true}};
  const std::vector<int32_t> ids = t->EncodeSegments(segments, false);
  // Only the marker at the end is the control token; the user-defined <tool>
  // matches in content as it does without parse_special.
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eot), 1);
  EXPECT_EQ(ids.back(), eot);
  EXPECT_EQ(ids.front(), b.Id("<|begin_of_text|>"));
  std::vector<int32_t> expected = {b.Id("<|begin_of_text|>")};
  for (int32_t id : t->Encode("he<|eot_id|><tool> the", false, false)) expected.push_back(id);
  expected.push_back(eot);
  EXPECT_EQ(ids, expected);
  // No specials in content: the same ids as the joined text.
  const std::vector<PromptSegment> clean = {{"<|begin_of_text|>", true}, {"he the", false}};
  EXPECT_EQ(t->EncodeSegments(clean, false), t->Encode("<|begin_of_text|>he the", false, true));
}

TEST(BpeTokenizerTest, IdsSegmentsAreVerbatimBetweenRunsTokenizedOnTheirOwn) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  b.vocab().add_bos = true;
  auto t = Build(b.vocab());
  const int32_t bos = b.Id("<|begin_of_text|>");
  // " the" given as the ids of " ", "t", "h", "e": kept, not re-merged; the
  // runs around it are tokenized alone, BOS once.
  const std::vector<int32_t> spelled = {b.Id(" "), b.Id("t"), b.Id("h"), b.Id("e")};
  const std::vector<PromptSegment> segments = {
      {"he", true}, {" the", false, spelled}, {" the<|eot_id|>", true}};
  std::vector<int32_t> expected = {bos, b.Id("he")};
  expected.insert(expected.end(), spelled.begin(), spelled.end());
  for (int32_t id : t->Encode(" the<|eot_id|>", false, true)) expected.push_back(id);
  EXPECT_EQ(t->EncodeSegments(segments, true), expected);
}

TEST(BpeTokenizerTest, EndOfGeneration) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  b.Add("<|stop|>", TokenType::kControl);
  b.vocab().eot_id = b.Id("<|stop|>");
  auto t = Build(b.vocab());
  EXPECT_TRUE(t->IsEndOfGeneration(b.Id("<|end_of_text|>")));  // eos
  EXPECT_TRUE(t->IsEndOfGeneration(b.Id("<|eot_id|>")));       // recognized by text
  EXPECT_TRUE(t->IsEndOfGeneration(b.Id("<|stop|>")));         // eot_id
  EXPECT_FALSE(t->IsEndOfGeneration(b.Id("<|begin_of_text|>")));
  b.vocab().eom_id = static_cast<int32_t>(b.vocab().pieces.size());
  EXPECT_EQ(Tokenizer::Create(b.vocab()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BpeTokenizerTest, TokenToPiece) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  b.Add("\xE2\x82\xAC");  // "€": a code point that stands for no byte
  auto t = Build(b.vocab());
  EXPECT_EQ(t->TokenToPiece(b.Id(" the")), " the");
  EXPECT_EQ(t->TokenToPiece(b.Id("\n\n")), "\n\n");
  EXPECT_EQ(t->TokenToPiece(0x00), std::string(1, '\0'));
  EXPECT_EQ(t->TokenToPiece(0xFF), "\xFF");
  EXPECT_EQ(t->TokenToPiece(b.Id("<|eot_id|>")), "");
  EXPECT_EQ(t->TokenToPiece(b.Id("<tool>")), "<tool>");
  EXPECT_EQ(t->TokenToPiece(b.Find("\xE2\x82\xAC")), "[UNK_BYTE_0xe282ac\xE2\x82\xAC]");
  EXPECT_EQ(t->TokenToPiece(-1), "");
  EXPECT_EQ(t->TokenToPiece(t->n_vocab()), "");
}

TEST(BpeTokenizerTest, DecodeRoundTripsArbitraryBytes) {
  BpeVocabBuilder b = SmallBpeVocab("qwen2");  // qwen2: no clean-up passes
  auto t = Build(b.vocab());
  // Every byte, including ones that are never valid UTF-8, from byte tokens.
  std::string all_bytes;
  std::vector<int32_t> ids;
  for (int i = 0; i < 256; ++i) {
    all_bytes.push_back(static_cast<char>(255 - i));
    ids.push_back(255 - i);
  }
  EXPECT_EQ(t->Decode(ids), all_bytes);
  for (const std::string& text : {std::string("Hello, world!\n\n  I'm here 12345"),
                                  std::string("na\xC3\xAFve \xF0\x9F\x90\xB6"),
                                  std::string("\xE6\x97\xA5\xE6\x9C\xAC\t<x>{}"),
                                  std::string(" trailing  "), std::string("nul\0byte", 8)}) {
    EXPECT_EQ(t->Decode(t->Encode(text, false, false)), text);
  }
  // As in llama.cpp, invalid UTF-8 is replaced (one U+FFFD per bad byte)
  // before byte-level encoding, so it does not survive a round trip.
  EXPECT_EQ(t->Decode(t->Encode("a\xFF\x80 b\xC3", false, false)),
            "a\xEF\xBF\xBD\xEF\xBF\xBD b\xEF\xBF\xBD");
}

TEST(BpeTokenizerTest, DecodeCleansSpacesForLlama3) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  auto llama3 = Build(b.vocab());
  b.vocab().pre = "qwen2";
  auto qwen2 = Build(b.vocab());
  const std::vector<int32_t> ids = {b.Id("he"), b.Id(" "), b.Id(","), b.Id(" "), b.Id("'"),
                                    b.Id("s"),  b.Id(" "), b.Id("'"), b.Id("t")};
  EXPECT_EQ(qwen2->Decode(ids), "he , 's 't");
  EXPECT_EQ(llama3->Decode(ids), "he,'s 't");
  // Encoding is unaffected.
  EXPECT_EQ(llama3->Encode("he ,", false, false), qwen2->Encode("he ,", false, false));
}

TEST(BpeTokenizerTest, UnknownSymbolsFallBackToSingleBytePiecesOrVanish) {
  BpeVocabBuilder b("llama3");
  b.vocab().pieces.resize(0x7F);  // keep only bytes 0x00..0x7E
  b.vocab().types.resize(0x7F);
  auto t = Build(b.vocab());
  // "é" is U+00E9 = C3 A9, spelled "Ã©"; neither symbol is a piece and llama.cpp
  // silently drops what has no single-byte piece either.
  EXPECT_THAT(t->Encode("a\xC3\xA9"
                        "b",
                        false, false),
              ElementsAre('a', 'b'));
}

TEST(BpeTokenizerTest, CreateRejectsBadMergesAndPreTokenizers) {
  BpeVocabBuilder b = SmallBpeVocab("llama3");
  b.vocab().merges.push_back("nospace");
  absl::Status s = Tokenizer::Create(b.vocab()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("merge 15 \"nospace\""));

  b = SmallBpeVocab("llama3");
  b.vocab().merges.push_back("he zzz");
  s = Tokenizer::Create(b.vocab()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"zzz\", which is not a piece"));

  b = SmallBpeVocab("default");
  EXPECT_EQ(Tokenizer::Create(b.vocab()).status().code(), absl::StatusCode::kUnimplemented);
  b = SmallBpeVocab("llama3");
  b.vocab().add_bos = true;
  b.vocab().bos_id = -1;
  EXPECT_EQ(Tokenizer::Create(b.vocab()).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringlm
