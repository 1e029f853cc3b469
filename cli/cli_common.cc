#include "cli/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
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
  LoadProgress progress;
  if (IsTerminal(err)) {
    progress = [&err](uint64_t done, uint64_t total) {
      err << absl::StrFormat("\rloading weights: %3d%% (%llu / %llu MiB)",
                             total == 0 ? 100 : static_cast<int>(done * 100 / total),
                             static_cast<unsigned long long>(done >> 20),
                             static_cast<unsigned long long>(total >> 20));
      if (done == total) err << '\n';
    };
  }
  RINGLM_RETURN_IF_ERROR((*model)->LoadIntoMemory(progress));
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

std::string DescribeLayerBytes(const std::vector<uint64_t>& layer_bytes) {
  auto mib = [](uint64_t bytes) { return absl::StrFormat("%.2f MiB", bytes / 1048576.0); };
  struct Run {
    size_t first, last;  // layers [first, last]
    uint64_t bytes;
  };
  std::vector<Run> runs;
  for (size_t i = 0; i < layer_bytes.size(); ++i) {
    if (!runs.empty() && runs.back().bytes == layer_bytes[i]) {
      runs.back().last = i;
    } else {
      runs.push_back({i, i, layer_bytes[i]});
    }
  }
  constexpr size_t kMaxRuns = 4;
  if (runs.size() <= kMaxRuns) {
    std::vector<std::string> parts;
    for (const Run& r : runs) {
      parts.push_back(r.first == r.last ? absl::StrFormat("layer %zu: %s", r.first, mib(r.bytes))
                                        : absl::StrFormat("layers %zu-%zu: %s each", r.first,
                                                          r.last, mib(r.bytes)));
    }
    return absl::StrJoin(parts, ", ");
  }
  const auto [low, high] = std::minmax_element(layer_bytes.begin(), layer_bytes.end());
  std::vector<uint64_t> sizes = layer_bytes;
  std::sort(sizes.begin(), sizes.end());
  const size_t distinct = std::unique(sizes.begin(), sizes.end()) - sizes.begin();
  return absl::StrFormat("%zu sizes, %s (layer %zu) to %s (layer %zu)", distinct, mib(*low),
                         low - layer_bytes.begin(), mib(*high), high - layer_bytes.begin());
}

}  // namespace ringlm
