#include "inference/kernel_flags.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "inference/ops/cpu_target.h"

namespace ringlm {

void AddKernelFlags(ArgParser& parser) {
  parser.AddOption("cpu-target", "NAME",
                   absl::StrCat("instruction-set path of the kernels, to measure another "
                                "machine's (same results, other speed): ",
                                absl::StrJoin(CompiledCpuTargets(), ", "),
                                ", as far as this CPU runs them (also RINGLM_CPU_TARGET)"),
                   CpuTargetFromEnvironment());
  // Once the OpenBLAS prompt path; accepted so that old command lines run.
  parser.AddFlag("fast-prefill", "no effect (prompt processing is exact and fast by default)");
}

absl::Status ApplyKernelFlags(const ArgParser& parser) {
  return SetCpuTarget(parser.GetString("cpu-target"));
}

}  // namespace ringlm
