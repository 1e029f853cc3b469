// `ringlm tokenize`: the token ids of a text.
#include <ostream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "gguf/gguf_file.h"
#include "inference/vocabulary_loader.h"

namespace ringlm {

int RunTokenize(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgParser p("ringlm tokenize --model PATH --text TEXT [--json]",
              "Prints the token ids of TEXT. BOS is added as the model's metadata says, and\n"
              "special-token texts such as <s> are parsed, as llama-tokenize does.");
  p.AddOption("model", "PATH", "GGUF model file");
  p.AddOption("text", "TEXT", "the text to tokenize");
  p.AddFlag("no-parse-special", "treat special-token texts as plain text");
  p.AddFlag("json", "print {\"ids\":[...]}");
  if (int rc = ParseOrExit(p, args, out, err); rc >= 0) return rc;
  if (!p.Has("model")) return Fail(absl::InvalidArgumentError("--model is required"), err);
  if (!p.Has("text")) return Fail(absl::InvalidArgumentError("--text is required"), err);
  // Only the vocabulary is needed: no weights are touched.
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(p.GetString("model"));
  if (!file.ok()) return Fail(file.status(), err);
  absl::StatusOr<Vocabulary> vocab = LoadVocabulary(**file);
  if (!vocab.ok()) return Fail(vocab.status(), err);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(std::move(*vocab));
  if (!tok.ok()) return Fail(tok.status(), err);
  const std::vector<int32_t> ids =
      (*tok)->Encode(p.GetString("text"), /*add_special=*/true, !p.GetFlag("no-parse-special"));
  if (p.GetFlag("json")) {
    out << absl::StrFormat("{\"ids\":[%s]}\n", absl::StrJoin(ids, ",").c_str());
    return 0;
  }
  for (int32_t id : ids) {
    out << absl::StrFormat("%6d -> %s\n", id, JsonString((*tok)->vocabulary().pieces[id]).c_str());
  }
  return 0;
}

}  // namespace ringlm
