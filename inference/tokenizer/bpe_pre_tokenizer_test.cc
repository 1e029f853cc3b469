// The byte-level pre-tokenizer splits, hand-checked against the regexes
// llama.cpp uses for tokenizer.ggml.pre = llama3 / qwen2 / gpt-2 /
// deepseek-v3 / deepseek-llm / tekken.

#include "inference/tokenizer/bpe_pre_tokenizer.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/bpe_test_vocab.h"
#include "inference/tokenizer/unicode.h"

namespace ringlm::tokenizer_internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Pre-tokens as raw text (undoing the byte-level spelling).
std::vector<std::string> Split(const std::string& text, PreTokenizerKind kind) {
  std::vector<std::string> raw;
  for (const std::string& word : PreTokenize(text, kind)) {
    std::string bytes;
    for (uint32_t cpt : DecodeUtf8Lenient(word)) {
      const int b = CodepointToByte(cpt);
      EXPECT_GE(b, 0) << "pre-token is not byte-level: " << word;
      bytes.push_back(static_cast<char>(b));
    }
    raw.push_back(bytes);
  }
  return raw;
}

constexpr PreTokenizerKind kLlama3 = PreTokenizerKind::kLlama3;
constexpr PreTokenizerKind kQwen2 = PreTokenizerKind::kQwen2;
constexpr PreTokenizerKind kGpt2 = PreTokenizerKind::kGpt2;
constexpr PreTokenizerKind kDeepseekV3 = PreTokenizerKind::kDeepseekV3;
constexpr PreTokenizerKind kDeepseekLlm = PreTokenizerKind::kDeepseekLlm;
constexpr PreTokenizerKind kTekken = PreTokenizerKind::kTekken;

TEST(ByteLevelTest, BytesToUnicodeMapping) {
  EXPECT_EQ(ByteToCodepoint(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(ByteToCodepoint('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(ByteToCodepoint(0x00), 0x100u);
  EXPECT_EQ(ByteToCodepoint('A'), 0x41u);
  EXPECT_EQ(ByteToCodepoint(0xAD), 0x143u);  // soft hyphen is the last remapped byte
  EXPECT_EQ(ByteToCodepoint(0xFF), 0xFFu);
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(CodepointToByte(ByteToCodepoint(static_cast<uint8_t>(b))), b);
    std::string utf8;
    AppendUtf8(ByteToCodepoint(static_cast<uint8_t>(b)), utf8);
    EXPECT_EQ(utf8, testing::ByteSymbol(static_cast<uint8_t>(b)));
  }
  EXPECT_EQ(CodepointToByte(0x20), -1);
  EXPECT_EQ(CodepointToByte(0x144), -1);
  EXPECT_EQ(CodepointToByte(0x20AC), -1);
}

TEST(UnicodeTest, Classes) {
  EXPECT_EQ(ClassifyCodepoint('a'), CodepointClass::kLetter);
  EXPECT_EQ(ClassifyCodepoint('7'), CodepointClass::kNumber);
  EXPECT_EQ(ClassifyCodepoint('\t'), CodepointClass::kWhitespace);
  EXPECT_EQ(ClassifyCodepoint('_'), CodepointClass::kPunctuation);
  EXPECT_EQ(ClassifyCodepoint('$'), CodepointClass::kSymbol);
  EXPECT_EQ(ClassifyCodepoint('~'), CodepointClass::kSymbol);          // Sm
  EXPECT_EQ(ClassifyCodepoint(0x7F), CodepointClass::kOther);          // DEL (Cc)
  EXPECT_EQ(ClassifyCodepoint(0xE9), CodepointClass::kLetter);         // é
  EXPECT_EQ(ClassifyCodepoint(0x3B1), CodepointClass::kLetter);        // α
  EXPECT_EQ(ClassifyCodepoint(0x416), CodepointClass::kLetter);        // Ж
  EXPECT_EQ(ClassifyCodepoint(0x5D0), CodepointClass::kLetter);        // א
  EXPECT_EQ(ClassifyCodepoint(0x628), CodepointClass::kLetter);        // ب
  EXPECT_EQ(ClassifyCodepoint(0x915), CodepointClass::kLetter);        // क
  EXPECT_EQ(ClassifyCodepoint(0x93F), CodepointClass::kMark);          // ि (vowel sign, Mc)
  EXPECT_EQ(ClassifyCodepoint(0x966), CodepointClass::kNumber);        // ०
  EXPECT_EQ(ClassifyCodepoint(0x663), CodepointClass::kNumber);        // ٣
  EXPECT_EQ(ClassifyCodepoint(0x3042), CodepointClass::kLetter);       // あ
  EXPECT_EQ(ClassifyCodepoint(0x30AB), CodepointClass::kLetter);       // カ
  EXPECT_EQ(ClassifyCodepoint(0x65E5), CodepointClass::kLetter);       // 日
  EXPECT_EQ(ClassifyCodepoint(0xAC00), CodepointClass::kLetter);       // 가
  EXPECT_EQ(ClassifyCodepoint(0x20000), CodepointClass::kLetter);      // CJK ext. B
  EXPECT_EQ(ClassifyCodepoint(0xB2), CodepointClass::kNumber);         // ²
  EXPECT_EQ(ClassifyCodepoint(0x2167), CodepointClass::kNumber);       // Ⅷ
  EXPECT_EQ(ClassifyCodepoint(0x301), CodepointClass::kMark);          // combining acute
  EXPECT_EQ(ClassifyCodepoint(0x20DD), CodepointClass::kMark);         // enclosing circle (Me)
  EXPECT_EQ(ClassifyCodepoint(0x3001), CodepointClass::kPunctuation);  // 、
  EXPECT_EQ(ClassifyCodepoint(0xAB), CodepointClass::kPunctuation);    // « (Pi)
  EXPECT_EQ(ClassifyCodepoint(0x20AC), CodepointClass::kSymbol);       // € (Sc)
  EXPECT_EQ(ClassifyCodepoint(0xFF5E), CodepointClass::kSymbol);       // ～ (Sm)
  EXPECT_EQ(ClassifyCodepoint(0xFFFD), CodepointClass::kSymbol);       // So
  EXPECT_EQ(ClassifyCodepoint(0xFEFF), CodepointClass::kOther);        // BOM (Cf)
  EXPECT_EQ(ClassifyCodepoint(0xE000), CodepointClass::kOther);        // private use
  EXPECT_EQ(ClassifyCodepoint(0x1F44B), CodepointClass::kSymbol);      // 👋 (So)
  EXPECT_EQ(ClassifyCodepoint(0xA0), CodepointClass::kWhitespace);
  EXPECT_EQ(ClassifyCodepoint(0x3000), CodepointClass::kWhitespace);
  EXPECT_EQ(ClassifyCodepoint(0x2028), CodepointClass::kWhitespace);
  EXPECT_EQ(ClassifyCodepoint(0x200B),
            CodepointClass::kOther);  // zero width space: not White_Space
  EXPECT_EQ(ClassifyCodepoint(0x110000), CodepointClass::kOther);
}

TEST(UnicodeTest, LetterCategories) {
  EXPECT_EQ(ClassifyLetter('A'), LetterCategory::kLu);
  EXPECT_EQ(ClassifyLetter('z'), LetterCategory::kLl);
  EXPECT_EQ(ClassifyLetter(0xDF), LetterCategory::kLl);          // ß
  EXPECT_EQ(ClassifyLetter(0x1C5), LetterCategory::kLt);         // ǅ
  EXPECT_EQ(ClassifyLetter(0x2B0), LetterCategory::kLm);         // ʰ
  EXPECT_EQ(ClassifyLetter(0x3005), LetterCategory::kLm);        // 々
  EXPECT_EQ(ClassifyLetter(0xAA), LetterCategory::kLo);          // ª
  EXPECT_EQ(ClassifyLetter(0x65E5), LetterCategory::kLo);        // 日
  EXPECT_EQ(ClassifyLetter(0x3042), LetterCategory::kLo);        // あ
  EXPECT_EQ(ClassifyLetter(0x39A), LetterCategory::kLu);         // Κ
  EXPECT_EQ(ClassifyLetter(0x3BA), LetterCategory::kLl);         // κ
  EXPECT_EQ(ClassifyLetter(0x416), LetterCategory::kLu);         // Ж
  EXPECT_EQ(ClassifyLetter(0x436), LetterCategory::kLl);         // ж
  EXPECT_EQ(ClassifyLetter(0x301), LetterCategory::kNotLetter);  // combining acute (Mn)
  EXPECT_EQ(ClassifyLetter('7'), LetterCategory::kNotLetter);
  EXPECT_EQ(ClassifyLetter(0x110000), LetterCategory::kNotLetter);
  // Both tables come from the same generator: the letters are the same.
  for (uint32_t c = 0; c <= 0x10FFFF; ++c) {
    ASSERT_EQ(ClassifyLetter(c) != LetterCategory::kNotLetter,
              ClassifyCodepoint(c) == CodepointClass::kLetter)
        << "U+" << std::hex << c;
  }
}

TEST(UnicodeTest, LenientDecodingLikeLlamaCpp) {
  EXPECT_THAT(DecodeUtf8Lenient("a\xC3\xA9"), ElementsAre('a', 0xE9));
  // A lone continuation byte, a truncated sequence and 0xFF each become
  // U+FFFD and decoding resumes at the next byte.
  EXPECT_THAT(DecodeUtf8Lenient("\x80"
                                "b\xE2\x82"
                                "c\xFF"),
              ElementsAre(0xFFFD, 'b', 0xFFFD, 0xFFFD, 'c', 0xFFFD));
  EXPECT_THAT(DecodeUtf8Lenient("\xF0\x9F\x91\x8B"), ElementsAre(0x1F44B));
  EXPECT_THAT(DecodeUtf8Lenient("\xC0\x80"), ElementsAre(0));  // overlong accepted, as llama.cpp
  EXPECT_THAT(DecodeUtf8Lenient("\xF4\x90\x80\x80"), ElementsAre(0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD));
}

TEST(PreTokenizerTest, Llama3Contractions) {
  EXPECT_THAT(Split("I'm you'll", kLlama3), ElementsAre("I", "'m", " you", "'ll"));
  EXPECT_THAT(Split("I'M WE'LL they'Re", kLlama3),
              ElementsAre("I", "'M", " WE", "'LL", " they", "'Re"));
  // Not a contraction: the apostrophe leads the following letters.
  EXPECT_THAT(Split("rock'n'roll", kLlama3), ElementsAre("rock", "'n", "'roll"));
}

TEST(PreTokenizerTest, DigitsInGroupsOfThreeForLlama3AndSingleForQwen2) {
  EXPECT_THAT(Split("12345", kLlama3), ElementsAre("123", "45"));
  EXPECT_THAT(Split("12345", kQwen2), ElementsAre("1", "2", "3", "4", "5"));
  EXPECT_THAT(Split("abc1234def", kLlama3), ElementsAre("abc", "123", "4", "def"));
  EXPECT_THAT(Split(" 42", kLlama3), ElementsAre(" ", "42"));
  EXPECT_THAT(Split("x\xC2\xB2\xD9\xA3", kLlama3), ElementsAre("x", "\xC2\xB2\xD9\xA3"));  // x²٣
}

TEST(PreTokenizerTest, PunctuationSpacesAndNewlines) {
  EXPECT_THAT(Split("Hello,  world!!\n\nok", kLlama3),
              ElementsAre("Hello", ",", " ", " world", "!!\n\n", "ok"));
  EXPECT_THAT(Split("a \n\n b", kLlama3), ElementsAre("a", " \n\n", " b"));
  EXPECT_THAT(Split("x   ", kLlama3), ElementsAre("x", "   "));
  EXPECT_THAT(Split("   word", kLlama3), ElementsAre("  ", " word"));
  EXPECT_THAT(Split("a ... b", kLlama3), ElementsAre("a", " ...", " b"));
  EXPECT_THAT(Split("(x)", kLlama3), ElementsAre("(x", ")"));
  EXPECT_THAT(Split("\r\n\tfoo", kLlama3), ElementsAre("\r\n", "\tfoo"));
  EXPECT_THAT(Split("", kLlama3), IsEmpty());
  // qwen2 differs from llama3 only in digits.
  EXPECT_THAT(Split("Hello,  world!!\n\nok", kQwen2),
              ElementsAre("Hello", ",", " ", " world", "!!\n\n", "ok"));
}

TEST(PreTokenizerTest, UnicodeLettersMarksAndEmoji) {
  EXPECT_THAT(
      Split("na\xC3\xAFve \xD0\x9F\xD1\x80\xD0\xB8 \xE6\x97\xA5\xE6\x9C\xAC", kLlama3),
      ElementsAre("na\xC3\xAFve", " \xD0\x9F\xD1\x80\xD0\xB8", " \xE6\x97\xA5\xE6\x9C\xAC"));
  // A combining mark is not a letter: it ends "e" and leads "x".
  EXPECT_THAT(Split("e\xCC\x81x", kLlama3), ElementsAre("e", "\xCC\x81x"));
  // Emoji are "other": a space joins them with following punctuation.
  EXPECT_THAT(Split("hi \xF0\x9F\x91\x8B\xF0\x9F\x91\x8B!", kLlama3),
              ElementsAre("hi", " \xF0\x9F\x91\x8B\xF0\x9F\x91\x8B!"));
  // No-break space is whitespace.
  EXPECT_THAT(Split("a\xC2\xA0\xC2\xA0"
                    "b",
                    kLlama3),
              ElementsAre("a", "\xC2\xA0",
                          "\xC2\xA0"
                          "b"));
}

TEST(PreTokenizerTest, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_THAT(Split("a\xFF"
                    "b",
                    kLlama3),
              ElementsAre("a",
                          "\xEF\xBF\xBD"
                          "b"));
}

TEST(PreTokenizerTest, Gpt2) {
  EXPECT_THAT(Split("I'm I'M", kGpt2), ElementsAre("I", "'m", " I", "'", "M"));
  EXPECT_THAT(Split("Hello 12345 world!!", kGpt2), ElementsAre("Hello", " 12345", " world", "!!"));
  EXPECT_THAT(Split("  x  ", kGpt2), ElementsAre(" ", " x", "  "));
  EXPECT_THAT(Split("a\n\nb", kGpt2), ElementsAre("a", "\n", "\n", "b"));
}

// DeepSeek V3: \p{N}{1,3}, then CJK/kana runs, then the word regex, each
// over every piece the one before left.
TEST(DeepseekV3PreTokenizerTest, DigitsInRunsOfThree) {
  EXPECT_THAT(Split("12345678", kDeepseekV3), ElementsAre("123", "456", "78"));
  EXPECT_THAT(Split("abc1234def", kDeepseekV3), ElementsAre("abc", "123", "4", "def"));
  EXPECT_THAT(Split("3.14", kDeepseekV3), ElementsAre("3", ".", "14"));
  EXPECT_THAT(Split("x\xC2\xB2\xD9\xA3", kDeepseekV3),
              ElementsAre("x", "\xC2\xB2\xD9\xA3"));  // x²٣
  // The space before a number is a piece of its own: (?!\S) looks only
  // within the piece " ", where it is at the end.
  EXPECT_THAT(Split("a  12", kDeepseekV3), ElementsAre("a", "  ", "12"));
  EXPECT_THAT(Split("  1", kLlama3), ElementsAre(" ", " ", "1"));
  EXPECT_THAT(Split("  1", kDeepseekV3), ElementsAre("  ", "1"));
}

TEST(DeepseekV3PreTokenizerTest, CjkAndKanaRuns) {
  // 我想在apple工作
  EXPECT_THAT(
      Split("\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8"
            "apple\xE5\xB7\xA5\xE4\xBD\x9C",
            kDeepseekV3),
      ElementsAre("\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8", "apple", "\xE5\xB7\xA5\xE4\xBD\x9C"));
  // 日本のテキスト한국어: kanji, hiragana and katakana form one run; hangul
  // is not in the class and falls to the word regex.
  EXPECT_THAT(Split("\xE6\x97\xA5\xE6\x9C\xAC\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9"
                    "\xE3\x83\x88\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
                    kDeepseekV3),
              ElementsAre("\xE6\x97\xA5\xE6\x9C\xAC\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9"
                          "\xE3\x83\x88",
                          "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4"));
  // A space does not join a CJK run; U+9FA6 (past 龥) is only a letter.
  EXPECT_THAT(Split(" \xE4\xB8\xAD\xE6\x96\x87 ", kDeepseekV3),
              ElementsAre(" ", "\xE4\xB8\xAD\xE6\x96\x87", " "));
  EXPECT_THAT(Split("\xE4\xB8\x80\xE9\xBE\xA6x", kDeepseekV3),
              ElementsAre("\xE4\xB8\x80", "\xE9\xBE\xA6x"));
  // 全角、: the ideographic comma is punctuation, outside the class.
  EXPECT_THAT(Split("\xE5\x85\xA8\xE8\xA7\x92\xE3\x80\x81", kDeepseekV3),
              ElementsAre("\xE5\x85\xA8\xE8\xA7\x92", "\xE3\x80\x81"));
}

TEST(DeepseekV3PreTokenizerTest, AsciiPunctuationLeadsAsciiLetters) {
  EXPECT_THAT(Split("-hello", kDeepseekV3), ElementsAre("-hello"));
  EXPECT_THAT(Split("(x)", kDeepseekV3), ElementsAre("(x", ")"));
  EXPECT_THAT(Split("don't", kDeepseekV3), ElementsAre("don", "'t"));
  EXPECT_THAT(Split("#include <stdio.h>", kDeepseekV3),
              ElementsAre("#include", " <", "stdio", ".h", ">"));
  // Only ASCII letters follow: the first alternative takes "-h" and stops.
  EXPECT_THAT(Split("-h\xC3\xA9llo", kDeepseekV3), ElementsAre("-h", "\xC3\xA9llo"));
  // A punctuation run is taken whole before the next position is tried.
  EXPECT_THAT(Split("..abc", kDeepseekV3), ElementsAre("..", "abc"));
  // Non-ASCII punctuation does not lead letters.
  EXPECT_THAT(Split("\xC2\xABhi\xC2\xBB", kDeepseekV3), ElementsAre("\xC2\xAB", "hi", "\xC2\xBB"));
}

TEST(DeepseekV3PreTokenizerTest, LettersWithCombiningMarks) {
  // Marks join letters (unlike Llama 3's \p{L}+).
  EXPECT_THAT(Split("e\xCC\x81x", kDeepseekV3), ElementsAre("e\xCC\x81x"));
  EXPECT_THAT(Split("e\xCC\x81x", kLlama3), ElementsAre("e", "\xCC\x81x"));
  EXPECT_THAT(Split(" \xE0\xA4\x95\xE0\xA4\xBF", kDeepseekV3),
              ElementsAre(" \xE0\xA4\x95\xE0\xA4\xBF"));  // " कि"
  EXPECT_THAT(Split("\xCC\x81", kDeepseekV3), ElementsAre("\xCC\x81"));
  EXPECT_THAT(Split("1\xCC\x81", kDeepseekV3), ElementsAre("1", "\xCC\x81"));
  // Punctuation is not a prefix of letters or marks.
  EXPECT_THAT(Split("!\xCC\x81", kDeepseekV3), ElementsAre("!", "\xCC\x81"));
}

TEST(DeepseekV3PreTokenizerTest, PunctuationRunsTakeTrailingNewlines) {
  EXPECT_THAT(Split("Hello!!\n\nok", kDeepseekV3), ElementsAre("Hello", "!!\n\n", "ok"));
  EXPECT_THAT(Split("a ... b", kDeepseekV3), ElementsAre("a", " ...", " b"));
  EXPECT_THAT(Split(",\r\n", kDeepseekV3), ElementsAre(",\r\n"));
  EXPECT_THAT(Split("!!\n \nok", kDeepseekV3), ElementsAre("!!\n", " \n", "ok"));
  // ASCII '~' is a symbol; emoji are symbols; 😶 U+200D 🌫 U+FE0F: the
  // joiner (Cf) matches nothing and stays a piece of its own.
  EXPECT_THAT(Split("a ~~", kDeepseekV3), ElementsAre("a", " ~~"));
  EXPECT_THAT(Split("\xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F", kDeepseekV3),
              ElementsAre("\xF0\x9F\x98\xB6", "\xE2\x80\x8D", "\xF0\x9F\x8C\xAB", "\xEF\xB8\x8F"));
  EXPECT_THAT(Split("\xF0\x9F\x9A\x80 (x) \xE2\x9C\x85", kDeepseekV3),
              ElementsAre("\xF0\x9F\x9A\x80", " (", "x", ")", " \xE2\x9C\x85"));
}

TEST(DeepseekV3PreTokenizerTest, Whitespace) {
  EXPECT_THAT(Split("x   ", kDeepseekV3), ElementsAre("x", "   "));
  EXPECT_THAT(Split("   word", kDeepseekV3), ElementsAre("  ", " word"));
  EXPECT_THAT(Split("a \n\n b", kDeepseekV3), ElementsAre("a", " \n\n", " b"));
  EXPECT_THAT(Split(" \n \n\n  x", kDeepseekV3), ElementsAre(" \n \n\n", " ", " x"));
  EXPECT_THAT(Split("a\t\tb", kDeepseekV3), ElementsAre("a", "\t", "\tb"));
  EXPECT_THAT(Split("\n", kDeepseekV3), ElementsAre("\n"));
  // Any non-newline, non-letter, non-punctuation code point may lead
  // letters, so no-break space does.
  EXPECT_THAT(Split("a \xC2\xA0"
                    "b",
                    kDeepseekV3),
              ElementsAre("a", " ",
                          "\xC2\xA0"
                          "b"));
  // Controls match nothing: a run of them is one piece, the last one before
  // letters leads them.
  EXPECT_THAT(Split("a\x01\x02"
                    "b",
                    kDeepseekV3),
              ElementsAre("a", "\x01",
                          "\x02"
                          "b"));
  EXPECT_THAT(Split("\x01\x02", kDeepseekV3), ElementsAre("\x01\x02"));
}

TEST(DeepseekV3PreTokenizerTest, MixedScripts) {
  EXPECT_THAT(Split("\xC3\x9Cn\xC3\xAF: Stra\xC3\x9F"
                    "e, \xD0\xBC\xD0\xB8\xD1\x80",
                    kDeepseekV3),
              ElementsAre("\xC3\x9Cn\xC3\xAF", ":",
                          " Stra\xC3\x9F"
                          "e",
                          ",", " \xD0\xBC\xD0\xB8\xD1\x80"));  // Ünï: Straße, мир
  // Full-width letters are letters; the hyphen leads ASCII letters.
  EXPECT_THAT(Split("\xEF\xBC\xA1\xEF\xBD\x82 full-width", kDeepseekV3),
              ElementsAre("\xEF\xBC\xA1\xEF\xBD\x82", " full", "-width"));
}

TEST(DeepseekV3PreTokenizerTest, EmptyAndInvalidUtf8) {
  EXPECT_THAT(Split("", kDeepseekV3), IsEmpty());
  // Each bad byte is U+FFFD, a symbol, so it stands apart from letters.
  EXPECT_THAT(Split("a\xFF"
                    "b",
                    kDeepseekV3),
              ElementsAre("a", "\xEF\xBF\xBD", "b"));
  EXPECT_THAT(Split("1\xC3"
                    "2",
                    kDeepseekV3),
              ElementsAre("1", "\xEF\xBF\xBD", "2"));
}

// DeepSeek LLM / V2: [\r\n], cased letters, ASCII/full-width punctuation
// (and ASCII letters), trailing whitespace, CJK and more, then numbers.
TEST(DeepseekLlmPreTokenizerTest, NewlinesAndCasedLetters) {
  EXPECT_THAT(Split("Hello world\nfoo", kDeepseekLlm), ElementsAre("Hello", " world", "\n", "foo"));
  EXPECT_THAT(Split("a\r\nb", kDeepseekLlm), ElementsAre("a", "\r", "\n", "b"));
  EXPECT_THAT(Split("\n\n", kDeepseekLlm), ElementsAre("\n", "\n"));
  // Hebrew is not in the letter class: " שלום" is what lies between matches.
  EXPECT_THAT(Split("a \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D b", kDeepseekLlm),
              ElementsAre("a", " \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D", " b"));
  EXPECT_THAT(
      Split("\xCE\x95\xCE\xBB\xCE\xBB\xCE\xAC \xD0\xBC\xD0\xB8\xD1\x80", kDeepseekLlm),
      ElementsAre("\xCE\x95\xCE\xBB\xCE\xBB\xCE\xAC", " \xD0\xBC\xD0\xB8\xD1\x80"));  // Ελλά мир
}

TEST(DeepseekLlmPreTokenizerTest, PunctuationRegexAlsoSplitsLetterPieces) {
  EXPECT_THAT(Split("Hi, there!", kDeepseekLlm), ElementsAre("Hi", ",", " there", "!"));
  EXPECT_THAT(Split("(x)", kDeepseekLlm), ElementsAre("(", "x", ")"));
  EXPECT_THAT(Split("don't stop", kDeepseekLlm), ElementsAre("don", "'", "t", " stop"));
  // Regex 3's :-~ holds the ASCII letters, and it runs over "héllo" too.
  EXPECT_THAT(Split("h\xC3\xA9llo", kDeepseekLlm), ElementsAre("h", "\xC3\xA9", "llo"));
  // Full-width ！？ and the quotes ‘’.
  EXPECT_THAT(Split(" \xEF\xBC\x81\xEF\xBC\x9F", kDeepseekLlm),
              ElementsAre(" \xEF\xBC\x81\xEF\xBC\x9F"));
  EXPECT_THAT(Split("\xE2\x80\x98q\xE2\x80\x99", kDeepseekLlm),
              ElementsAre("\xE2\x80\x98", "q", "\xE2\x80\x99"));
  EXPECT_THAT(Split("\xEF\xBC\xA1\xEF\xBD\x82 full-width", kDeepseekLlm),
              ElementsAre("\xEF\xBC\xA1\xEF\xBD\x82", " full", "-", "width"));
}

TEST(DeepseekLlmPreTokenizerTest, TrailingWhitespace) {
  EXPECT_THAT(Split("ab  ", kDeepseekLlm), ElementsAre("ab", "  "));
  EXPECT_THAT(Split("ab  cd", kDeepseekLlm), ElementsAre("ab", " ", " cd"));
  EXPECT_THAT(Split("x \n", kDeepseekLlm), ElementsAre("x", " ", "\n"));
  // Only \s+$ splits trailing spaces off text no other regex matches (here
  // Hebrew); spaces inside it stay.
  EXPECT_THAT(Split("a \xD7\xA9\xD7\x9C  ", kDeepseekLlm),
              ElementsAre("a", " \xD7\xA9\xD7\x9C", "  "));
  EXPECT_THAT(Split("\xD7\xA9\xD7\x9C  \xD7\xA9\xD7\x9C", kDeepseekLlm),
              ElementsAre("\xD7\xA9\xD7\x9C  \xD7\xA9\xD7\x9C"));
  // A long run that \s+$ does not match (it stops before a digit), and
  // digits before a long trailing run: \s+$ is tried at every position of
  // such pieces, once each (a scan from each position took seconds here).
  const std::string spaces(100000, ' ');
  EXPECT_THAT(Split(spaces + "5", kDeepseekLlm), ElementsAre(spaces, "5"));
  const std::string digits(100000, '5');
  EXPECT_THAT(Split(digits + spaces, kDeepseekLlm), ElementsAre(digits, spaces));
}

TEST(DeepseekLlmPreTokenizerTest, CjkHangulAndWideRanges) {
  EXPECT_THAT(Split("\xE4\xB8\xAD\xE6\x96\x87"
                    "abc",
                    kDeepseekLlm),
              ElementsAre("\xE4\xB8\xAD\xE6\x96\x87", "abc"));  // 中文abc
  // 你好，世界: the full-width comma is regex 3's.
  EXPECT_THAT(Split("\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C", kDeepseekLlm),
              ElementsAre("\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C", "\xE4\xB8\x96\xE7\x95\x8C"));
  EXPECT_THAT(Split("\xED\x95\x9C\xEA\xB5\xAD \xED\x85\x8D", kDeepseekLlm),
              ElementsAre("\xED\x95\x9C\xEA\xB5\xAD", " ", "\xED\x85\x8D"));  // 한국 텍
  // U+0800..U+4E00 holds Devanagari (marks included) ...
  EXPECT_THAT(
      Split(" \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
            kDeepseekLlm),
      ElementsAre(" ", "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87"));
  // ... and whitespace such as U+2009 and U+3000, which regex 5 splits off
  // the letters they lead (llama.cpp c392e50 does not: see split_sequence.h).
  EXPECT_THAT(Split("a\xE2\x80\x89"
                    "b",
                    kDeepseekLlm),
              ElementsAre("a", "\xE2\x80\x89", "b"));
  EXPECT_THAT(Split("a\xE3\x80\x80\xE3\x80\x80"
                    "b",
                    kDeepseekLlm),
              ElementsAre("a", "\xE3\x80\x80", "\xE3\x80\x80", "b"));
}

TEST(DeepseekLlmPreTokenizerTest, NumbersEmptyAndInvalidUtf8) {
  EXPECT_THAT(Split("abc123", kDeepseekLlm), ElementsAre("abc", "123"));
  EXPECT_THAT(Split("12345", kDeepseekLlm), ElementsAre("12345"));
  EXPECT_THAT(Split("x 12 y", kDeepseekLlm), ElementsAre("x", " ", "12", " y"));
  EXPECT_THAT(Split("\xD9\xA1\xD9\xA2\xD9\xA3", kDeepseekLlm),
              ElementsAre("\xD9\xA1\xD9\xA2\xD9\xA3"));
  EXPECT_THAT(Split("", kDeepseekLlm), IsEmpty());
  EXPECT_THAT(Split("a\xFF"
                    "b",
                    kDeepseekLlm),
              ElementsAre("a", "\xEF\xBF\xBD", "b"));
}

// Mistral's tekken. Each expectation was derived by hand from the regex
// (split_sequence.h) and checked against the same regex run by JavaScript's
// RegExp (a backtracking engine, like Oniguruma).
TEST(TekkenPreTokenizerTest, CaseSplitsLetterRuns) {
  // [upper]*[lower]+: a capital starts a word, so CamelCase splits.
  EXPECT_THAT(Split("HelloWorld", kTekken), ElementsAre("Hello", "World"));
  EXPECT_THAT(Split("iPhone", kTekken), ElementsAre("i", "Phone"));
  // [upper]* takes all the capitals, then [lower]+ the lowercase run.
  EXPECT_THAT(Split("HTTPServer", kTekken), ElementsAre("HTTPServer"));
  EXPECT_THAT(Split("getHTTPResponse", kTekken), ElementsAre("get", "HTTPResponse"));
  // No lowercase after: the second alternative, [upper]+[lower]*.
  EXPECT_THAT(Split("ALLCAPS word", kTekken), ElementsAre("ALLCAPS", " word"));
  EXPECT_THAT(Split(" HTTP", kTekken), ElementsAre(" HTTP"));
  EXPECT_THAT(Split("\xC7\x85ungla", kTekken), ElementsAre("\xC7\x85ungla"));  // ǅungla (Lt)
  // ΑθήναΚαι, МоскваРОССИЯ
  EXPECT_THAT(Split("\xCE\x91\xCE\xB8\xCE\xAE\xCE\xBD\xCE\xB1\xCE\x9A\xCE\xB1\xCE\xB9", kTekken),
              ElementsAre("\xCE\x91\xCE\xB8\xCE\xAE\xCE\xBD\xCE\xB1", "\xCE\x9A\xCE\xB1\xCE\xB9"));
  EXPECT_THAT(Split("\xD0\x9C\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0"
                    "\xD0\xA0\xD0\x9E\xD0\xA1\xD0\xA1\xD0\x98\xD0\xAF",
                    kTekken),
              ElementsAre("\xD0\x9C\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0",
                          "\xD0\xA0\xD0\x9E\xD0\xA1\xD0\xA1\xD0\x98\xD0\xAF"));
  // ʰ (Lm) is in both classes: "Xʰ" ends where [upper]* gives ʰ back.
  EXPECT_THAT(Split("\xCA\xB0x", kTekken), ElementsAre("\xCA\xB0x"));
  EXPECT_THAT(Split("X\xCA\xB0Y", kTekken), ElementsAre("X\xCA\xB0", "Y"));
}

TEST(TekkenPreTokenizerTest, DigitsOneByOne) {
  EXPECT_THAT(Split("2024", kTekken), ElementsAre("2", "0", "2", "4"));
  EXPECT_THAT(Split("x1 42", kTekken), ElementsAre("x", "1", " ", "4", "2"));
  EXPECT_THAT(Split("\xD9\xA1\xD9\xA2", kTekken), ElementsAre("\xD9\xA1", "\xD9\xA2"));  // ١٢
}

TEST(TekkenPreTokenizerTest, PunctuationRunsTakeNewlinesAndSlashes) {
  EXPECT_THAT(Split("Hello, world!\n\n", kTekken), ElementsAre("Hello", ",", " world", "!\n\n"));
  // One non-letter glues to the word after it; no contractions of their own.
  EXPECT_THAT(Split("it's don't", kTekken), ElementsAre("it", "'s", " don", "'t"));
  EXPECT_THAT(Split("(x)", kTekken), ElementsAre("(x", ")"));
  EXPECT_THAT(Split("a/b/", kTekken), ElementsAre("a", "/b", "/"));
  EXPECT_THAT(Split("\x01"
                    "abc",
                    kTekken),
              ElementsAre("\x01"
                          "abc"));
  // [\r\n/]* after the run: newlines and slashes, in any order.
  EXPECT_THAT(Split("})\n/x", kTekken), ElementsAre("})\n/", "x"));
  EXPECT_THAT(Split("...\n//", kTekken), ElementsAre("...\n//"));
  EXPECT_THAT(Split(" ...", kTekken), ElementsAre(" ..."));
}

TEST(TekkenPreTokenizerTest, MarksAndOtherLetters) {
  EXPECT_THAT(Split("e\xCC\x81", kTekken), ElementsAre("e\xCC\x81"));
  // A leading mark is the optional prefix...
  EXPECT_THAT(Split("\xCC\x81"
                    "abc",
                    kTekken),
              ElementsAre("\xCC\x81"
                          "abc"));
  // ...unless the word after it has no lowercase: then the first
  // alternative still matches without the prefix, the mark alone being
  // [lower]+ once [upper]* has given everything back.
  EXPECT_THAT(Split("\xCC\x81HTTP", kTekken), ElementsAre("\xCC\x81", "HTTP"));
  EXPECT_THAT(Split("A\xCC\x81"
                    "B",
                    kTekken),
              ElementsAre("A\xCC\x81", "B"));
  // नमस्ते दुनिया: letters (Lo) and vowel signs (M) in one run.
  EXPECT_THAT(
      Split("\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 "
            "\xE0\xA4\xA6\xE0\xA5\x81\xE0\xA4\xA8\xE0\xA4\xBF\xE0\xA4\xAF\xE0\xA4\xBE",
            kTekken),
      ElementsAre("\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
                  " \xE0\xA4\xA6\xE0\xA5\x81\xE0\xA4\xA8\xE0\xA4\xBF\xE0\xA4\xAF\xE0\xA4\xBE"));
  // 日本語 (Lo) joins lowercase on either side and capitals before it, but
  // capitals after it start a word of their own.
  EXPECT_THAT(Split("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", kTekken),
              ElementsAre("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E"));
  EXPECT_THAT(Split("abc\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", kTekken),
              ElementsAre("abc\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E"));
  EXPECT_THAT(Split("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E"
                    "abc",
                    kTekken),
              ElementsAre("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E"
                          "abc"));
  EXPECT_THAT(Split("ABC\xE6\x97\xA5\xE6\x9C\xAC", kTekken),
              ElementsAre("ABC\xE6\x97\xA5\xE6\x9C\xAC"));
  EXPECT_THAT(Split("\xE6\x97\xA5\xE6\x9C\xAC"
                    "ABC",
                    kTekken),
              ElementsAre("\xE6\x97\xA5\xE6\x9C\xAC", "ABC"));
}

TEST(TekkenPreTokenizerTest, Whitespace) {
  // \s+(?!\S) leaves the last space to the word after it.
  EXPECT_THAT(Split("a   b", kTekken), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(Split("\t\tfoo", kTekken), ElementsAre("\t", "\tfoo"));
  EXPECT_THAT(Split("a\xC2\xA0"
                    "b",
                    kTekken),
              ElementsAre("a",
                          "\xC2\xA0"
                          "b"));
  EXPECT_THAT(Split("x   ", kTekken), ElementsAre("x", "   "));
  // \s*[\r\n]+ ends at the last newline; a newline is never a prefix.
  EXPECT_THAT(Split("a \n\n b", kTekken), ElementsAre("a", " \n\n", " b"));
  EXPECT_THAT(Split("\r\nfoo", kTekken), ElementsAre("\r\n", "foo"));
  EXPECT_THAT(Split("\nabc", kTekken), ElementsAre("\n", "abc"));
  EXPECT_THAT(Split("", kTekken), IsEmpty());
  EXPECT_THAT(Split("a\xFF"
                    "b",
                    kTekken),
              ElementsAre("a",
                          "\xEF\xBF\xBD"
                          "b"));
}

TEST(PreTokenizerTest, ConfigForPreNames) {
  for (const char* pre : {"llama3", "llama-bpe", "llama-v3"}) {
    absl::StatusOr<PreTokenizerConfig> c = PreTokenizerConfigFor(pre);
    ASSERT_TRUE(c.ok()) << pre;
    EXPECT_EQ(c->kind, kLlama3);
    EXPECT_TRUE(c->ignore_merges);
    EXPECT_TRUE(c->default_add_bos);
    EXPECT_TRUE(c->clean_spaces);
  }
  absl::StatusOr<PreTokenizerConfig> qwen = PreTokenizerConfigFor("qwen2");
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->kind, kQwen2);
  EXPECT_FALSE(qwen->ignore_merges);
  EXPECT_FALSE(qwen->default_add_bos);
  EXPECT_FALSE(qwen->clean_spaces);
  EXPECT_EQ(PreTokenizerConfigFor("gpt-2")->kind, kGpt2);
  // llama.cpp: deepseek-v3 sets clean_spaces = false and nothing else.
  absl::StatusOr<PreTokenizerConfig> v3 = PreTokenizerConfigFor("deepseek-v3");
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->kind, kDeepseekV3);
  EXPECT_FALSE(v3->ignore_merges);
  EXPECT_FALSE(v3->default_add_bos);
  EXPECT_FALSE(v3->clean_spaces);
  absl::StatusOr<PreTokenizerConfig> llm = PreTokenizerConfigFor("deepseek-llm");
  ASSERT_TRUE(llm.ok());
  EXPECT_EQ(llm->kind, kDeepseekLlm);
  EXPECT_FALSE(llm->ignore_merges);
  EXPECT_FALSE(llm->default_add_bos);
  EXPECT_FALSE(llm->clean_spaces);
  // llama.cpp: tekken sets clean_spaces = false, ignore_merges and add_bos.
  absl::StatusOr<PreTokenizerConfig> tekken = PreTokenizerConfigFor("tekken");
  ASSERT_TRUE(tekken.ok());
  EXPECT_EQ(tekken->kind, kTekken);
  EXPECT_TRUE(tekken->ignore_merges);
  EXPECT_TRUE(tekken->default_add_bos);
  EXPECT_FALSE(tekken->clean_spaces);
  // deepseek-coder's regexes are neither deepseek-v3's nor deepseek-llm's.
  EXPECT_EQ(PreTokenizerConfigFor("deepseek-coder").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(PreTokenizerConfigFor("default").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(PreTokenizerConfigFor("").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(
      PreTokenizerConfigFor("tekken-v2").status().message(),
      ::testing::HasSubstr("pre-tokenizer \"tekken-v2\" (tokenizer.ggml.pre) is not implemented"));
}

}  // namespace
}  // namespace ringlm::tokenizer_internal
