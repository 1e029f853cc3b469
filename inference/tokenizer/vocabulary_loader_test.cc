// LoadVocabulary (inference/vocabulary_loader.h) on GGUF files built with the
// project's GgufWriter: "gpt2" keys, defaults and errors, and "llama" as before.

#include "inference/vocabulary_loader.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/bpe_test_vocab.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A GGUF writer holding the small byte-level vocabulary of bpe_test_vocab.h.
GgufWriter Gpt2Writer(const std::string& pre) {
  const Vocabulary v = testing::SmallBpeVocab(pre).vocab();
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", pre);
  w.SetStringArray("tokenizer.ggml.tokens", v.pieces);
  std::vector<int32_t> types;
  for (TokenType t : v.types) types.push_back(static_cast<int32_t>(t));
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", v.merges);
  w.SetUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  w.SetUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  return w;
}

absl::StatusOr<Vocabulary> Load(const GgufWriter& w) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBytes(w.ToBytes());
  if (!file.ok()) return file.status();
  return LoadVocabulary(**file);
}

TEST(VocabularyLoaderTest, LoadsGpt2Llama3Vocabulary) {
  GgufWriter w = Gpt2Writer("llama-bpe");
  w.SetUint32("tokenizer.ggml.eot_token_id", 256 + 15 + 2);  // "<|eot_id|>"
  absl::StatusOr<Vocabulary> v = Load(w);
  ASSERT_TRUE(v.ok()) << v.status();
  const Vocabulary expected = testing::SmallBpeVocab("llama-bpe").vocab();
  EXPECT_EQ(v->model, "gpt2");
  EXPECT_EQ(v->pre, "llama-bpe");
  EXPECT_EQ(v->pieces, expected.pieces);
  EXPECT_EQ(v->merges, expected.merges);
  EXPECT_EQ(v->bos_id, expected.bos_id);
  EXPECT_EQ(v->eot_id, 256 + 15 + 2);
  EXPECT_EQ(v->unk_id, -1);
  EXPECT_TRUE(v->add_bos);  // llama.cpp's default for the llama3 family
  EXPECT_FALSE(v->add_space_prefix);
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(*v);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->Encode(" the", true, false), ElementsAre(expected.bos_id, 256 + 2));
  EXPECT_TRUE((*t)->IsEndOfGeneration(256 + 15 + 2));
}

TEST(VocabularyLoaderTest, Gpt2Defaults) {
  GgufWriter w = Gpt2Writer("qwen2");
  w.Remove("tokenizer.ggml.bos_token_id");
  w.Remove("tokenizer.ggml.eos_token_id");
  absl::StatusOr<Vocabulary> v = Load(w);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FALSE(v->add_bos);  // not llama3
  EXPECT_EQ(v->bos_id, 11);  // llama.cpp's "gpt2" defaults
  EXPECT_EQ(v->eos_id, 11);
  w = Gpt2Writer("llama3");
  w.SetBool("tokenizer.ggml.add_bos_token", false);
  v = Load(w);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FALSE(v->add_bos);  // the key wins
}

TEST(VocabularyLoaderTest, Gpt2Errors) {
  GgufWriter w = Gpt2Writer("llama3");
  w.Remove("tokenizer.ggml.merges");
  absl::Status s = Load(w).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.merges"));

  w = Gpt2Writer("llama3");
  w.SetStringArray("tokenizer.ggml.merges", {"h e", "q \xC4\xA0zz"});
  s = Load(w).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("merge 1"));
  EXPECT_THAT(s.message(), HasSubstr("not a piece"));

  w = Gpt2Writer("llama3");
  w.SetStringArray("tokenizer.ggml.merges", {"h e", "he"});
  s = Load(w).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("merge 1 \"he\" is not two pieces"));

  w = Gpt2Writer("llama3");
  w.SetUint32("tokenizer.ggml.merges", 5);
  EXPECT_EQ(Load(w).status().code(), absl::StatusCode::kInvalidArgument);

  w = Gpt2Writer("no-such-pre");
  EXPECT_EQ(Load(w).status().code(), absl::StatusCode::kUnimplemented);

  w = Gpt2Writer("llama3");
  w.SetUint32("tokenizer.ggml.eom_token_id", 100000);
  EXPECT_EQ(Load(w).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(VocabularyLoaderTest, LlamaStillLoads) {
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
  absl::StatusOr<Vocabulary> v = Load(w);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->bos_id, 1);
  EXPECT_EQ(v->eos_id, 2);
  EXPECT_EQ(v->unk_id, 0);
  EXPECT_TRUE(v->add_bos);
  EXPECT_TRUE(v->add_space_prefix);
  EXPECT_TRUE(v->merges.empty());
  w.SetString("tokenizer.ggml.model", "bert");
  EXPECT_EQ(Load(w).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace ringlm
