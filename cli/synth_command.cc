// Placeholder until the engine-speed work lands; replaced, not shipped.
#include "cli/cli_common.h"
#include "cli/commands.h"

namespace ringlm {

int RunSynth(const std::vector<std::string>&) {
  return Fail(absl::UnimplementedError("ringlm synth is not built yet"));
}

}  // namespace ringlm
