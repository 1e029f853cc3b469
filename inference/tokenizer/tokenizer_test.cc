// Tokenizer against llama.cpp's reference outputs for the bundled stories260K
// model (refs/stories260k_llamacpp.json), using the real 512-piece vocabulary.

#include "inference/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class StoriesTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<Vocabulary> vocab =
        testing::LoadLlama2cVocabulary(testing::SharedPath("models/tok512.bin"));
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Create(*std::move(vocab));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = tokenizer->release();
    std::ifstream file(testing::SharedPath("refs/stories260k_llamacpp.json"));
    ASSERT_TRUE(file) << "missing refs/stories260k_llamacpp.json";
    refs_ = new nlohmann::json(nlohmann::json::parse(file));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete refs_;
  }

  static std::vector<int32_t> Ids(const nlohmann::json& array) {
    return array.get<std::vector<int32_t>>();
  }

  static const Tokenizer* tokenizer_;
  static const nlohmann::json* refs_;
};

const Tokenizer* StoriesTokenizerTest::tokenizer_ = nullptr;
const nlohmann::json* StoriesTokenizerTest::refs_ = nullptr;

TEST_F(StoriesTokenizerTest, VocabularyMatchesGgufPieces) {
  const Vocabulary& vocab = tokenizer_->vocabulary();
  ASSERT_EQ(tokenizer_->n_vocab(), 512);
  EXPECT_EQ(vocab.pieces[0], "<unk>");
  EXPECT_EQ(vocab.pieces[1], "<s>");
  EXPECT_EQ(vocab.pieces[2], "</s>");
  EXPECT_EQ(vocab.pieces[3], "<0x00>");
  EXPECT_EQ(vocab.pieces[258], "<0xFF>");
  EXPECT_EQ(vocab.pieces[259], "\xE2\x96\x81t");
  EXPECT_EQ(vocab.pieces[260], "he");
  EXPECT_EQ(vocab.scores[259], 0.0f);
  EXPECT_EQ(vocab.scores[511], -252.0f);
  int checked = 0;
  for (const auto& c : (*refs_)["tokenizer"]["cases"]) {
    const std::vector<int32_t> ids = Ids(c["ids"]);
    const auto pieces = c["pieces"].get<std::vector<std::string>>();
    ASSERT_EQ(ids.size(), pieces.size());
    for (size_t i = 0; i < ids.size(); ++i, ++checked) {
      ASSERT_TRUE(tokenizer_->IsValid(ids[i]));
      EXPECT_EQ(vocab.pieces[ids[i]], pieces[i]) << "id " << ids[i];
    }
  }
  EXPECT_GT(checked, 100);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
}

TEST_F(StoriesTokenizerTest, MatchesLlamaCppTokenizerCases) {
  const auto& cases = (*refs_)["tokenizer"]["cases"];
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const std::vector<int32_t> ids = Ids(c["ids"]);
    EXPECT_EQ(tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/true), ids)
        << "text: " << text;
    // "ids_no_parse_special" is given only where it differs.
    const std::vector<int32_t> no_parse =
        c.contains("ids_no_parse_special") ? Ids(c["ids_no_parse_special"]) : ids;
    EXPECT_EQ(tokenizer_->Encode(text, true, false), no_parse) << "text: " << text;
  }
}

TEST_F(StoriesTokenizerTest, MatchesLlamaCppPromptIds) {
  const auto& generation = (*refs_)["generation"];
  ASSERT_FALSE(generation.empty());
  for (const auto& g : generation) {
    EXPECT_EQ(tokenizer_->Encode(g["prompt"].get<std::string>(), true, false), Ids(g["prompt_ids"]))
        << "prompt: " << g["prompt"];
  }
}

TEST_F(StoriesTokenizerTest, GeneratedTextIsConcatenatedPieces) {
  for (const auto& g : (*refs_)["generation"]) {
    for (const char* model : {"f32", "q8_0"}) {
      const std::vector<int32_t> ids = Ids(g[model]["generated_ids"]);
      const std::string expected = g[model]["generated_text"];
      std::string pieces, streamed;
      StreamingDecoder decoder(*tokenizer_);
      for (int32_t id : ids) {
        pieces += tokenizer_->TokenToPiece(id);
        streamed += decoder.Push(id);
      }
      streamed += decoder.Flush();
      EXPECT_EQ(pieces, expected);
      EXPECT_EQ(streamed, expected);
    }
  }
}

TEST_F(StoriesTokenizerTest, TopFivePiecesMatch) {
  for (const auto& entry : (*refs_)["generation"][0]["f32"]["top5_first_step"]) {
    EXPECT_EQ(tokenizer_->TokenToPiece(entry["id"]), entry["piece"].get<std::string>());
  }
}

TEST_F(StoriesTokenizerTest, EmptyAndSpaceOnly) {
  EXPECT_THAT(tokenizer_->Encode("", true, true), ElementsAre(1));
  EXPECT_THAT(tokenizer_->Encode("", false, true), IsEmpty());
  EXPECT_THAT(tokenizer_->Encode(" ", true, true), ElementsAre(1, 410, 410));
  EXPECT_THAT(tokenizer_->Encode(" ", false, true), ElementsAre(410, 410));
}

TEST_F(StoriesTokenizerTest, SpecialTokensInText) {
  const Tokenizer& t = *tokenizer_;
  auto concat = [](std::vector<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  // Fragments after a special token get the space prefix again, so the raw
  // text " world" after <s> is tokenized like " world" at the start.
  EXPECT_EQ(
      t.Encode("Hello<s> world</s>", true, true),
      concat({{1}, t.Encode("Hello", false, false), {1}, t.Encode(" world", false, false), {2}}));
  EXPECT_THAT(t.Encode("<s>", true, true), ElementsAre(1, 1));
  EXPECT_THAT(t.Encode("<s></s>", false, true), ElementsAre(1, 2));
  // Unknown-type tokens are special in this llama.cpp version.
  EXPECT_THAT(t.Encode("<unk>", false, true), ElementsAre(0));
  // Without parse_special the text is ordinary characters.
  const std::vector<int32_t> literal = t.Encode("<s>", false, false);
  EXPECT_GT(literal.size(), 1u);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 1), 0);
  EXPECT_EQ(t.Decode(literal), "<s>");
}

TEST_F(StoriesTokenizerTest, DecodeRoundTrips) {
  std::vector<std::string> texts = {"Hello world",
                                    "  two leading spaces",
                                    "na\xC3\xAFve",
                                    "I love \xF0\x9F\x90\xB6!",
                                    "line1\nline2\n",
                                    "\t<x>{}",
                                    "\xE6\x97\xA5\xE6\x9C\xAC",
                                    "trailing space "};
  for (const auto& c : (*refs_)["tokenizer"]["cases"]) texts.push_back(c["text"]);
  for (const std::string& text : texts) {
    // With BOS the BOS consumes llama.cpp's strip-one-leading-space rule.
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, true, false)), " " + text);
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, false, false)), text);
  }
  EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode("", true, false)), "");
}

TEST_F(StoriesTokenizerTest, InvalidUtf8FallsBackToBytes) {
  // A lone continuation byte, a truncated sequence and a 0xFF byte.
  const std::string text = "a\x80 b\xC3 \xFF";
  const std::vector<int32_t> ids = tokenizer_->Encode(text, false, false);
  // As in llama.cpp, spaces become U+2581 before splitting into characters, so
  // the truncated lead "\xC3" swallows the first byte of the following U+2581
  // and that space comes back as the raw bytes of U+2581. Everything else
  // round-trips byte for byte.
  EXPECT_EQ(tokenizer_->Decode(ids), "a\x80 b\xC3\xE2\x96\x81\xFF");
  EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode("a\x80 b\xFF", false, false)), "a\x80 b\xFF");
  for (int32_t id : ids) EXPECT_TRUE(tokenizer_->IsValid(id));
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3 + 0x80), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3 + 0xFF), ids.end());
}

TEST_F(StoriesTokenizerTest, TokenToPieceAndEndOfGeneration) {
  const Tokenizer& t = *tokenizer_;
  EXPECT_EQ(t.TokenToPiece(0), "");  // unknown
  EXPECT_EQ(t.TokenToPiece(1), "");  // control
  EXPECT_EQ(t.TokenToPiece(2), "");
  EXPECT_EQ(t.TokenToPiece(3 + 0x41), "A");
  EXPECT_EQ(t.TokenToPiece(3 + 0x0A), "\n");
  EXPECT_EQ(t.TokenToPiece(259), " t");
  EXPECT_EQ(t.TokenToPiece(-1), "");
  EXPECT_EQ(t.TokenToPiece(512), "");
  EXPECT_TRUE(t.IsEndOfGeneration(2));
  EXPECT_FALSE(t.IsEndOfGeneration(1));
  EXPECT_FALSE(t.IsEndOfGeneration(-1));
  EXPECT_FALSE(t.IsValid(512));
  EXPECT_TRUE(t.IsValid(511));
  // Invalid ids are skipped by Decode instead of crashing.
  EXPECT_EQ(t.Decode(std::vector<int32_t>{-5, 346, 100000}), " He");
}

TEST_F(StoriesTokenizerTest, ConcurrentEncodeIsConsistent) {
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  const std::vector<int32_t> expected = tokenizer_->Encode(text, true, true);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k)
        mismatches[i] += tokenizer_->Encode(text, true, true) != expected;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace ringlm
