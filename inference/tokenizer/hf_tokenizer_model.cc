// The model-specific halves of ConvertHfTokenizer: which ringlm tokenizer a
// tokenizer.json maps onto, its merges, its pre-tokenizer name and the SPM
// scores derived from the merges.
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "inference/tokenizer/hf_tokenizer_internal.h"

namespace ringlm::synth_internal {
namespace {

using nlohmann::json;

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 "▁"

// The Split regexes llama.cpp implements, as tokenizer.json spells them
// (after Normalized below).
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kDeepseekV3Digits = R"(\p{N}{1,3})";
constexpr std::string_view kDeepseekV3Cjk =
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+";  // [一-龥぀-ゟ゠-ヿ]+
constexpr std::string_view kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The sequences of Split regexes (a ByteLevel with use_regex counting as
// GPT-2's) that ringlm implements, and the tokenizer.ggml.pre of each.
struct KnownSplits {
  std::string_view pre;
  std::vector<std::string_view> regexes;
};

const std::vector<KnownSplits>& Known() {
  static const auto* known = new std::vector<KnownSplits>{
      {"llama-bpe", {kLlama3Regex}},
      {"qwen2", {kQwen2Regex}},
      {"gpt-2", {kGpt2Regex}},
      {"deepseek-v3", {kDeepseekV3Digits, kDeepseekV3Cjk, kDeepseekV3Words}},
      {"tekken", {kTekkenRegex}},
  };
  return *known;
}

// Spelling variants of the same regex: literal CR/LF for \r \n, and
// llama.cpp's case-insensitive contractions instead of (?i:...).
std::string Normalized(const std::string& regex) {
  return absl::StrReplaceAll(regex, {{"\r", "\\r"},
                                     {"\n", "\\n"},
                                     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])",
                                      "(?i:'s|'t|'re|'ve|'m|'ll|'d)"}});
}

std::string TypeOf(const json& node) { return StringOr(node, "type"); }

// The nodes of a possibly nested Sequence (`list_key` holds its children).
void Flatten(const json& node, const char* list_key, std::vector<const json*>& out) {
  if (!node.is_object()) return;
  auto it = node.find(list_key);
  if (TypeOf(node) == "Sequence" && it != node.end() && it->is_array()) {
    for (const json& child : *it) Flatten(child, list_key, out);
    return;
  }
  out.push_back(&node);
}

std::vector<const json*> Nodes(const json& root, const char* key, const char* list_key) {
  std::vector<const json*> out;
  auto it = root.find(key);
  if (it != root.end()) Flatten(*it, list_key, out);
  return out;
}

bool HasType(const std::vector<const json*>& nodes, const char* type) {
  for (const json* n : nodes) {
    if (TypeOf(*n) == type) return true;
  }
  return false;
}

// A Replace normalizer turning " " into "▁".
bool IsSpaceToMark(const json& n) {
  if (TypeOf(n) != "Replace") return false;
  auto pattern = n.find("pattern");
  return pattern != n.end() && StringOr(*pattern, "String") == " " &&
         StringOr(n, "content") == kSpaceMark;
}

std::string Quote(const std::string& text) {
  constexpr size_t kMax = 60;
  if (text.size() <= kMax) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, kMax), "...'");
}

}  // namespace

std::string StringOr(const json& j, const char* key, std::string fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return fallback;
  return it->get<std::string>();
}

absl::StatusOr<HfModelKind> ClassifyModel(const json& root, const std::string& file) {
  auto model = root.find("model");
  if (model == root.end() || !model->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": no \"model\" object"));
  }
  const std::string type = StringOr(*model, "type", "BPE");  // older files omit it
  if (type != "BPE") {
    return absl::UnimplementedError(absl::StrCat(file, ": model type '", type,
                                                 "' is not supported (only BPE vocabularies are)"));
  }
  const std::vector<const json*> normalizers = Nodes(root, "normalizer", "normalizers");
  const std::vector<const json*> pre = Nodes(root, "pre_tokenizer", "pretokenizers");
  const std::vector<const json*> decoders = Nodes(root, "decoder", "decoders");
  if (HasType(pre, "ByteLevel") || HasType(decoders, "ByteLevel")) {
    for (const json* n : normalizers) {
      // NFC is what byte-level vocabularies expect of their input anyway;
      // llama.cpp does not apply it either.
      if (TypeOf(*n) != "NFC") {
        return absl::UnimplementedError(
            absl::StrCat(file, ": byte-level BPE normalizer '", TypeOf(*n), "' is not supported"));
      }
    }
    return HfModelKind::kByteLevelBpe;
  }
  auto fallback = model->find("byte_fallback");
  const bool byte_fallback = fallback != model->end() && fallback->is_boolean() && *fallback;
  bool space_mark = HasType(pre, "Metaspace");
  for (const json* n : normalizers) {
    if (IsSpaceToMark(*n)) {
      space_mark = true;
    } else if (TypeOf(*n) != "Prepend" || StringOr(*n, "prepend") != kSpaceMark) {
      return absl::UnimplementedError(
          absl::StrCat(file, ": SentencePiece-style normalizer '", TypeOf(*n),
                       "' is not supported (only Replace ' ' -> '▁' and Prepend '▁')"));
    }
  }
  for (const json* n : pre) {
    const std::string t = TypeOf(*n);
    if (t == "Metaspace") continue;
    // Gemma splits at " " after its normalizer has replaced every " ": a no-op.
    auto pattern = n->find("pattern");
    if (t == "Split" && space_mark && pattern != n->end() && StringOr(*pattern, "String") == " ") {
      continue;
    }
    return absl::UnimplementedError(
        absl::StrCat(file, ": SentencePiece-style pre-tokenizer '", t, "' is not supported"));
  }
  if (!byte_fallback || !space_mark) {
    return absl::UnimplementedError(absl::StrCat(
        file, ": a BPE model without a ByteLevel pre-tokenizer needs byte_fallback and ",
        "SentencePiece '▁' spaces to map onto the SPM tokenizer"));
  }
  return HfModelKind::kSentencePieceBpe;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMerges(
    const json& merges, const std::string& file) {
  std::vector<std::pair<std::string, std::string>> out;
  if (merges.is_null()) return out;
  if (!merges.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": model.merges is not an array"));
  }
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
      if (space == std::string::npos || space + 1 >= s.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": merge ", i, " ", Quote(s), " is not \"left right\""));
      }
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string() &&
               !m[0].get_ref<const std::string&>().empty() &&
               !m[1].get_ref<const std::string&>().empty()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": merge ", i, " is neither \"left right\" nor a pair of non-empty strings"));
    }
  }
  return out;
}

absl::StatusOr<std::string> ByteLevelPreName(const json& root, const std::string& file) {
  // The splits in order, as written (for messages) and normalized.
  std::vector<std::string> written;
  std::vector<std::string> normalized;
  for (const json* n : Nodes(root, "pre_tokenizer", "pretokenizers")) {
    const std::string type = TypeOf(*n);
    if (type == "ByteLevel") {
      auto prefix = n->find("add_prefix_space");
      if (prefix != n->end() && prefix->is_boolean() && *prefix) {
        return absl::UnimplementedError(
            absl::StrCat(file, ": ByteLevel pre-tokenizer with add_prefix_space is not supported"));
      }
      auto regex = n->find("use_regex");
      if (regex == n->end() || (regex->is_boolean() && *regex)) {
        written.emplace_back(kGpt2Regex);
        normalized.emplace_back(kGpt2Regex);
      }
      continue;
    }
    auto pattern = n->find("pattern");
    const std::string regex = pattern == n->end() ? "" : StringOr(*pattern, "Regex");
    if (type != "Split" || regex.empty()) {
      return absl::UnimplementedError(
          absl::StrCat(file, ": pre-tokenizer '", type, "' is not supported"));
    }
    if (StringOr(*n, "behavior", "Isolated") != "Isolated") {
      return absl::UnimplementedError(
          absl::StrCat(file, ": Split behavior '", StringOr(*n, "behavior"), "' is not supported"));
    }
    written.push_back(regex);
    normalized.push_back(Normalized(regex));
  }
  if (normalized.empty()) {
    return absl::UnimplementedError(
        absl::StrCat(file, ": a byte-level BPE without a pre-tokenizer split is not supported"));
  }
  for (const KnownSplits& known : Known()) {
    if (std::equal(normalized.begin(), normalized.end(), known.regexes.begin(),
                   known.regexes.end())) {
      return std::string(known.pre);
    }
  }
  // Name the first regex that no known sequence has; if every one is known,
  // the sequence as a whole is not.
  for (size_t i = 0; i < normalized.size(); ++i) {
    bool found = false;
    for (const KnownSplits& known : Known()) {
      found = found || std::find(known.regexes.begin(), known.regexes.end(), normalized[i]) !=
                           known.regexes.end();
    }
    if (!found) {
      return absl::UnimplementedError(absl::StrCat(
          file, ": the pre-tokenizer is not supported: Split regex ", Quote(written[i]),
          " is none of Llama 3's, Qwen 2's, GPT-2's, Mistral's tekken or DeepSeek V3's"));
    }
  }
  std::vector<std::string> quoted;
  for (const std::string& w : written) quoted.push_back(Quote(w));
  return absl::UnimplementedError(absl::StrCat(
      file, ": the pre-tokenizer is not supported: the sequence of ", written.size(), " splits (",
      absl::StrJoin(quoted, ", "),
      ") is none of Llama 3's, Qwen 2's, GPT-2's, Mistral's tekken (one split each) or DeepSeek "
      "V3's (three)"));
}

bool SentencePieceAddsSpacePrefix(const json& root) {
  for (const json* n : Nodes(root, "normalizer", "normalizers")) {
    if (TypeOf(*n) == "Prepend" && StringOr(*n, "prepend") == kSpaceMark) return true;
  }
  for (const json* n : Nodes(root, "pre_tokenizer", "pretokenizers")) {
    if (TypeOf(*n) != "Metaspace") continue;
    const std::string scheme = StringOr(*n, "prepend_scheme");
    if (!scheme.empty()) return scheme != "never";
    auto prefix = n->find("add_prefix_space");
    return prefix == n->end() || !prefix->is_boolean() || *prefix;
  }
  return false;
}

absl::StatusOr<std::vector<float>> ScoresFromMerges(
    const std::vector<std::string>& pieces,
    const std::vector<std::pair<std::string, std::string>>& merges, const std::string& file) {
  std::unordered_map<std::string_view, size_t> ids;
  ids.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) ids.emplace(pieces[i], i);
  std::vector<float> scores(pieces.size(), 0.0f);
  std::vector<bool> scored(pieces.size(), false);
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [left, right] = merges[r];
    joined = left + right;
    for (const std::string* p : {&left, &right, static_cast<const std::string*>(&joined)}) {
      if (!ids.contains(*p)) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": merge ", r, " ", Quote(left + " " + right), " needs ", Quote(*p),
                         ", which is not in the vocabulary"));
      }
    }
    const size_t id = ids[joined];
    if (scored[id]) continue;  // an earlier merge makes it already
    scored[id] = true;
    scores[id] = -static_cast<float>(r + 1);
  }
  return scores;
}

}  // namespace ringlm::synth_internal
