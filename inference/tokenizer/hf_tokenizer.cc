// ConvertHfTokenizer / LoadHfTokenizer: pieces, added tokens, token types,
// special ids and the chat template. The model-specific parts are in
// hf_tokenizer_model.cc.
#include "inference/tokenizer/hf_tokenizer.h"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "inference/tokenizer/hf_tokenizer_internal.h"

namespace ringlm {
namespace {

using nlohmann::json;
using synth_internal::HfModelKind;
using synth_internal::StringOr;

constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;
constexpr float kAddedTokenScore = -1000.0f;  // llama.cpp's for added tokens

struct AddedToken {
  std::string content;
  bool special = false;
};

// What the converter has read so far, and the names for its messages.
struct Context {
  std::string json_file;    // "<name>/tokenizer.json"
  std::string config_file;  // "<name>/tokenizer_config.json"
};

absl::StatusOr<json> Parse(std::string_view text, const std::string& file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(file, ": malformed JSON"));
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a JSON object"));
  }
  return j;
}

absl::StatusOr<int32_t> ParseId(const json& j, const std::string& file, const std::string& what) {
  if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > kMaxId) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": ", what, " has id ", j.dump(), ", not an integer in 0..", kMaxId));
  }
  return static_cast<int32_t>(j.get<int64_t>());
}

// llama.cpp's does_token_look_special (convert_hf_to_gguf.py).
bool LooksSpecial(std::string_view t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (t.starts_with("<|") && t.ends_with("|>")) return true;
  if (t.starts_with("<\xEF\xBD\x9C") && t.ends_with("\xEF\xBD\x9C>")) return true;
  return t.starts_with("<unused") && t.ends_with(">");
}

bool IsBytePiece(std::string_view p) {
  if (p.size() != 6 || !p.starts_with("<0x") || p[5] != '>') return false;
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return hex(p[3]) && hex(p[4]);
}

// model.vocab as id -> piece.
absl::StatusOr<std::map<int32_t, std::string>> ReadModelVocab(const json& root, const Context& c) {
  const json& model = root["model"];
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.json_file, ": model.vocab is not an object of piece -> id"));
  }
  std::map<int32_t, std::string> out;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    RINGLM_ASSIGN_OR_RETURN(
        const int32_t id, ParseId(it.value(), c.json_file, absl::StrCat("piece '", it.key(), "'")));
    auto [pos, inserted] = out.emplace(id, it.key());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(c.json_file, ": id ", id, " is used by both '",
                                                     pos->second, "' and '", it.key(), "'"));
    }
  }
  return out;
}

// tokenizer.json's added_tokens, then tokenizer_config.json's
// added_tokens_decoder for ids the first does not name.
absl::StatusOr<std::map<int32_t, AddedToken>> ReadAddedTokens(const json& root, const json& config,
                                                              const Context& c) {
  std::map<int32_t, AddedToken> out;
  auto read = [&](const json& entry, std::optional<int32_t> id, const std::string& file,
                  bool from_config) -> absl::Status {
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": an added token has no content"));
    }
    const std::string content = entry["content"].get<std::string>();
    if (!id.has_value()) {
      if (!entry.contains("id")) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": added token '", content, "' has no id"));
      }
      RINGLM_ASSIGN_OR_RETURN(id, ParseId(entry["id"], file, "added token '" + content + "'"));
    }
    auto special = entry.find("special");
    AddedToken token{content, special != entry.end() && special->is_boolean() && *special};
    auto [pos, inserted] = out.emplace(*id, token);
    if (!inserted && !from_config) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": added tokens '", pos->second.content,
                                                     "' and '", content, "' share id ", *id));
    }
    return absl::OkStatus();
  };
  if (auto added = root.find("added_tokens"); added != root.end() && !added->is_null()) {
    if (!added->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.json_file, ": added_tokens is not an array"));
    }
    for (const json& entry : *added)
      RINGLM_RETURN_IF_ERROR(read(entry, std::nullopt, c.json_file, false));
  }
  if (auto decoder = config.find("added_tokens_decoder");
      decoder != config.end() && decoder->is_object()) {
    for (auto it = decoder->begin(); it != decoder->end(); ++it) {
      int64_t id = -1;
      if (!absl::SimpleAtoi(it.key(), &id) || id < 0 || id > kMaxId) {
        return absl::InvalidArgumentError(absl::StrCat(c.config_file,
                                                       ": added_tokens_decoder key '", it.key(),
                                                       "' is not an id in 0..", kMaxId));
      }
      RINGLM_RETURN_IF_ERROR(read(it.value(), static_cast<int32_t>(id), c.config_file, true));
    }
  }
  return out;
}

// A special token named by tokenizer_config.json: "text" or {"content": "text"}.
std::optional<std::string> ConfigToken(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<bool> ConfigBool(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

// The special tokens the post_processor's TemplateProcessing puts before and
// after a single sequence ("" when none).
std::pair<std::string, std::string> TemplateEnds(const json& root) {
  const json* post = nullptr;
  if (auto it = root.find("post_processor"); it != root.end()) post = &*it;
  if (post != nullptr && StringOr(*post, "type") == "Sequence" && post->contains("processors") &&
      (*post)["processors"].is_array()) {
    const json* found = nullptr;
    for (const json& p : (*post)["processors"]) {
      if (StringOr(p, "type") == "TemplateProcessing") found = &p;
    }
    post = found;
  }
  if (post == nullptr || StringOr(*post, "type") != "TemplateProcessing") return {};
  auto single = post->find("single");
  if (single == post->end() || !single->is_array() || single->empty()) return {};
  auto special = [](const json& item) {
    return item.is_object() && item.contains("SpecialToken") ? StringOr(item["SpecialToken"], "id")
                                                             : std::string();
  };
  return {special(single->front()), special(single->back())};
}

absl::Status SetSpecialIds(const json& root, const json& config, const Context& c,
                           const std::unordered_map<std::string_view, int32_t>& ids,
                           Vocabulary& v) {
  auto find = [&](const std::optional<std::string>& text, const char* key,
                  int32_t& id) -> absl::Status {
    if (!text.has_value() || text->empty()) return absl::OkStatus();
    auto it = ids.find(*text);
    if (it == ids.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.config_file, ": ", key, " '", *text, "' is not in the vocabulary"));
    }
    id = it->second;
    return absl::OkStatus();
  };
  const auto [first, last] = TemplateEnds(root);
  std::optional<std::string> bos = ConfigToken(config, "bos_token");
  if (!config.contains("bos_token") && !first.empty()) bos = first;
  std::optional<std::string> unk = ConfigToken(config, "unk_token");
  if (!unk.has_value()) unk = StringOr(root["model"], "unk_token");
  v.bos_id = v.eos_id = v.unk_id = v.pad_id = -1;
  RINGLM_RETURN_IF_ERROR(find(bos, "bos_token", v.bos_id));
  RINGLM_RETURN_IF_ERROR(find(ConfigToken(config, "eos_token"), "eos_token", v.eos_id));
  RINGLM_RETURN_IF_ERROR(find(unk, "unk_token", v.unk_id));
  RINGLM_RETURN_IF_ERROR(find(ConfigToken(config, "pad_token"), "pad_token", v.pad_id));
  v.add_bos = ConfigBool(config, "add_bos_token")
                  .value_or(v.bos_id >= 0 && !first.empty() && first == v.pieces[v.bos_id]);
  v.add_eos = ConfigBool(config, "add_eos_token")
                  .value_or(v.eos_id >= 0 && !last.empty() && last == v.pieces[v.eos_id]);
  if (v.add_bos && v.bos_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.config_file, ": add_bos_token is set but there is no bos_token"));
  }
  if (v.add_eos && v.eos_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.config_file, ": add_eos_token is set but there is no eos_token"));
  }
  // llama.cpp's loader finds these by text and makes them control tokens.
  static constexpr std::string_view kEot[] = {"<|eot_id|>",
                                              "<|im_end|>",
                                              "<|end|>",
                                              "<end_of_turn>",
                                              "<|endoftext|>",
                                              "<EOT>",
                                              "<\xEF\xBD\x9C"
                                              "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};
  for (std::string_view text : kEot) {
    if (auto it = ids.find(text); it != ids.end()) {
      v.eot_id = it->second;
      v.types[v.eot_id] = TokenType::kControl;
      break;
    }
  }
  if (auto it = ids.find("<|eom_id|>"); it != ids.end()) {
    v.eom_id = it->second;
    v.types[v.eom_id] = TokenType::kControl;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ChatTemplate(const json& config, const Context& c) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::vector<std::string> names;
    for (const json& t : *it) {
      const std::string name = StringOr(t, "name");
      if (name == "default" && t.contains("template") && t["template"].is_string()) {
        return t["template"].get<std::string>();
      }
      names.push_back(name);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(c.config_file,
                     ": chat_template has no \"default\" (has: ", absl::StrJoin(names, ", "), ")"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(c.config_file, ": chat_template is neither a string nor a list"));
}

absl::StatusOr<SynthTokenizer> Convert(const json& root, const json& config, const Context& c) {
  RINGLM_ASSIGN_OR_RETURN(const HfModelKind kind, synth_internal::ClassifyModel(root, c.json_file));
  RINGLM_ASSIGN_OR_RETURN(const auto model_vocab, ReadModelVocab(root, c));
  RINGLM_ASSIGN_OR_RETURN(const auto added, ReadAddedTokens(root, config, c));
  int32_t n = 0;
  if (!model_vocab.empty()) n = model_vocab.rbegin()->first + 1;
  if (!added.empty()) n = std::max(n, added.rbegin()->first + 1);
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(c.json_file, ": empty vocabulary"));

  SynthTokenizer out;
  Vocabulary& v = out.vocab;
  const bool spm = kind == HfModelKind::kSentencePieceBpe;
  v.model = spm ? "llama" : "gpt2";
  v.pieces.resize(n);
  v.types.assign(n, TokenType::kUnused);
  for (int32_t i = 0; i < n; ++i) v.pieces[i] = absl::StrCat("[PAD", i, "]");
  for (const auto& [id, piece] : model_vocab) {
    v.pieces[id] = piece;
    v.types[id] = spm && IsBytePiece(piece) ? TokenType::kByte : TokenType::kNormal;
  }
  for (const auto& [id, token] : added) {
    v.pieces[id] = token.content;
    v.types[id] = token.special || LooksSpecial(token.content) ? TokenType::kControl
                                                               : TokenType::kUserDefined;
  }
  std::unordered_map<std::string_view, int32_t> ids;
  ids.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    auto [pos, inserted] = ids.emplace(v.pieces[i], i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(c.json_file, ": piece '", v.pieces[i],
                                                     "' appears twice, as ids ", pos->second,
                                                     " and ", i));
    }
  }

  const json& model = root["model"];
  RINGLM_ASSIGN_OR_RETURN(const auto merges,
                          synth_internal::ParseMerges(
                              model.contains("merges") ? model["merges"] : json(), c.json_file));
  if (spm) {
    RINGLM_ASSIGN_OR_RETURN(v.scores,
                            synth_internal::ScoresFromMerges(v.pieces, merges, c.json_file));
    for (const auto& [id, token] : added) {
      if (!model_vocab.contains(id)) v.scores[id] = kAddedTokenScore;
    }
    v.add_space_prefix = synth_internal::SentencePieceAddsSpacePrefix(root);
  } else {
    RINGLM_ASSIGN_OR_RETURN(v.pre, synth_internal::ByteLevelPreName(root, c.json_file));
    v.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const auto& [left, right] = merges[i];
      if (left.find(' ', 1) != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(c.json_file, ": merge ", i, " left side '", left, "' contains a space"));
      }
      v.merges.push_back(absl::StrCat(left, " ", right));
    }
    if (absl::Status s = CheckBpeMerges(v.pieces, v.merges); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(c.json_file, ": ", s.message()));
    }
    v.add_space_prefix = false;
  }
  if (spm) {
    // The unknown piece keeps its own type even when it is an added token.
    const std::string unk = ConfigToken(config, "unk_token").value_or(StringOr(model, "unk_token"));
    if (auto it = ids.find(unk); !unk.empty() && it != ids.end()) {
      v.types[it->second] = TokenType::kUnknown;
    }
  }
  RINGLM_RETURN_IF_ERROR(SetSpecialIds(root, config, c, ids, v));
  RINGLM_ASSIGN_OR_RETURN(out.chat_template, ChatTemplate(config, c));
  return out;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read '", path, "'"));
  return text;
}

}  // namespace

absl::StatusOr<SynthTokenizer> ConvertHfTokenizer(std::string_view tokenizer_json,
                                                  std::string_view tokenizer_config_json,
                                                  std::string_view name) {
  const std::string dir(name);
  const Context c{dir + "/tokenizer.json", dir + "/tokenizer_config.json"};
  RINGLM_ASSIGN_OR_RETURN(const json root, Parse(tokenizer_json, c.json_file));
  RINGLM_ASSIGN_OR_RETURN(const json config, Parse(tokenizer_config_json, c.config_file));
  // The checks above make every access safe; this is the backstop for a
  // type mismatch missed in untrusted input.
  try {
    absl::StatusOr<SynthTokenizer> out = Convert(root, config, c);
    if (out.ok()) out->name = std::string(name);
    return out;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(c.json_file, ": unexpected JSON: ", e.what()));
  }
}

absl::StatusOr<SynthTokenizer> LoadHfTokenizer(const std::string& dir) {
  RINGLM_ASSIGN_OR_RETURN(const std::string tokenizer, ReadFile(dir + "/tokenizer.json"));
  RINGLM_ASSIGN_OR_RETURN(const std::string config, ReadFile(dir + "/tokenizer_config.json"));
  return ConvertHfTokenizer(tokenizer, config, dir);
}

}  // namespace ringlm
