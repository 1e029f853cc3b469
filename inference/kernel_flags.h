// The command-line flags of every binary that computes (ringlmd, `ringlm
// generate`, `ringlm bench`) that choose how the kernels run.
#ifndef RINGLM_INFERENCE_KERNEL_FLAGS_H_
#define RINGLM_INFERENCE_KERNEL_FLAGS_H_

#include "absl/status/status.h"
#include "base/arg_parser.h"

namespace ringlm {

// Declares --cpu-target NAME (default: $RINGLM_CPU_TARGET, else auto) and
// --fast-prefill, which has no effect any more.
void AddKernelFlags(ArgParser& parser);

// Applies them (call once, after Parse and before computing). The error of
// SetCpuTarget (cpu_target.h) for a name this machine cannot run.
absl::Status ApplyKernelFlags(const ArgParser& parser);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_KERNEL_FLAGS_H_
