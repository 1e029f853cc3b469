// Helpers shared by the `ringlm` subcommands.
#ifndef RINGLM_CLI_CLI_COMMON_H_
#define RINGLM_CLI_CLI_COMMON_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/arg_parser.h"
#include "inference/model.h"

namespace ringlm {

// Parses `args`; writes help to `out` and returns 0, or writes the error to
// `err` and returns 2, or returns -1 to mean "go on".
int ParseOrExit(ArgParser& parser, const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err);

// Writes "ringlm: <status>" to `err` and returns 1.
int Fail(const absl::Status& status, std::ostream& err);

// True when `stream` is std::cout or std::cerr (or std::clog) and the file
// descriptor behind it is a terminal: progress lines that rewrite themselves
// with \r are written only then.
bool IsTerminal(const std::ostream& stream);

// Opens a model for a whole-model run, with a progress line on `err` when it
// is a terminal, and a warning there when the context is above the training
// length.
absl::StatusOr<std::unique_ptr<Model>> LoadModelForCli(const std::string& path,
                                                       uint32_t context_size, std::ostream& err);

// The generated text as llama.cpp prints it: every token's piece joined,
// leading space kept, invalid UTF-8 replaced.
std::string JoinPieces(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

// JSON text of a string that may hold invalid UTF-8 (replaced by U+FFFD).
std::string JsonString(const std::string& text);

// Each layer's bytes in a few words: runs of equal sizes, e.g.
// "layer 0: 1.20 MiB, layers 1-26: 4.50 MiB each"; more than four runs (as
// mixed quantizations give) as the range, e.g. "7 sizes, 1.20 MiB (layer 3)
// to 1.45 MiB (layer 0)". Empty for no layers.
std::string DescribeLayerBytes(const std::vector<uint64_t>& layer_bytes);

}  // namespace ringlm

#endif  // RINGLM_CLI_CLI_COMMON_H_
