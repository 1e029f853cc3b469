// A models file (ringlmd --models-file): the models a daemon serves, re-read
// on SIGHUP so models are added and removed without a restart.
#ifndef RINGLM_DAEMON_MODELS_FILE_H_
#define RINGLM_DAEMON_MODELS_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/model_set.h"

namespace ringlm {

// One line: "[NAME=]PATH [memory_mb=N]".
struct ModelsFileEntry {
  std::string name;  // NAME, else the file's base name
  std::string path;
  uint64_t memory_bytes = 0;  // memory_mb; 0 = the daemon decides
};

// Parses a models file: one model per line as above; blank lines and lines
// starting with '#' are skipped. InvalidArgument naming `source` and the
// line for a bad line, or a name given twice.
absl::StatusOr<std::vector<ModelsFileEntry>> ParseModelsFile(absl::string_view text,
                                                             absl::string_view source);

// Reads and parses `path` (at most 1 MiB). NotFound when it cannot be read.
absl::StatusOr<std::vector<ModelsFileEntry>> ReadModelsFile(const std::string& path);

class ModelHost;
class ApiServer;

// Makes the models served from the file the ones `wanted` names (a SIGHUP):
// loads each model not served yet (and adds it to `api`, if any), removes
// each model in `from_file` that `wanted` no longer names (30 s drain), and
// leaves the others alone, models given by --model too. A model that cannot
// be loaded or removed is logged and skipped; the rest goes on.
// `from_file`: the names now served from the file, updated.
void ApplyModelsFile(const std::vector<ModelsFileEntry>& wanted,
                     std::vector<std::string>& from_file, ModelHost& host, ApiServer* api);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_MODELS_FILE_H_
