#include "cli/cli_common.h"

#include <unistd.h>

#include <iostream>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace ringlm {

int ParseOrExit(ArgParser& parser, const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err) {
  if (absl::Status s = parser.Parse(args); !s.ok()) {
    err << "ringlm: " << s.message() << "\n";
    return 2;
  }
  if (parser.help_requested()) {
    out << parser.HelpText();
    return 0;
  }
  return -1;
}

int Fail(const absl::Status& status, std::ostream& err) {
  err << "ringlm: " << status.ToString() << "\n";
  return 1;
}

bool IsTerminal(const std::ostream& stream) {
  if (&stream == &std::cout) return isatty(STDOUT_FILENO);
  if (&stream == &std::cerr || &stream == &std::clog) return isatty(STDERR_FILENO);
  return false;
}

absl::StatusOr<std::unique_ptr<Model>> LoadModelForCli(const std::string& path,
                                                       uint32_t context_size, std::ostream& err) {
  ModelOptions options;
  options.context_size = context_size;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(path, options);
  if (!model.ok()) return model.status();
  const Model& m = **model;
  if (m.context_above_training()) {
    err << absl::StrFormat(
        "ringlm: warning: context size %u is above the model's context_length %u; "
        "quality may drop past it\n",
        m.context_size(), m.config().n_ctx_train);
  }
  if (IsTerminal(err)) {
    m.PageIn(m.weights(), [&err](uint64_t done, uint64_t total) {
      err << absl::StrFormat("\rloading weights: %3d%% (%llu / %llu MiB)",
                             total == 0 ? 100 : static_cast<int>(done * 100 / total),
                             static_cast<unsigned long long>(done >> 20),
                             static_cast<unsigned long long>(total >> 20));
      if (done == total) err << '\n';
    });
  } else {
    m.PageIn(m.weights());
  }
  return model;
}

std::string JoinPieces(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  StreamingDecoder decoder(tokenizer);
  std::string text;
  for (int32_t id : ids) text += decoder.Push(id);
  return text + decoder.Flush();
}

std::string JsonString(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ringlm
