// The "llama" (SPM) tokenizer on tiny hand-built vocabularies, where every
// expected id sequence can be checked by hand, plus Create()'s validation.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kSp[] = "\xE2\x96\x81";  // U+2581

// Builder for small vocabularies: ids in insertion order.
class VocabBuilder {
 public:
  VocabBuilder& Add(std::string piece, float score = 0.0f, TokenType type = TokenType::kNormal) {
    vocab_.pieces.push_back(std::move(piece));
    vocab_.scores.push_back(score);
    vocab_.types.push_back(type);
    return *this;
  }
  // Adds "<0x00>".."<0xFF>" as byte tokens.
  VocabBuilder& AddBytes() {
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      Add(buf, 0.0f, TokenType::kByte);
    }
    return *this;
  }
  int32_t Id(const std::string& piece) const {
    for (size_t i = 0; i < vocab_.pieces.size(); ++i) {
      if (vocab_.pieces[i] == piece) return static_cast<int32_t>(i);
    }
    ADD_FAILURE() << "no piece " << piece;
    return -1;
  }
  Vocabulary& vocab() { return vocab_; }
  std::unique_ptr<Tokenizer> Build() const {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(vocab_);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : nullptr;
  }

 private:
  Vocabulary vocab_;
};

// <unk>=0 <s>=1 </s>=2, then pieces; no byte tokens unless AddBytes().
VocabBuilder Base() {
  VocabBuilder b;
  b.Add("<unk>", 0, TokenType::kUnknown).Add("<s>", 0, TokenType::kControl);
  b.Add("</s>", 0, TokenType::kControl);
  b.vocab().unk_id = 0;
  b.vocab().bos_id = 1;
  b.vocab().eos_id = 2;
  return b;
}

TEST(SpmTokenizerTest, MergesHighestScoreFirst) {
  VocabBuilder b = Base();
  b.Add("a").Add("b").Add("c").Add("ab", -2.0f).Add("bc", -1.0f);
  b.vocab().add_space_prefix = false;
  auto t = b.Build();
  // "bc" scores higher than "ab", so a + bc.
  EXPECT_THAT(t->Encode("abc", false, false), ElementsAre(b.Id("a"), b.Id("bc")));

  b.vocab().scores[b.Id("ab")] = -0.5f;
  t = b.Build();
  EXPECT_THAT(t->Encode("abc", false, false), ElementsAre(b.Id("ab"), b.Id("c")));
}

TEST(SpmTokenizerTest, MergesContinueOnMergedSymbols) {
  VocabBuilder b = Base();
  b.Add("a").Add("b").Add("c").Add("d").Add("ab", -1.0f).Add("cd", -2.0f).Add("abcd", -3.0f);
  b.Add("bc", -0.5f);  // best first merge, but leads to a dead end
  b.vocab().add_space_prefix = false;
  auto t = b.Build();
  // bc first (score -0.5) blocks ab and cd: a, bc, d.
  EXPECT_THAT(t->Encode("abcd", false, false), ElementsAre(b.Id("a"), b.Id("bc"), b.Id("d")));
  b.vocab().scores[b.Id("bc")] = -10.0f;
  t = b.Build();
  // ab, then cd, then abcd.
  EXPECT_THAT(t->Encode("abcd", false, false), ElementsAre(b.Id("abcd")));
}

TEST(SpmTokenizerTest, EqualScoresMergeLeftmostFirst) {
  VocabBuilder b = Base();
  b.Add("a").Add("aa", -1.0f).Add("b").Add("c").Add("ab", -1.0f).Add("bc", -1.0f);
  b.vocab().add_space_prefix = false;
  auto t = b.Build();
  EXPECT_THAT(t->Encode("aaa", false, false), ElementsAre(b.Id("aa"), b.Id("a")));
  EXPECT_THAT(t->Encode("abc", false, false), ElementsAre(b.Id("ab"), b.Id("c")));
}

TEST(SpmTokenizerTest, SpacePrefixAndEscaping) {
  VocabBuilder b = Base();
  b.Add(kSp).Add("a").Add("b").Add(std::string(kSp) + "a", -1.0f);
  auto t = b.Build();
  const int32_t sp = b.Id(kSp), a = b.Id("a"), bb = b.Id("b"), spa = b.Id(std::string(kSp) + "a");
  EXPECT_THAT(t->Encode("a b", true, false), ElementsAre(1, spa, sp, bb));
  EXPECT_THAT(t->Encode("a", false, false), ElementsAre(spa));
  EXPECT_THAT(t->Encode("", true, false), ElementsAre(1));
  EXPECT_THAT(t->Encode(" ", true, false), ElementsAre(1, sp, sp));

  b.vocab().add_space_prefix = false;
  t = b.Build();
  EXPECT_THAT(t->Encode("a b", true, false), ElementsAre(1, a, sp, bb));
  EXPECT_THAT(t->Encode(" a", true, false), ElementsAre(1, spa));
  EXPECT_EQ(t->Decode(std::vector<int32_t>{spa}), " a");  // no strip without the prefix rule
}

TEST(SpmTokenizerTest, AddBosAndEos) {
  VocabBuilder b = Base();
  b.Add(kSp).Add("a").Add(std::string(kSp) + "a", -1.0f);
  b.vocab().add_eos = true;
  auto t = b.Build();
  const int32_t spa = b.Id(std::string(kSp) + "a");
  EXPECT_THAT(t->Encode("a", true, false), ElementsAre(1, spa, 2));
  EXPECT_THAT(t->Encode("a", false, false), ElementsAre(spa));
  b.vocab().add_bos = false;
  t = b.Build();
  EXPECT_THAT(t->Encode("a", true, false), ElementsAre(spa, 2));
}

TEST(SpmTokenizerTest, ByteFallback) {
  VocabBuilder b = Base();
  b.AddBytes().Add("a").Add("\xC3\xA9");  // é
  b.vocab().add_space_prefix = false;
  auto t = b.Build();
  const int32_t a = b.Id("a");
  auto byte = [&](int v) { return 3 + v; };
  EXPECT_THAT(t->Encode("ad", false, false), ElementsAre(a, byte('d')));
  EXPECT_THAT(t->Encode("\xC3\xA9\xC3\xA8", false, false),
              ElementsAre(b.Id("\xC3\xA9"), byte(0xC3), byte(0xA8)));
  // As llama.cpp: a lead byte swallows the next byte(s) unvalidated, so the 'a'
  // after "\xC3" is part of a 2-byte symbol and comes out as a byte token.
  EXPECT_THAT(t->Encode("\xC3"
                        "a",
                        false, false),
              ElementsAre(byte(0xC3), byte('a')));
  // A sequence truncated by the end of the text.
  EXPECT_THAT(t->Encode("a\xE2", false, false), ElementsAre(a, byte(0xE2)));
  EXPECT_EQ(t->Decode(t->Encode("a\xE2\xC3"
                                "a",
                                false, false)),
            "a\xE2\xC3"
            "a");
}

TEST(SpmTokenizerTest, UnknownWithoutByteTokens) {
  VocabBuilder b = Base();
  b.Add("a").Add("b");
  b.vocab().add_space_prefix = false;
  auto t = b.Build();
  EXPECT_THAT(t->Encode("abz", false, false), ElementsAre(b.Id("a"), b.Id("b"), 0));
  // One unk per byte of a missing multi-byte character.
  EXPECT_THAT(t->Encode("\xC3\xA9", false, false), ElementsAre(0, 0));
}

TEST(SpmTokenizerTest, RawSingleBytePieceIsByteFallback) {
  // llama.cpp falls back to a one-byte piece when "<0xNN>" is missing, and
  // (here, unlike llama.cpp which throws) to unk when both are missing.
  VocabBuilder b = Base();
  b.Add("a").Add("\xC3");
  b.vocab().add_space_prefix = false;
  auto t = b.Build();
  EXPECT_THAT(t->Encode("a\xC3\xA9", false, false), ElementsAre(b.Id("a"), b.Id("\xC3"), 0));
}

TEST(SpmTokenizerTest, SpecialTokenPartition) {
  VocabBuilder b = Base();
  b.Add(kSp).Add("a").Add("b").Add("<").Add("s").Add(">").Add(std::string(kSp) + "a", -1.0f);
  auto t = b.Build();
  const int32_t sp = b.Id(kSp), spa = b.Id(std::string(kSp) + "a"), bb = b.Id("b");
  // Raw text after a special token gets the space prefix again.
  EXPECT_THAT(t->Encode("a<s>b", true, true), ElementsAre(1, spa, 1, sp, bb));
  EXPECT_THAT(t->Encode("a<s>", false, true), ElementsAre(spa, 1));
  EXPECT_THAT(t->Encode("</s><s>", false, true), ElementsAre(2, 1));
  EXPECT_THAT(t->Encode("<unk>", false, true), ElementsAre(0));
  // Without parse_special, control texts are plain characters.
  EXPECT_THAT(t->Encode("a<s>b", true, false),
              ElementsAre(1, spa, b.Id("<"), b.Id("s"), b.Id(">"), bb));
}

TEST(SpmTokenizerTest, SegmentsParseSpecialsOnlyInControlText) {
  VocabBuilder b = Base();
  b.Add(kSp).Add("a").Add("b").Add("<").Add("s").Add(">").Add("/").Add(std::string(kSp) + "a",
                                                                       -1.0f);
  auto t = b.Build();
  const int32_t sp = b.Id(kSp), spa = b.Id(std::string(kSp) + "a"), bb = b.Id("b");
  // Control text only: the same ids as Encode with parse_special.
  const std::vector<PromptSegment> control = {{"a<s>b", true}};
  EXPECT_EQ(t->EncodeSegments(control, true), t->Encode("a<s>b", true, true));
  // A control token's text inside content stays plain characters, and the
  // space prefix rule still sees one raw fragment across the segments.
  const std::vector<PromptSegment> mixed = {{"a", true}, {"<s>", false}, {"b</s>", true}};
  EXPECT_THAT(t->EncodeSegments(mixed, false),
              ElementsAre(spa, b.Id("<"), b.Id("s"), b.Id(">"), bb, 2));
  // Text that only straddles a content boundary is not a marker either.
  const std::vector<PromptSegment> straddle = {{"a<", true}, {"s", false}, {">b", true}};
  EXPECT_THAT(t->EncodeSegments(straddle, false),
              ElementsAre(spa, b.Id("<"), b.Id("s"), b.Id(">"), bb));
  // Without specials in content, segments tokenize like the joined text.
  const std::vector<PromptSegment> plain = {{"<s>", true}, {"a b", false}, {"</s>", true}};
  EXPECT_EQ(t->EncodeSegments(plain, true), t->Encode("<s>a b</s>", true, true));
  EXPECT_THAT(t->EncodeSegments(plain, false), ElementsAre(1, spa, sp, bb, 2));
  // A rejected occurrence does not hide a later one in control text.
  const std::vector<PromptSegment> later = {{"</s>", false}, {"</s>", true}};
  const std::vector<int32_t> later_ids = t->EncodeSegments(later, false);
  EXPECT_EQ(later_ids.back(), 2);
  EXPECT_EQ(std::count(later_ids.begin(), later_ids.end(), 2), 1);
  EXPECT_THAT(t->EncodeSegments({}, true), ElementsAre(1));
}

TEST(SpmTokenizerTest, IdsSegmentsSplitRunsAndTheNextRunContinuesWithoutDummySpace) {
  VocabBuilder b = Base();
  b.Add(kSp).Add("a").Add("b").Add(std::string(kSp) + "a", -1.0f).Add("ab", -2.0f);
  b.vocab().add_eos = true;
  auto t = b.Build();
  const int32_t sp = b.Id(kSp), a = b.Id("a"), bb = b.Id("b"), spa = b.Id(std::string(kSp) + "a");
  // Joined, "a" + "ab" would be one fragment with one dummy space:
  // "▁a", "ab". With "ab" given as ids [a, b], the text before is its own run
  // (BOS, dummy space) and the text after continues (no space, no second BOS).
  const std::vector<PromptSegment> split = {{"a", true}, {"ab", false, {a, bb}}, {"a b", true}};
  EXPECT_THAT(t->EncodeSegments(split, true), ElementsAre(1, spa, a, bb, a, sp, bb, 2));
  EXPECT_THAT(t->EncodeSegments(split, false), ElementsAre(spa, a, bb, a, sp, bb));
  // Ids first or last: BOS still first, EOS still last.
  EXPECT_THAT(t->EncodeSegments(std::vector<PromptSegment>{{"ab", false, {a, bb}}}, true),
              ElementsAre(1, a, bb, 2));
  const std::vector<PromptSegment> two = {{"", false, {bb}}, {"", true}, {"", false, {a}}};
  EXPECT_THAT(t->EncodeSegments(two, true), ElementsAre(1, bb, a, 2));
  // After a special token in the continuation the usual dummy space returns.
  const std::vector<PromptSegment> special = {{"x", false, {a}}, {"</s>a", true}};
  EXPECT_THAT(t->EncodeSegments(special, false), ElementsAre(a, 2, spa));
  // Without ids: unchanged.
  EXPECT_EQ(t->EncodeSegments(std::vector<PromptSegment>{{"aab", true}}, true),
            t->Encode("aab", true, true));
}

TEST(SpmTokenizerTest, UserDefinedTokensLongestFirstEvenWithoutParseSpecial) {
  VocabBuilder b = Base();
  b.Add(kSp).Add("x").Add("y").Add("z");
  b.Add("xy", 0, TokenType::kUserDefined).Add("xyz", 0, TokenType::kUserDefined);
  b.Add(std::string(kSp) + "q", 0, TokenType::kUserDefined);
  b.vocab().add_space_prefix = false;
  auto t = b.Build();
  EXPECT_THAT(t->Encode("xyzxy", false, false), ElementsAre(b.Id("xyz"), b.Id("xy")));
  // User-defined pieces are matched against the raw (unescaped) text and
  // printed verbatim.
  EXPECT_EQ(t->TokenToPiece(b.Id(std::string(kSp) + "q")), std::string(kSp) + "q");
  EXPECT_EQ(t->TokenToPiece(b.Id("xy")), "xy");
}

TEST(SpmTokenizerTest, ControlLookingTokensBecomeControlAndEndOfGeneration) {
  VocabBuilder b = Base();
  b.Add("a").Add("<|im_end|>").Add("<PRE>");
  b.vocab().add_space_prefix = false;
  auto t = b.Build();
  const int32_t im_end = b.Id("<|im_end|>");
  EXPECT_TRUE(t->IsEndOfGeneration(im_end));
  EXPECT_TRUE(t->IsEndOfGeneration(2));
  EXPECT_FALSE(t->IsEndOfGeneration(b.Id("<PRE>")));
  EXPECT_EQ(t->TokenToPiece(im_end), "");
  EXPECT_THAT(t->Encode("a<|im_end|>", false, true), ElementsAre(b.Id("a"), im_end));
  EXPECT_THAT(t->Encode("<PRE>", false, true), ElementsAre(b.Id("<PRE>")));
}

TEST(SpmTokenizerTest, TokenToPieceByType) {
  VocabBuilder b = Base();
  b.AddBytes().Add(std::string(kSp) + "hi" + kSp).Add("gone", 0, TokenType::kUnused);
  b.Add("und", 0, TokenType::kUndefined);
  auto t = b.Build();
  EXPECT_EQ(t->TokenToPiece(3 + 0xE9), "\xE9");
  EXPECT_EQ(t->TokenToPiece(b.Id(std::string(kSp) + "hi" + kSp)), " hi ");
  EXPECT_EQ(t->TokenToPiece(b.Id("gone")), "");
  EXPECT_EQ(t->TokenToPiece(b.Id("und")), "");
  EXPECT_EQ(t->TokenToPiece(1), "");
  EXPECT_EQ(t->TokenToPiece(0), "");
  // Decode strips one leading space of the first piece only.
  const int32_t hi = b.Id(std::string(kSp) + "hi" + kSp);
  EXPECT_EQ(t->Decode(std::vector<int32_t>{hi, hi}), "hi  hi ");
  EXPECT_EQ(t->Decode(std::vector<int32_t>{1, hi}), " hi ");
}

// --- Create() validation ---------------------------------------------------

absl::Status CreateStatus(const Vocabulary& vocab) { return Tokenizer::Create(vocab).status(); }

Vocabulary Valid() {
  VocabBuilder b = Base();
  b.Add("a");
  return b.vocab();
}

TEST(SpmTokenizerCreateTest, AcceptsValidAndFillsDefaults) {
  Vocabulary v = Valid();
  v.scores.clear();
  v.types.clear();
  v.pieces.push_back("");
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(v);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocabulary().scores.size(), v.pieces.size());
  EXPECT_EQ((*t)->vocabulary().types[1], TokenType::kNormal);
  EXPECT_EQ((*t)->vocabulary().pieces[4], "[EMPTY_4]");
}

TEST(SpmTokenizerCreateTest, RejectsMalformedVocabularies) {
  struct Case {
    std::string name;
    void (*mutate)(Vocabulary&);
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"empty", [](Vocabulary& v) { v = Vocabulary{}; }, absl::StatusCode::kInvalidArgument,
       "no pieces"},
      {"scores", [](Vocabulary& v) { v.scores.pop_back(); }, absl::StatusCode::kInvalidArgument,
       "4 pieces but 3 scores"},
      {"types", [](Vocabulary& v) { v.types.push_back(TokenType::kNormal); },
       absl::StatusCode::kInvalidArgument, "4 pieces but 5 token types"},
      {"bos range", [](Vocabulary& v) { v.bos_id = 4; }, absl::StatusCode::kInvalidArgument,
       "bos_id 4 is out of range"},
      {"eos range", [](Vocabulary& v) { v.eos_id = -2; }, absl::StatusCode::kInvalidArgument,
       "eos_id -2 is out of range"},
      {"pad range", [](Vocabulary& v) { v.pad_id = 100; }, absl::StatusCode::kInvalidArgument,
       "pad_id 100"},
      {"add_bos", [](Vocabulary& v) { v.bos_id = -1; }, absl::StatusCode::kInvalidArgument,
       "add_bos but has no bos_id"},
      {"add_eos",
       [](Vocabulary& v) {
         v.add_eos = true;
         v.eos_id = -1;
       },
       absl::StatusCode::kInvalidArgument, "add_eos but has no eos_id"},
      {"duplicate", [](Vocabulary& v) { v.pieces[3] = "<s>"; }, absl::StatusCode::kInvalidArgument,
       "tokens 1 and 3 have the same piece \"<s>\""},
      {"bad byte piece", [](Vocabulary& v) { v.types[3] = TokenType::kByte; },
       absl::StatusCode::kInvalidArgument, "byte type but its piece \"a\""},
      {"no byte fallback", [](Vocabulary& v) { v.unk_id = -1; }, absl::StatusCode::kInvalidArgument,
       "no token for byte 0x00"},
      {"bad type", [](Vocabulary& v) { v.types[3] = static_cast<TokenType>(9); },
       absl::StatusCode::kInvalidArgument, "invalid token type 9"},
      {"nan score", [](Vocabulary& v) { v.scores[3] = std::nanf(""); },
       absl::StatusCode::kInvalidArgument, "score of token 3 is NaN"},
      {"bert", [](Vocabulary& v) { v.model = "bert"; }, absl::StatusCode::kUnimplemented,
       "\"bert\" is not implemented"},
      {"gpt2 without a known pre-tokenizer", [](Vocabulary& v) { v.model = "gpt2"; },
       absl::StatusCode::kUnimplemented, "pre-tokenizer \"\" (tokenizer.ggml.pre) is not"},
      {"unknown model", [](Vocabulary& v) { v.model = "wordpiece?"; },
       absl::StatusCode::kInvalidArgument, "unknown tokenizer model"},
  };
  ASSERT_TRUE(Tokenizer::Create(Valid()).ok());
  for (const Case& c : cases) {
    Vocabulary v = Valid();
    c.mutate(v);
    const absl::Status status = CreateStatus(v);
    EXPECT_EQ(status.code(), c.code) << c.name << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.name;
  }
}

}  // namespace
}  // namespace ringlm
