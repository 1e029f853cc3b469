// SetCpuTarget: a path is a set of Highway targets to disable plus a cap on
// the integer-dot kernels of qgemm_internal.h (MatMul's float tiles and
// K-quant kernels follow ActiveQGemmTarget too).
#include "inference/ops/cpu_target.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hwy/targets.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/qgemm_internal.h"

namespace ringlm {
namespace {

#ifdef HWY_AVX3_ZEN4
constexpr int64_t kAvx3Zen4 = HWY_AVX3_ZEN4;
#else
constexpr int64_t kAvx3Zen4 = 0;
#endif
#ifdef HWY_AVX3_SPR
constexpr int64_t kAvx3Spr = HWY_AVX3_SPR;
#else
constexpr int64_t kAvx3Spr = 0;
#endif
constexpr int64_t kAvx3Newer = HWY_AVX3_DL | kAvx3Zen4 | kAvx3Spr;
constexpr int64_t kAvx3Any = HWY_AVX3 | kAvx3Newer;
constexpr int64_t kX86Simd = HWY_SSSE3 | HWY_SSE4 | HWY_AVX2 | kAvx3Any;
constexpr int64_t kArmSve = HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128;
constexpr int64_t kArmSimd = HWY_NEON | kArmSve;

struct Path {
  const char* name;
  int64_t needs_hwy;    // one of these Highway targets must run here
  int64_t disable_hwy;  // Highway targets the path turns off
  QGemmTarget qgemm;    // cap on the integer dots (qgemm_internal.h)
  bool needs_qgemm;     // whether the capped target's kernels must run here
};

// Best first; "auto" is handled apart.
constexpr Path kPaths[] = {
    {"avx512vnni", kAvx3Any, 0, QGemmTarget::kAvx512Vnni, true},
    {"avx512", HWY_AVX3, kAvx3Newer, QGemmTarget::kAvx2, true},
    {"avx2", HWY_AVX2, kAvx3Any, QGemmTarget::kAvx2, true},
    // Dotprod is optional on ARM: without it "neon" runs MatMul's per-dot
    // NEON kernels, so kNeonDot caps nothing and is not needed.
    {"neon", HWY_NEON, kArmSve, QGemmTarget::kNeonDot, false},
    // Compiled in only where it is not the baseline (x86, not ARM).
    {"scalar", HWY_SCALAR | HWY_EMU128, kX86Simd | kArmSimd, QGemmTarget::kNone, false},
};

// What the CPU and build run before any cap: read once, before the first
// DisableTargets (only this file calls it).
int64_t NativeHwyTargets() {
  static const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  return targets;
}

bool Runnable(const Path& p) {
  if ((NativeHwyTargets() & p.needs_hwy) == 0) return false;
  return !p.needs_qgemm || (GetQGemmKernels(p.qgemm) != nullptr && CpuSupports(p.qgemm));
}

}  // namespace

absl::Status SetCpuTarget(std::string_view name) {
  NativeHwyTargets();
  if (name == "auto") {
    hwy::DisableTargets(0);
    SetQGemmTargetCap(QGemmTarget::kAvx512Vnni);  // the top of the ranking: no cap, any CPU
    return absl::OkStatus();
  }
  for (const Path& p : kPaths) {
    if (name != p.name) continue;
    if (!Runnable(p)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CPU target \"", std::string(name), "\" cannot run on this CPU or build; it runs: ",
          absl::StrJoin(RunnableCpuTargets(), ", ")));
    }
    hwy::DisableTargets(p.disable_hwy);
    SetQGemmTargetCap(p.qgemm);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown CPU target \"", std::string(name),
                                                 "\"; the names are ",
                                                 absl::StrJoin(CompiledCpuTargets(), ", ")));
}

std::string ActiveCpuTargetName() {
  const int64_t hwy_target = DispatchedHwyTarget();
  if ((hwy_target & kAvx3Any) != 0) {
    return ActiveQGemmTarget() == QGemmTarget::kAvx512Vnni ? "avx512vnni" : "avx512";
  }
  if ((hwy_target & HWY_AVX2) != 0) return "avx2";
  if ((hwy_target & kArmSimd) != 0) return "neon";
  return "scalar";
}

std::vector<std::string> RunnableCpuTargets() {
  std::vector<std::string> names;
  for (const Path& p : kPaths) {
    if (Runnable(p)) names.push_back(p.name);
  }
  names.push_back("auto");
  return names;
}

std::vector<std::string> CompiledCpuTargets() {
  std::vector<std::string> names;
  for (const Path& p : kPaths) {
    if ((HWY_TARGETS & p.needs_hwy) != 0) names.push_back(p.name);
  }
  names.push_back("auto");
  return names;
}

std::string CpuTargetFromEnvironment() {
  const char* v = std::getenv("RINGLM_CPU_TARGET");
  return v != nullptr && *v != '\0' ? std::string(v) : std::string("auto");
}

}  // namespace ringlm
