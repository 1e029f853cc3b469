// hf_tokenize_tool MODEL.gguf CORPUS.json: the token ids ringlm's tokenizer
// gives each text of CORPUS (a JSON array of strings), printed as
// {"plain": [[...], ...], "special": [[...], ...]}: "plain" without BOS/EOS,
// "special" with them as the model's metadata says. Special-token texts are
// parsed in both (as Hugging Face tokenizers always do). For check.sh.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "gguf/gguf_file.h"
#include "inference/vocabulary_loader.h"
#include "nlohmann/json.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: hf_tokenize_tool MODEL.gguf CORPUS.json\n");
    return 2;
  }
  auto file = ringlm::GgufFile::Open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
    return 1;
  }
  auto vocab = ringlm::LoadVocabulary(**file);
  if (!vocab.ok()) {
    std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str());
    return 1;
  }
  auto tok = ringlm::Tokenizer::Create(std::move(*vocab));
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json corpus = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!corpus.is_array()) {
    std::fprintf(stderr, "%s: not a JSON array of strings\n", argv[2]);
    return 1;
  }
  nlohmann::json out = {{"plain", nlohmann::json::array()}, {"special", nlohmann::json::array()}};
  for (const nlohmann::json& t : corpus) {
    if (!t.is_string()) {
      std::fprintf(stderr, "%s: not a JSON array of strings\n", argv[2]);
      return 1;
    }
    const std::string& s = t.get_ref<const std::string&>();
    out["plain"].push_back((*tok)->Encode(s, /*add_special=*/false, /*parse_special=*/true));
    out["special"].push_back((*tok)->Encode(s, /*add_special=*/true, /*parse_special=*/true));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
