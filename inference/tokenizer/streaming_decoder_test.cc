// StreamingDecoder: whole UTF-8 characters out of byte-fallback token streams.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

class StreamingDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Vocabulary> vocab =
        testing::LoadLlama2cVocabulary(testing::SharedPath("models/tok512.bin"));
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(*std::move(vocab));
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = *std::move(t);
  }
  static int32_t Byte(int value) { return 3 + value; }  // <0xNN> ids in tok512

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(StreamingDecoderTest, HoldsSplitCharactersUntilComplete) {
  StreamingDecoder d(*tokenizer_);
  EXPECT_EQ(d.Push(346), " He");  // "▁He"
  EXPECT_EQ(d.Push(Byte(0xC3)), "");
  EXPECT_EQ(d.Push(Byte(0xA9)), "\xC3\xA9");  // é
  EXPECT_EQ(d.Push(Byte(0xF0)), "");
  EXPECT_EQ(d.Push(Byte(0x9F)), "");
  EXPECT_EQ(d.Push(Byte(0x90)), "");
  EXPECT_EQ(d.Push(Byte(0xB6)), "\xF0\x9F\x90\xB6");  // 🐶
  EXPECT_EQ(d.Push(1), "");                           // BOS contributes nothing
  EXPECT_EQ(d.Flush(), "");
}

TEST_F(StreamingDecoderTest, StreamsWholeEncodedText) {
  const std::string text = "na\xC3\xAFve I love \xF0\x9F\x90\xB6 \xE6\x97\xA5\xE6\x9C\xAC!";
  StreamingDecoder d(*tokenizer_);
  std::string out;
  for (int32_t id : tokenizer_->Encode(text, true, false)) {
    const std::string piece = d.Push(id);
    // Every chunk on its own is valid text: never ends inside a character.
    if (!piece.empty()) {
      EXPECT_LT(static_cast<uint8_t>(piece.back()) & 0xC0, 0xC0) << "chunk ends with a lead byte";
    }
    out += piece;
  }
  out += d.Flush();
  EXPECT_EQ(out, " " + text);
}

TEST_F(StreamingDecoderTest, FlushEmitsIncompleteSequenceAsReplacement) {
  StreamingDecoder d(*tokenizer_);
  EXPECT_EQ(d.Push(Byte(0xE6)), "");
  EXPECT_EQ(d.Push(Byte(0x97)), "");
  EXPECT_EQ(d.Flush(), kReplacement);
  EXPECT_EQ(d.Flush(), "");  // buffer cleared
  EXPECT_EQ(d.Push(Byte('A')), "A");
}

TEST_F(StreamingDecoderTest, InvalidBytesBecomeReplacementImmediately) {
  StreamingDecoder d(*tokenizer_);
  EXPECT_EQ(d.Push(Byte(0xAF)), kReplacement);  // lone continuation byte
  EXPECT_EQ(d.Push(Byte(0xFF)), kReplacement);  // never valid
  EXPECT_EQ(d.Push(Byte(0xC3)), "");
  // The lead is cut off by an ASCII piece: one U+FFFD, then the piece.
  EXPECT_EQ(d.Push(260), std::string(kReplacement) + "he");
  // Surrogate (ED A0..) and overlong (C0 80) are ill-formed.
  EXPECT_EQ(d.Push(Byte(0xED)), "");
  EXPECT_EQ(d.Push(Byte(0xA0)), std::string(kReplacement) + kReplacement);
  EXPECT_EQ(d.Push(Byte(0xC0)), kReplacement);
  EXPECT_EQ(d.Push(Byte(0x80)), kReplacement);
  // A 3-byte lead followed by one good continuation then a bad byte: the
  // maximal subpart (2 bytes) is one U+FFFD.
  EXPECT_EQ(d.Push(Byte(0xE6)), "");
  EXPECT_EQ(d.Push(Byte(0x97)), "");
  EXPECT_EQ(d.Push(Byte('x')), std::string(kReplacement) + "x");
  EXPECT_EQ(d.Flush(), "");
}

TEST_F(StreamingDecoderTest, InvalidIdsAreIgnored) {
  StreamingDecoder d(*tokenizer_);
  EXPECT_EQ(d.Push(-1), "");
  EXPECT_EQ(d.Push(1 << 20), "");
  EXPECT_EQ(d.Push(259), " t");
}

}  // namespace
}  // namespace ringlm
