// Test-only: builds the GGUF-equivalent Vocabulary of the bundled stories260K
// model from its llama2.c tokenizer file (models/tok512.bin), the way
// llama.cpp's convert-llama2c-to-ggml does.

#ifndef RINGLM_INFERENCE_TOKENIZER_LLAMA2C_VOCAB_FOR_TEST_H_
#define RINGLM_INFERENCE_TOKENIZER_LLAMA2C_VOCAB_FOR_TEST_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm::testing {

inline std::string SharedPath(const std::string& relative) {
  return std::string(RINGLM_SHARED_DIR) + "/" + relative;
}

// Layout (little-endian): uint32 max_token_length, then per piece float32
// score, uint32 length, bytes. Spaces are plain ' '; pieces 1 and 2 are stored
// as "\n<s>\n" and "\n</s>\n". Types: 0 unknown, 1-2 control, 3-258 byte,
// the rest normal; bos 1, eos 2, unk 0.
inline absl::StatusOr<Vocabulary> LoadLlama2cVocabulary(const std::string& path,
                                                        int32_t n_vocab = 512) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  auto read_u32 = [&](uint32_t& v) {
    if (bytes.size() - pos < 4) return false;
    std::memcpy(&v, bytes.data() + pos, 4);
    pos += 4;
    return true;
  };
  uint32_t max_len = 0;
  if (!read_u32(max_len)) return absl::DataLossError("truncated header");
  Vocabulary vocab;
  vocab.model = "llama";
  for (int32_t id = 0; id < n_vocab; ++id) {
    uint32_t score_bits = 0, len = 0;
    if (!read_u32(score_bits) || !read_u32(len) || bytes.size() - pos < len) {
      return absl::DataLossError(absl::StrCat("truncated at piece ", id));
    }
    float score;
    std::memcpy(&score, &score_bits, 4);
    std::string piece = bytes.substr(pos, len);
    pos += len;
    if (id == 1) piece = "<s>";
    if (id == 2) piece = "</s>";
    vocab.pieces.push_back(absl::StrReplaceAll(piece, {{" ", "\xE2\x96\x81"}}));
    vocab.scores.push_back(score);
    vocab.types.push_back(id == 0     ? TokenType::kUnknown
                          : id <= 2   ? TokenType::kControl
                          : id <= 258 ? TokenType::kByte
                                      : TokenType::kNormal);
  }
  if (pos != bytes.size()) return absl::DataLossError("trailing bytes after the last piece");
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  vocab.unk_id = 0;
  return vocab;
}

// The bundled models/tok512.bin as a Tokenizer, loaded once per process and
// never freed; null (with the reason on stderr) when it cannot be loaded.
inline const Tokenizer* Tok512Tokenizer() {
  static const Tokenizer* const tokenizer = []() -> const Tokenizer* {
    absl::StatusOr<Vocabulary> vocab = LoadLlama2cVocabulary(SharedPath("models/tok512.bin"));
    if (!vocab.ok()) {
      std::fprintf(stderr, "tok512: %s\n", vocab.status().ToString().c_str());
      return nullptr;
    }
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(*std::move(vocab));
    if (!t.ok()) {
      std::fprintf(stderr, "tok512: %s\n", t.status().ToString().c_str());
      return nullptr;
    }
    return t->release();
  }();
  return tokenizer;
}

// Tok512 with `control` appended as control tokens (ids 512, 513, ...), for
// tests of a model's marker tokens (DeepSeek's tool-call markers, say): they
// decode to "", and only template text (parse_special) spells them. Null
// (with the reason on stderr) when tok512 cannot be loaded.
inline std::unique_ptr<Tokenizer> Tok512WithControlTokens(const std::vector<std::string>& control) {
  absl::StatusOr<Vocabulary> vocab = LoadLlama2cVocabulary(SharedPath("models/tok512.bin"));
  if (!vocab.ok()) {
    std::fprintf(stderr, "tok512: %s\n", vocab.status().ToString().c_str());
    return nullptr;
  }
  for (const std::string& piece : control) {
    vocab->pieces.push_back(piece);
    vocab->scores.push_back(0);
    vocab->types.push_back(TokenType::kControl);
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(*std::move(vocab));
  if (!t.ok()) {
    std::fprintf(stderr, "tok512: %s\n", t.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(t);
}

}  // namespace ringlm::testing

#endif  // RINGLM_INFERENCE_TOKENIZER_LLAMA2C_VOCAB_FOR_TEST_H_
