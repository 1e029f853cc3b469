// Helpers shared by the `ringlm` subcommands.
#ifndef RINGLM_CLI_CLI_COMMON_H_
#define RINGLM_CLI_CLI_COMMON_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/arg_parser.h"
#include "inference/model.h"

namespace ringlm {

// Parses `args`; prints help and returns 0, or prints the error and returns
// 2, or returns -1 to mean "go on".
int ParseOrExit(ArgParser& parser, const std::vector<std::string>& args);

// Prints "ringlm: <status message>" to stderr and returns 1.
int Fail(const absl::Status& status);

// Opens a model for a whole-model run, with a progress line on a terminal
// and a warning when the context is above the training length.
absl::StatusOr<std::unique_ptr<Model>> LoadModelForCli(const std::string& path,
                                                       uint32_t context_size);

// The generated text as llama.cpp prints it: every token's piece joined,
// leading space kept, invalid UTF-8 replaced.
std::string JoinPieces(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

// JSON text of a string that may hold invalid UTF-8 (replaced by U+FFFD).
std::string JsonString(const std::string& text);

}  // namespace ringlm

#endif  // RINGLM_CLI_CLI_COMMON_H_
