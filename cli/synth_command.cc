// `ringlm synth`: writes a GGUF model with real shapes and random weights.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "inference/ops/thread_pool.h"
#include "inference/synth/synth_model.h"

namespace ringlm {
namespace {

std::string PresetList() {
  std::vector<std::string> names;
  for (const SynthPreset& p : SynthPresets()) names.push_back(p.name);
  return absl::StrJoin(names, ", ");
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
  return absl::StrFormat("%.2f MiB", bytes / 1048576.0);
}

}  // namespace

int RunSynth(const std::vector<std::string>& args) {
  ArgParser p("ringlm synth --preset NAME --type TYPE --out PATH [--seed S]",
              "Writes a llama-architecture GGUF model with the shapes, metadata and vocabulary\n"
              "size of a known model and random weights, for benchmarks and tests. --type q4_k\n"
              "gives llama.cpp's Q4_K_M mix; quantized types get a Q6_K (Q8_0 for q8_0) head.");
  p.AddOption("preset", "NAME", "model shape: " + PresetList());
  p.AddOption("type", "TYPE", "weight type: f32, f16, q8_0, q4_0, q4_k, q6_k");
  p.AddOption("out", "PATH", "the GGUF file to write (replaced if it exists)");
  p.AddAlias("-o", "out");
  p.AddOption("seed", "S", "random seed; the same seed gives a byte-identical file", "1");
  p.AddOption("threads", "N", "generation threads (default: physical cores)");
  p.AddAlias("-t", "threads");
  if (int rc = ParseOrExit(p, args); rc >= 0) return rc;
  for (const char* required : {"preset", "type", "out"}) {
    if (!p.Has(required)) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat("--%s is required", required)));
    }
  }
  SynthOptions options;
  options.preset = p.GetString("preset");
  absl::StatusOr<SynthPreset> preset = FindSynthPreset(options.preset);
  if (!preset.ok()) return Fail(preset.status());
  absl::StatusOr<TensorType> type = ParseSynthType(p.GetString("type"));
  if (!type.ok()) return Fail(type.status());
  options.type = *type;
  absl::StatusOr<int64_t> seed = p.GetInt("seed", 0, INT64_MAX);
  if (!seed.ok()) return Fail(seed.status());
  options.seed = static_cast<uint64_t>(*seed);
  options.threads = DefaultThreadCount();
  if (p.Has("threads")) {
    absl::StatusOr<int64_t> threads = p.GetInt("threads", 1, 1024);
    if (!threads.ok()) return Fail(threads.status());
    options.threads = static_cast<int>(*threads);
  }
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*preset, options.type);
  if (!plan.ok()) return Fail(plan.status());
  const std::string out = p.GetString("out");

  const bool tty = isatty(STDERR_FILENO);
  if (!tty) {
    std::fprintf(stderr, "ringlm: writing %s (%s, %s, about %s)\n", out.c_str(),
                 options.preset.c_str(), p.GetString("type").c_str(),
                 HumanBytes(plan->data_bytes()).c_str());
  }
  const auto start = std::chrono::steady_clock::now();
  int last_percent = -1;
  absl::Status st = WriteSynthModel(options, out, [&](uint64_t done, uint64_t total) {
    if (!tty) return;
    const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    if (percent == last_percent) return;
    last_percent = percent;
    std::fprintf(stderr, "\rwriting %s: %3d%% (%llu / %llu MiB)", out.c_str(), percent,
                 static_cast<unsigned long long>(done >> 20),
                 static_cast<unsigned long long>(total >> 20));
    if (done == total) std::fputc('\n', stderr);
  });
  if (!st.ok()) return Fail(st);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(out, ec);
  const uint64_t n = plan->n_params();
  const std::string params =
      n >= 1000000000 ? absl::StrFormat("%.2f B", n / 1e9) : absl::StrFormat("%.2f M", n / 1e6);
  std::printf("wrote %s: %s (%llu bytes), %s parameters (%llu), %s, seed %llu, %.1f s\n",
              out.c_str(), HumanBytes(size).c_str(), static_cast<unsigned long long>(size),
              params.c_str(), static_cast<unsigned long long>(n), p.GetString("type").c_str(),
              static_cast<unsigned long long>(options.seed), seconds);
  return 0;
}

}  // namespace ringlm
