// `ringlm synth`: writes a GGUF model with real shapes and random weights,
// optionally carrying a real Hugging Face vocabulary (--tokenizer).
#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/synth/synth_model.h"
#include "inference/ops/thread_pool.h"
#include "inference/tokenizer/hf_tokenizer.h"

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

int RunSynth(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgParser p(
      "ringlm synth --preset NAME --type TYPE --out PATH [--seed S]\n"
      "       ringlm synth --tokenizer DIR --out PATH [--preset NAME] [--type TYPE]",
      "Writes a GGUF model (llama, with or without experts, qwen2moe, qwen3, qwen3moe,\n"
      "gemma2, gemma3, phi3 or deepseek2, as the preset says) with the shapes, metadata and "
      "vocabulary size\n"
      "of a known model and random weights, for benchmarks and tests. --type q4_k\n"
      "gives llama.cpp's Q4_K_M mix; quantized types get a Q6_K (Q8_0 for q8_0) head.\n"
      "--tokenizer DIR gives the model the real vocabulary of a Hugging Face tokenizer\n"
      "(DIR/tokenizer.json and DIR/tokenizer_config.json: pieces, merges, special\n"
      "tokens, chat template); its size replaces the preset's vocabulary size.");
  p.AddOption("preset", "NAME",
              "model shape: " + PresetList() + " (default with --tokenizer: micro)");
  p.AddOption("type", "TYPE",
              "weight type: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
              "iq4_nl, iq4_xs (default with --tokenizer: q8_0)");
  p.AddOption("tokenizer", "DIR", "a Hugging Face tokenizer directory whose vocabulary to carry");
  p.AddOption("out", "PATH", "the GGUF file to write (replaced if it exists)");
  p.AddAlias("-o", "out");
  p.AddOption("seed", "S", "random seed; the same seed gives a byte-identical file", "1");
  p.AddOption("threads", "N", "generation threads (default: physical cores)");
  p.AddAlias("-t", "threads");
  if (int rc = ParseOrExit(p, args, out, err); rc >= 0) return rc;
  const bool has_tokenizer = p.Has("tokenizer");
  for (const char* required : {"preset", "type", "out"}) {
    if (!p.Has(required) && !(has_tokenizer && std::string(required) != "out")) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat("--%s is required", required)), err);
    }
  }
  SynthOptions options;
  options.preset = p.Has("preset") ? p.GetString("preset") : "micro";
  const std::string type_name = p.Has("type") ? p.GetString("type") : "q8_0";
  absl::StatusOr<SynthPreset> preset = FindSynthPreset(options.preset);
  if (!preset.ok()) return Fail(preset.status(), err);
  absl::StatusOr<TensorType> type = ParseSynthType(type_name);
  if (!type.ok()) return Fail(type.status(), err);
  options.type = *type;
  absl::StatusOr<int64_t> seed = p.GetInt("seed", 0, INT64_MAX);
  if (!seed.ok()) return Fail(seed.status(), err);
  options.seed = static_cast<uint64_t>(*seed);
  options.threads = DefaultThreadCount();
  if (p.Has("threads")) {
    absl::StatusOr<int64_t> threads = p.GetInt("threads", 1, 1024);
    if (!threads.ok()) return Fail(threads.status(), err);
    options.threads = static_cast<int>(*threads);
  }
  const auto start = std::chrono::steady_clock::now();
  if (has_tokenizer) {
    const std::string dir = p.GetString("tokenizer");
    absl::StatusOr<SynthTokenizer> tokenizer = LoadHfTokenizer(dir);
    if (!tokenizer.ok()) return Fail(tokenizer.status(), err);
    const Vocabulary& v = tokenizer->vocab;
    const std::string detail =
        v.model == "gpt2" ? absl::StrFormat("pre %s, %zu merges", v.pre, v.merges.size())
                          : std::string(v.add_space_prefix ? "space prefix" : "no space prefix");
    err << absl::StrFormat(
        "ringlm: read %s: %zu pieces, model %s (%s), %.1f s\n", dir.c_str(), v.pieces.size(),
        v.model.c_str(), detail.c_str(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    options.tokenizer = std::make_shared<const SynthTokenizer>(std::move(*tokenizer));
  }
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(options);
  if (!plan.ok()) return Fail(plan.status(), err);
  const std::string path = p.GetString("out");

  const bool tty = IsTerminal(err);
  if (!tty) {
    err << absl::StrFormat("ringlm: writing %s (%s, %s, about %s)\n", path.c_str(),
                           options.preset.c_str(), type_name.c_str(),
                           HumanBytes(plan->data_bytes()).c_str());
  }
  int last_percent = -1;
  absl::Status st = WriteSynthModel(options, path, [&](uint64_t done, uint64_t total) {
    if (!tty) return;
    const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    if (percent == last_percent) return;
    last_percent = percent;
    err << absl::StrFormat("\rwriting %s: %3d%% (%llu / %llu MiB)", path.c_str(), percent,
                           static_cast<unsigned long long>(done >> 20),
                           static_cast<unsigned long long>(total >> 20));
    if (done == total) err << '\n';
  });
  if (!st.ok()) return Fail(st, err);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  const uint64_t n = plan->n_params();
  const std::string params =
      n >= 1000000000 ? absl::StrFormat("%.2f B", n / 1e9) : absl::StrFormat("%.2f M", n / 1e6);
  out << absl::StrFormat("wrote %s: %s (%llu bytes), %s parameters (%llu), %s, seed %llu, %.1f s\n",
                         path.c_str(), HumanBytes(size).c_str(),
                         static_cast<unsigned long long>(size), params.c_str(),
                         static_cast<unsigned long long>(n), type_name.c_str(),
                         static_cast<unsigned long long>(options.seed), seconds);
  return 0;
}

}  // namespace ringlm
