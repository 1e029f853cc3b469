#include "inference/vocabulary_loader.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace ringlm {
namespace {

// Reads an optional token id; absent or 0xFFFFFFFF ("none" in llama.cpp's
// converters) leaves `id` unchanged.
absl::Status ReadOptionalId(const GgufFile& file, const char* key, size_t n_vocab, int32_t& id) {
  if (file.Find(key) == nullptr) return absl::OkStatus();
  RINGLM_ASSIGN_OR_RETURN(uint64_t v, file.GetUint(key));
  if (v == 0xFFFFFFFFu) return absl::OkStatus();
  if (v >= n_vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", key, "' = ", v, " is outside the vocabulary of ", n_vocab));
  }
  id = static_cast<int32_t>(v);
  return absl::OkStatus();
}

absl::Status ReadOptionalBool(const GgufFile& file, const char* key, bool& value) {
  if (file.Find(key) == nullptr) return absl::OkStatus();
  RINGLM_ASSIGN_OR_RETURN(value, file.GetBool(key));
  return absl::OkStatus();
}

// The "gpt2" (byte-level BPE) keys and defaults; `v.pieces` is already read.
absl::Status ReadBpeFields(const GgufFile& file, Vocabulary& v) {
  constexpr char kMerges[] = "tokenizer.ggml.merges";
  if (file.Find(kMerges) == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("tokenizer model 'gpt2' needs the key '", kMerges, "', which is missing"));
  }
  absl::StatusOr<std::vector<std::string_view>> merges = file.GetStringArray(kMerges);
  if (!merges.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", kMerges, "': ", merges.status().message()));
  }
  v.merges.assign(merges->begin(), merges->end());
  if (absl::Status s = CheckBpeMerges(v.pieces, v.merges); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("key '", kMerges, "': ", s.message()));
  }
  if (file.Find("tokenizer.ggml.pre") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(v.pre, file.GetString("tokenizer.ggml.pre"));
  }
  RINGLM_ASSIGN_OR_RETURN(v.add_bos, BpeDefaultAddBos(v.pre));
  v.add_space_prefix = false;
  // llama.cpp's defaults for "gpt2" vocabularies, when keys are absent.
  if (v.pieces.size() > 11) {
    v.bos_id = 11;
    v.eos_id = 11;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Vocabulary> LoadVocabulary(const GgufFile& file) {
  Vocabulary v;
  RINGLM_ASSIGN_OR_RETURN(v.model, file.GetString("tokenizer.ggml.model"));
  const bool is_gpt2 = v.model == "gpt2";
  if (v.model != "llama" && !is_gpt2) {
    return absl::UnimplementedError(
        absl::StrCat("unsupported tokenizer model '", v.model, "' (supported: llama, gpt2)"));
  }
  RINGLM_ASSIGN_OR_RETURN(std::vector<std::string_view> tokens,
                          file.GetStringArray("tokenizer.ggml.tokens"));
  const size_t n = tokens.size();
  v.pieces.assign(tokens.begin(), tokens.end());
  if (file.Find("tokenizer.ggml.scores") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(v.scores, file.GetFloatArray("tokenizer.ggml.scores"));
  } else {
    v.scores.assign(n, 0.0f);
  }
  if (file.Find("tokenizer.ggml.token_type") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(std::vector<int64_t> types,
                            file.GetIntArray("tokenizer.ggml.token_type"));
    v.types.reserve(types.size());
    for (int64_t t : types) {
      if (t < 0 || t > static_cast<int64_t>(TokenType::kByte)) {
        return absl::InvalidArgumentError(absl::StrCat("token type ", t, " is not 0..6"));
      }
      v.types.push_back(static_cast<TokenType>(t));
    }
  } else {
    v.types.assign(n, TokenType::kNormal);
  }
  if (v.scores.size() != n || v.types.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer arrays disagree: ", n, " tokens, ",
                                                   v.scores.size(), " scores, ", v.types.size(),
                                                   " token types"));
  }
  if (is_gpt2) {
    RINGLM_RETURN_IF_ERROR(ReadBpeFields(file, v));
  } else if (n > 2) {
    // llama.cpp's defaults for SentencePiece vocabularies, when keys are absent.
    v.unk_id = 0;
    v.bos_id = 1;
    v.eos_id = 2;
  }
  RINGLM_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.bos_token_id", n, v.bos_id));
  RINGLM_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.eos_token_id", n, v.eos_id));
  RINGLM_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.unknown_token_id", n, v.unk_id));
  RINGLM_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.padding_token_id", n, v.pad_id));
  RINGLM_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.eot_token_id", n, v.eot_id));
  RINGLM_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.eom_token_id", n, v.eom_id));
  RINGLM_RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_bos_token", v.add_bos));
  RINGLM_RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_eos_token", v.add_eos));
  RINGLM_RETURN_IF_ERROR(
      ReadOptionalBool(file, "tokenizer.ggml.add_space_prefix", v.add_space_prefix));
  return v;
}

}  // namespace ringlm
