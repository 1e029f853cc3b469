// Which instruction-set path every kernel of inference/ops takes.
//
// By default (`auto`) each kernel runs the best path this CPU supports.
// SetCpuTarget caps it, so that one machine can measure and test the paths
// that other machines of a cluster run. The names:
//   auto        the best this CPU runs
//   avx512vnni  x86 AVX-512 with VNNI integer dots (Ice Lake, Sapphire
//               Rapids, Zen 4)
//   avx512      x86 AVX-512 without VNNI (Skylake-SP): Highway's AVX3 target
//               and the AVX2 integer-dot kernels
//   avx2        x86 AVX2 + FMA + F16C
//   neon        ARM NEON
//   scalar      portable code only (x86 builds; ARM builds have no path
//               without NEON)
// A capped path computes the same bits as any other (the kernels are
// bit-identical to their scalar references), only slower or faster.
//
// Process-wide. SetCpuTarget is meant for startup, before compute threads
// run; calls racing with kernels are safe but a kernel call may run on
// either path.
#ifndef RINGLM_INFERENCE_OPS_CPU_TARGET_H_
#define RINGLM_INFERENCE_OPS_CPU_TARGET_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace ringlm {

// Caps the kernels at `name` (one of the names above). InvalidArgument for
// an unknown name; FailedPrecondition, listing what runs here, when this
// CPU or build cannot run it. On error nothing changes.
absl::Status SetCpuTarget(std::string_view name);

// What runs now, e.g. "avx2" (never "auto").
std::string ActiveCpuTargetName();

// The names SetCpuTarget accepts on this machine, best first, "auto" last.
std::vector<std::string> RunnableCpuTargets();

// The names this build knows for its architecture, best first, "auto" last:
// the same on every CPU, for help texts (some may not run here).
std::vector<std::string> CompiledCpuTargets();

// The value of RINGLM_CPU_TARGET, or "auto" when it is unset or empty: the
// default of the --cpu-target flags.
std::string CpuTargetFromEnvironment();

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_CPU_TARGET_H_
