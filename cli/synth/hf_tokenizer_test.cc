// Hugging Face tokenizer.json -> GGUF vocabulary, on small hand-made files:
// token types, special ids, merges in both spellings, SPM scores that follow
// the merge order, the written model, and clear errors for bad input.
#include "inference/tokenizer/hf_tokenizer.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/synth/synth_model.h"
#include "gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/model.h"
#include "inference/vocabulary_loader.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using nlohmann::json;
using testing::ElementsAre;
using testing::HasSubstr;

const json kLlama3Split = {
    {"type", "Split"},
    {"pattern",
     {{"Regex",
       R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
    {"behavior", "Isolated"},
    {"invert", false}};
const json kByteLevel = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};

json AddedToken(int id, const std::string& content, bool special) {
  return {{"id", id}, {"content", content}, {"special", special}, {"normalized", false}};
}

// A Llama 3 style byte-level BPE: ids 5 and 6 are holes.
json ByteLevelJson() {
  return {{"model",
           {{"type", "BPE"},
            {"vocab",
             {{"a", 0},
              {"b", 1},
              {"ab", 2},
              {"\xC4\xA0", 3},
              {"\xC4\xA0"
               "ab",
               4}}},
            {"merges", {"a b", "\xC4\xA0 ab"}}}},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {kLlama3Split, kByteLevel}}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}},
          {"added_tokens",
           {AddedToken(7, "<|begin_of_text|>", true), AddedToken(8, "<|eot_id|>", true),
            AddedToken(9, "<tool_call>", false), AddedToken(10, "<|fim_prefix|>", false)}}};
}

json ByteLevelConfig() {
  return {{"bos_token", "<|begin_of_text|>"},
          {"eos_token", {{"content", "<|eot_id|>"}, {"lstrip", false}}},
          {"chat_template",
           {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}};
}

// A Llama 2 style SentencePiece BPE. "ab" (id 9) has a lower id than "bc"
// (id 10) but a later merge, so only merge-rank scores tokenize "abc" as
// HF does: a + bc.
json SpmJson() {
  const std::string s = "\xE2\x96\x81";  // "▁"
  return {
      {"model",
       {{"type", "BPE"},
        {"byte_fallback", true},
        {"unk_token", "<unk>"},
        {"vocab",
         {{"<unk>", 0},
          {"<s>", 1},
          {"</s>", 2},
          {"<0x0A>", 3},
          {"<0xE2>", 4},
          {s, 5},
          {"a", 6},
          {"b", 7},
          {"c", 8},
          {"ab", 9},
          {"bc", 10},
          {s + "a", 11},
          {"abc", 12}}},
        {"merges", {"b c", s + " a", "a b", "a bc"}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", s}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", s}}}}}},
      {"pre_tokenizer", nullptr},
      {"added_tokens",
       {AddedToken(0, "<unk>", true), AddedToken(1, "<s>", true), AddedToken(2, "</s>", true)}}};
}

json SpmConfig() {
  return {{"bos_token", "<s>"},
          {"eos_token", "</s>"},
          {"add_bos_token", true},
          {"add_eos_token", false},
          {"chat_template", "{{ messages }}"}};
}

class HfTokenizerTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/hf_tokenizer_test_" + std::to_string(::getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
  }
  absl::StatusOr<SynthTokenizer> Load(const json& tokenizer, const json& config) {
    Write("tokenizer.json", tokenizer.dump());
    Write("tokenizer_config.json", config.dump());
    return LoadHfTokenizer(dir_);
  }
  // The error of loading; fails the test when loading succeeds.
  absl::Status LoadError(const json& tokenizer, const json& config) {
    absl::StatusOr<SynthTokenizer> t = Load(tokenizer, config);
    EXPECT_FALSE(t.ok());
    return t.status();
  }

  std::string dir_;
};

TEST_F(HfTokenizerTest, ByteLevelBpeMapsToGpt2WithLlamaCppTypes) {
  absl::StatusOr<SynthTokenizer> t = Load(ByteLevelJson(), ByteLevelConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  const Vocabulary& v = t->vocab;
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "llama-bpe");
  ASSERT_EQ(v.pieces.size(), 11u);  // highest id + 1
  EXPECT_EQ(v.pieces[5], "[PAD5]");
  EXPECT_EQ(v.pieces[9], "<tool_call>");
  EXPECT_THAT(v.merges, ElementsAre("a b", "\xC4\xA0 ab"));
  using T = TokenType;
  EXPECT_THAT(v.types,
              ElementsAre(T::kNormal, T::kNormal, T::kNormal, T::kNormal, T::kNormal, T::kUnused,
                          T::kUnused, T::kControl, T::kControl, T::kUserDefined,
                          T::kControl));  // <|fim_prefix|> looks special
  EXPECT_EQ(v.bos_id, 7);
  EXPECT_EQ(v.eos_id, 8);
  EXPECT_EQ(v.eot_id, 8);
  EXPECT_EQ(v.unk_id, -1);
  EXPECT_TRUE(v.add_bos);  // from the post_processor: the config does not say
  EXPECT_FALSE(v.add_eos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_EQ(t->chat_template, "D");
  EXPECT_TRUE(v.scores.empty());

  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(v);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("ab ab<tool_call>", true, true), ElementsAre(7, 2, 4, 9));
}

TEST_F(HfTokenizerTest, PairMergesQwenAndGpt2Regexes) {
  json j = ByteLevelJson();
  j["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"\xC4\xA0", "ab"})});
  std::string qwen = j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"];
  qwen.replace(qwen.find(R"(\p{N}{1,3})"), 10, R"(\p{N})");
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = qwen;
  json config = ByteLevelConfig();
  config["add_bos_token"] = false;
  absl::StatusOr<SynthTokenizer> t = Load(j, config);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab.pre, "qwen2");
  EXPECT_THAT(t->vocab.merges, ElementsAre("a b", "\xC4\xA0 ab"));
  EXPECT_FALSE(t->vocab.add_bos);  // the config wins over the post_processor

  // GPT-2's tokenizer.json: the regex is ByteLevel's own.
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  t = Load(j, config);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab.pre, "gpt-2");
}

TEST_F(HfTokenizerTest, OtherRegexesAreUnimplementedAndQuoted) {
  json j = ByteLevelJson();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\p{N}{1,3})";
  const absl::Status s = LoadError(j, ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.json: the pre-tokenizer is not supported"));
  EXPECT_THAT(s.message(), HasSubstr(R"('\p{N}{1,3}')"));
  EXPECT_THAT(s.message(), HasSubstr(dir_));

  j["model"]["type"] = "Unigram";
  EXPECT_EQ(LoadError(j, ByteLevelConfig()).code(), absl::StatusCode::kUnimplemented);
}

json IsolatedSplit(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}};
}

// DeepSeek V3's tokenizer.json spells \r and \n in its third regex as the
// characters themselves.
const std::string kDeepseekDigits = R"(\p{N}{1,3})";
const std::string kDeepseekCjk =
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+";
const std::string kDeepseekWords =
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

json WithSplits(json j, const std::vector<std::string>& regexes) {
  json pre = json::array();
  for (const std::string& r : regexes) pre.push_back(IsolatedSplit(r));
  pre.push_back(kByteLevel);
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", pre}};
  return j;
}

TEST_F(HfTokenizerTest, DeepseekV3SplitSequenceMapsToDeepseekV3) {
  absl::StatusOr<SynthTokenizer> t =
      Load(WithSplits(ByteLevelJson(), {kDeepseekDigits, kDeepseekCjk, kDeepseekWords}),
           ByteLevelConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab.pre, "deepseek-v3");

  // The same regexes in another order, or only some of them, are not it.
  absl::Status s =
      LoadError(WithSplits(ByteLevelJson(), {kDeepseekCjk, kDeepseekDigits, kDeepseekWords}),
                ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(),
              HasSubstr("the pre-tokenizer is not supported: the sequence of 3 splits"));
  EXPECT_THAT(s.message(), HasSubstr(R"('\p{N}{1,3}')"));
  s = LoadError(WithSplits(ByteLevelJson(), {kDeepseekDigits, kDeepseekWords}), ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("the sequence of 2 splits"));
  // Two known single splits are not a known sequence either.
  const std::string llama3 = kLlama3Split["pattern"]["Regex"];
  s = LoadError(WithSplits(ByteLevelJson(), {llama3, llama3}), ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("the sequence of 2 splits"));
  // An unknown regex among known ones is the one quoted.
  s = LoadError(WithSplits(ByteLevelJson(), {kDeepseekDigits, "[a-z]+", kDeepseekWords}),
                ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("Split regex '[a-z]+' is none of"));
  // Every split must be Isolated.
  json j = WithSplits(ByteLevelJson(), {kDeepseekDigits, kDeepseekCjk, kDeepseekWords});
  j["pre_tokenizer"]["pretokenizers"][1]["behavior"] = "MergedWithNext";
  s = LoadError(j, ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("Split behavior 'MergedWithNext'"));
}

// Mistral Nemo's tokenizer.json: one Isolated Split, then ByteLevel without
// its own regex.
const std::string kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST_F(HfTokenizerTest, TekkenSplitMapsToTekken) {
  absl::StatusOr<SynthTokenizer> t =
      Load(WithSplits(ByteLevelJson(), {kTekken}), ByteLevelConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab.pre, "tekken");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(t->vocab);
  ASSERT_TRUE(tok.ok()) << tok.status();

  // Followed by GPT-2's regex (a ByteLevel with use_regex), it is not.
  json j = WithSplits(ByteLevelJson(), {kTekken});
  j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  absl::Status s = LoadError(j, ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("the sequence of 2 splits"));
  // Nor with another behavior.
  j = WithSplits(ByteLevelJson(), {kTekken});
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  s = LoadError(j, ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("Split behavior 'Removed'"));
  // Nor with one class changed (\p{N}{1,3} for \p{N}).
  std::string other = kTekken;
  other.replace(other.find(R"(|\p{N}|)"), 7, R"(|\p{N}{1,3}|)");
  s = LoadError(WithSplits(ByteLevelJson(), {other}), ByteLevelConfig());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("is none of Llama 3's, Qwen 2's, GPT-2's, Mistral's tekken"));
}

TEST_F(HfTokenizerTest, SentencePieceBpeMapsToLlamaWithMergeRankScores) {
  absl::StatusOr<SynthTokenizer> t = Load(SpmJson(), SpmConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  const Vocabulary& v = t->vocab;
  EXPECT_EQ(v.model, "llama");
  EXPECT_TRUE(v.merges.empty());
  EXPECT_TRUE(v.add_space_prefix);  // the Prepend normalizer
  using T = TokenType;
  EXPECT_THAT(v.types, ElementsAre(T::kUnknown, T::kControl, T::kControl, T::kByte, T::kByte,
                                   T::kNormal, T::kNormal, T::kNormal, T::kNormal, T::kNormal,
                                   T::kNormal, T::kNormal, T::kNormal));
  EXPECT_EQ(v.scores[10], -1.0f);  // "bc", merge 0
  EXPECT_EQ(v.scores[11], -2.0f);  // "▁a", merge 1
  EXPECT_EQ(v.scores[9], -3.0f);   // "ab", merge 2
  EXPECT_EQ(v.scores[12], -4.0f);  // "abc"
  EXPECT_EQ(v.scores[6], 0.0f);    // no merge makes "a"
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.eot_id, -1);
  EXPECT_TRUE(v.add_bos);
  EXPECT_EQ(t->chat_template, "{{ messages }}");

  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(v);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "▁abc": bc (merge 0), then ▁a (merge 1), as HF's BPE; scores by id
  // order would merge ab first and give ▁ + abc.
  EXPECT_THAT((*tok)->Encode("abc", false, true), ElementsAre(11, 10));
  EXPECT_THAT((*tok)->Encode("bc", true, true), ElementsAre(1, 5, 10));
  EXPECT_THAT((*tok)->Encode("\n", false, true), ElementsAre(5, 3));  // byte fallback
}

TEST_F(HfTokenizerTest, MetaspacePrependSchemeSetsTheSpacePrefix) {
  json j = SpmJson();
  j.erase("normalizer");
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "never"}};
  absl::StatusOr<SynthTokenizer> t = Load(j, SpmConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->vocab.add_space_prefix);
  j["pre_tokenizer"]["prepend_scheme"] = "always";
  t = Load(j, SpmConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->vocab.add_space_prefix);
}

TEST_F(HfTokenizerTest, ConfigAddedTokensReplaceModelPieces) {
  // InternLM2: the chat tokens exist only in tokenizer_config.json, over
  // placeholder pieces of the model vocabulary.
  json j = SpmJson();
  j["model"]["vocab"]["[UNUSED_TOKEN_1]"] = 13;
  j["added_tokens"] = json::array();
  json config = SpmConfig();
  config["added_tokens_decoder"] = {{"13", {{"content", "<|im_end|>"}, {"special", true}}},
                                    {"14", {{"content", "<tool>"}, {"special", false}}}};
  absl::StatusOr<SynthTokenizer> t = Load(j, config);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->vocab.pieces.size(), 15u);
  EXPECT_EQ(t->vocab.pieces[13], "<|im_end|>");
  EXPECT_EQ(t->vocab.types[13], TokenType::kControl);
  EXPECT_EQ(t->vocab.types[14], TokenType::kUserDefined);
  EXPECT_EQ(t->vocab.scores[14], -1000.0f);
  EXPECT_EQ(t->vocab.eot_id, 13);
}

TEST_F(HfTokenizerTest, WrittenModelCarriesTheVocabularyAndLoads) {
  absl::StatusOr<SynthTokenizer> t = Load(ByteLevelJson(), ByteLevelConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  SynthOptions options;
  options.preset = "micro";
  options.type = TensorType::kF16;
  options.threads = 1;
  options.tokenizer = std::make_shared<const SynthTokenizer>(*t);
  const std::string path = dir_ + "/model.gguf";
  ASSERT_TRUE(WriteSynthModel(options, path).ok());

  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetUint("llama.vocab_size"), 11u);
  EXPECT_EQ(*(*file)->GetString("tokenizer.chat_template"), "D");
  EXPECT_EQ(*(*file)->GetString("tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_EQ((*file)->FindTensor("token_embd.weight")->dims, (std::vector<uint64_t>{64, 11}));
  absl::StatusOr<Vocabulary> v = LoadVocabulary(**file);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->pieces, t->vocab.pieces);
  EXPECT_EQ(v->merges, t->vocab.merges);
  EXPECT_EQ(v->types, t->vocab.types);
  EXPECT_EQ(v->bos_id, 7);
  EXPECT_EQ(v->eos_id, 8);
  EXPECT_EQ(v->eot_id, 8);
  EXPECT_TRUE(v->add_bos);

  ModelOptions mo;
  mo.context_size = 16;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(path, mo);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->tokenizer().n_vocab(), 11);
  EXPECT_TRUE((*model)->tokenizer().IsEndOfGeneration(8));
}

TEST_F(HfTokenizerTest, MissingFilesAreNotFound) {
  absl::StatusOr<SynthTokenizer> t = LoadHfTokenizer(dir_);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr(dir_ + "/tokenizer.json"));
  Write("tokenizer.json", ByteLevelJson().dump());
  t = LoadHfTokenizer(dir_);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("tokenizer_config.json"));
}

TEST_F(HfTokenizerTest, BadInputIsInvalidArgumentNamingFileAndProblem) {
  Write("tokenizer.json", "{\"model\": {");
  Write("tokenizer_config.json", "{}");
  absl::StatusOr<SynthTokenizer> t = LoadHfTokenizer(dir_);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("tokenizer.json: malformed JSON"));

  struct Case {
    const char* what;
    std::function<void(json&, json&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {"negative id", [](json& j, json&) { j["model"]["vocab"]["a"] = -1; }, "has id -1"},
      {"huge id", [](json& j, json&) { j["model"]["vocab"]["a"] = 1 << 30; }, "not an integer"},
      {"id as text", [](json& j, json&) { j["model"]["vocab"]["a"] = "0"; }, "not an integer"},
      {"shared id", [](json& j, json&) { j["model"]["vocab"]["c"] = 0; }, "id 0 is used by both"},
      {"duplicate piece",
       [](json& j, json&) { j["added_tokens"].push_back(AddedToken(6, "ab", false)); },
       "piece 'ab' appears twice, as ids 2 and 6"},
      {"unknown merge piece", [](json& j, json&) { j["model"]["merges"].push_back("a zz"); },
       "merge 2"},
      {"merge without space", [](json& j, json&) { j["model"]["merges"].push_back("ab"); },
       "merge 2 'ab' is not \"left right\""},
      {"merge of three",
       [](json& j, json&) {
         j["model"]["merges"].push_back({"a", "b", "c"});
       },
       "merge 2 is neither"},
      {"vocab is an array",
       [](json& j, json&) {
         j["model"]["vocab"] = {1, 2};
       },
       "model.vocab is not an object"},
      {"added token without id",
       [](json& j, json&) {
         j["added_tokens"].push_back({{"content", "x"}});
       },
       "has no id"},
      {"unknown bos", [](json&, json& c) { c["bos_token"] = "<s>"; },
       "bos_token '<s>' is not in the vocabulary"},
      {"template list without default",
       [](json&, json& c) {
         c["chat_template"] = {{{"name", "rag"}, {"template", "R"}}};
       },
       "no \"default\" (has: rag)"},
      {"no model", [](json& j, json&) { j.erase("model"); }, "no \"model\" object"},
  };
  for (const Case& c : cases) {
    json j = ByteLevelJson();
    json config = ByteLevelConfig();
    c.edit(j, config);
    const absl::Status s = LoadError(j, config);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.what;
    EXPECT_THAT(s.message(), HasSubstr(dir_ + "/tokenizer")) << c.what;
  }
}

}  // namespace
}  // namespace ringlm
