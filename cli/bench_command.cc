// `ringlm bench`: prompt-processing and generation speed, as llama-bench
// measures them.
#include <cctype>
#include <chrono>
#include <cmath>
#include <map>
#include <ostream>
#include <random>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "inference/kernel_flags.h"
#include "inference/ops/cpu_target.h"
#include "inference/ops/thread_pool.h"
#include "inference/stage_engine.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

constexpr uint64_t kTokenSeed = 1234;  // fixed, so every run feeds the same ids

struct BenchSettings {
  int64_t n_prompt = 128;
  int64_t n_gen = 32;
  int64_t depth = 0;  // positions already in the cache when a test starts
  int64_t repetitions = 3;
  int64_t batch = 1;  // sessions that decode together in the tg test
  int threads = 1;
};

// Tokens/s of each repetition of one test, and their mean and sample stddev.
struct TestResult {
  std::string name;  // "pp128", "tg32", "tg32 @ d1024"
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  int64_t depth = 0;
  int64_t batch = 1;
  std::vector<double> samples;
  double mean = 0;
  double stddev = 0;
};

// llama.cpp's llama_model_ftype_name for general.file_type; else the type
// holding the most bytes.
std::string FileTypeName(const GgufFile& file) {
  if (const GgufValue* v = file.Find("general.file_type"); v != nullptr && v->is_integer()) {
    switch (v->AsUint64()) {
      case 0:
        return "all F32";
      case 1:
        return "F16";
      case 2:
        return "Q4_0";
      case 7:
        return "Q8_0";
      case 14:
        return "Q4_K - Small";
      case 15:
        return "Q4_K - Medium";
      case 18:
        return "Q6_K";
      case 32:
        return "BF16";
    }
  }
  std::map<TensorType, uint64_t> bytes;
  for (const GgufTensorInfo& t : file.tensors()) bytes[t.type] += t.n_bytes;
  TensorType best = TensorType::kF32;
  for (const auto& [type, n] : bytes) {
    if (n > bytes[best]) best = type;
  }
  std::string name(TraitsOf(best).name);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

void Summarize(TestResult& r) {
  double sum = 0;
  for (double s : r.samples) sum += s;
  r.mean = sum / r.samples.size();
  double sq = 0;
  for (double s : r.samples) sq += (s - r.mean) * (s - r.mean);
  r.stddev = r.samples.size() > 1 ? std::sqrt(sq / (r.samples.size() - 1)) : 0.0;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A cache holding `depth`, prefilled in 512-token steps. Each run forks it
// (sharing its blocks), so the depth is prefilled once, untimed.
absl::StatusOr<KvCache> CacheAtDepth(const StageEngine& engine, uint32_t ctx,
                                     std::span<const int32_t> depth) {
  KvCache cache = engine.NewCache(ctx);
  std::vector<float> logits;
  for (size_t i = 0; i < depth.size(); i += 512) {
    const std::span<const int32_t> step = depth.subspan(i, std::min<size_t>(512, depth.size() - i));
    absl::Status st =
        engine.Forward(cache, StageInput{step, {}}, LogitsMode::kLastPosition, &logits);
    if (!st.ok()) return st;
  }
  return cache;
}

// Prefill of `tokens` into a fork of `at_depth`: tokens/s.
absl::StatusOr<double> RunPrompt(const StageEngine& engine, const KvCache& at_depth,
                                 const std::vector<int32_t>& tokens) {
  KvCache cache = at_depth.Fork(at_depth.n_positions());
  std::vector<float> logits;
  const auto start = std::chrono::steady_clock::now();
  absl::Status st =
      engine.Forward(cache, StageInput{tokens, {}}, LogitsMode::kLastPosition, &logits);
  if (!st.ok()) return st;
  return tokens.size() / Seconds(start);
}

// Generation in `streams.size()` sessions at once, each a fork of
// `at_depth`: its tokens[0] as an untimed one-token prompt, then one batched
// decode step (ForwardBatch: each weight read once for every session) per
// other token. Tokens/s of all sessions together, over the decode steps.
absl::StatusOr<double> RunGeneration(const StageEngine& engine, const KvCache& at_depth,
                                     const std::vector<std::vector<int32_t>>& streams) {
  const size_t n = streams.size();
  std::vector<KvCache> caches;
  caches.reserve(n);
  std::vector<std::vector<float>> logits(n);
  for (size_t b = 0; b < n; ++b) {
    caches.push_back(at_depth.Fork(at_depth.n_positions()));
    const std::span<const int32_t> first(streams[b].data(), 1);
    absl::Status st =
        engine.Forward(caches[b], StageInput{first, {}}, LogitsMode::kLastPosition, &logits[b]);
    if (!st.ok()) return st;
  }
  std::vector<StageBatchItem> items(n);
  const size_t steps = streams[0].size() - 1;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 1; i <= steps; ++i) {
    for (size_t b = 0; b < n; ++b) {
      items[b] = StageBatchItem{&caches[b], StageInput{std::span(streams[b]).subspan(i, 1), {}},
                                &logits[b]};
    }
    absl::Status st =
        n == 1 ? engine.Forward(caches[0], items[0].input, LogitsMode::kLastPosition, &logits[0])
               : engine.ForwardBatch(items, LogitsMode::kLastPosition);
    if (!st.ok()) return st;
  }
  return n * steps / Seconds(start);
}

// One warm-up run, then `repetitions` measured ones.
// `tokens` holds the prompt (pp), or one token stream per session (tg).
absl::StatusOr<TestResult> Measure(const BenchSettings& s, bool prompt, const StageEngine& engine,
                                   const KvCache& at_depth,
                                   const std::vector<std::vector<int32_t>>& tokens) {
  TestResult r;
  r.n_prompt = prompt ? s.n_prompt : 0;
  r.n_gen = prompt ? 0 : s.n_gen;
  r.depth = s.depth;
  r.batch = prompt ? 1 : s.batch;
  r.name = prompt ? absl::StrCat("pp", s.n_prompt) : absl::StrCat("tg", s.n_gen);
  if (r.batch > 1) absl::StrAppend(&r.name, " x", r.batch);
  if (s.depth > 0) absl::StrAppend(&r.name, " @ d", s.depth);
  for (int64_t i = 0; i <= s.repetitions; ++i) {
    absl::StatusOr<double> ts =
        prompt ? RunPrompt(engine, at_depth, tokens[0]) : RunGeneration(engine, at_depth, tokens);
    if (!ts.ok()) return ts.status();
    if (i > 0) r.samples.push_back(*ts);
  }
  Summarize(r);
  return r;
}

std::string Size(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
  return absl::StrFormat("%.2f MiB", bytes / 1048576.0);
}

std::string Params(uint64_t n) {
  if (n >= 1000000000) return absl::StrFormat("%.2f B", n / 1e9);
  return absl::StrFormat("%.2f M", n / 1e6);
}

}  // namespace

int RunBench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgParser p(
      "ringlm bench --model PATH [-p 128] [-n 32] [-b 1] [-d 0] [-r 3] [-t THREADS] [--json]",
      "Measures prompt processing (pp: a prefill of -p random tokens into a fresh\n"
      "cache) and text generation (tg: -n single-token decode steps) in tokens/s,\n"
      "like llama-bench: mean ± sample stddev of -r runs, after one warm-up run.\n"
      "With -d, each run starts from a cache already holding that many positions\n"
      "(llama-bench's \"pp512 @ d1024\"). With -b, the tg test decodes that many\n"
      "sessions together, one batched step per token, and counts all their\n"
      "tokens (llama-batched-bench's S_TG; \"tg32 x8\").");
  p.AddOption("model", "PATH", "GGUF model file");
  p.AddAlias("-m", "model");
  p.AddOption("n-prompt", "N", "prompt tokens of the pp test; 0 = skip it", "128");
  p.AddAlias("-p", "n-prompt");
  p.AddOption("n-gen", "N", "generated tokens of the tg test; 0 = skip it", "32");
  p.AddAlias("-n", "n-gen");
  p.AddOption("batch", "N", "sessions that decode together in the tg test (1 to 256)", "1");
  p.AddAlias("-b", "batch");
  p.AddOption("n-depth", "N", "positions already in the cache when each test starts", "0");
  p.AddAlias("-d", "n-depth");
  p.AddOption("repetitions", "N", "measured runs of each test", "3");
  p.AddAlias("-r", "repetitions");
  p.AddOption("threads", "N", "compute threads (default: physical cores)");
  p.AddAlias("-t", "threads");
  p.AddFlag("json", "print the figures as one JSON object instead of a table");
  AddKernelFlags(p);
  if (int rc = ParseOrExit(p, args, out, err); rc >= 0) return rc;
  if (absl::Status s = ApplyKernelFlags(p); !s.ok()) return Fail(s, err);
  if (!p.Has("model")) return Fail(absl::InvalidArgumentError("--model is required"), err);
  BenchSettings s;
  s.threads = DefaultThreadCount();
  auto n_prompt = p.GetInt("n-prompt", 0, 1 << 20);
  auto n_gen = p.GetInt("n-gen", 0, 1 << 20);
  auto reps = p.GetInt("repetitions", 1, 1000);
  auto depth = p.GetInt("n-depth", 0, 1 << 20);
  auto batch = p.GetInt("batch", 1, 256);
  for (const absl::Status& st :
       {n_prompt.status(), n_gen.status(), reps.status(), depth.status(), batch.status()}) {
    if (!st.ok()) return Fail(st, err);
  }
  s.n_prompt = *n_prompt;
  s.n_gen = *n_gen;
  s.repetitions = *reps;
  s.depth = *depth;
  s.batch = *batch;
  if (s.n_prompt == 0 && s.n_gen == 0) {
    return Fail(absl::InvalidArgumentError("-p and -n are both 0: nothing to measure"), err);
  }
  if (p.Has("threads")) {
    auto v = p.GetInt("threads", 1, 1024);
    if (!v.ok()) return Fail(v.status(), err);
    s.threads = static_cast<int>(*v);
  }
  const uint32_t ctx = static_cast<uint32_t>(s.depth + std::max<int64_t>(s.n_prompt, s.n_gen + 1));
  absl::StatusOr<std::unique_ptr<Model>> loaded = LoadModelForCli(p.GetString("model"), ctx, err);
  if (!loaded.ok()) return Fail(loaded.status(), err);
  const Model& model = **loaded;
  ThreadPool pool(s.threads);
  StageEngine engine(model.config(), model.weights(), &pool);

  std::mt19937_64 rng(kTokenSeed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(model.config().n_vocab) - 1);
  std::vector<TestResult> results;
  std::vector<int32_t> depth_tokens(s.depth);
  for (int32_t& t : depth_tokens) t = id(rng);
  absl::StatusOr<KvCache> at_depth = CacheAtDepth(engine, ctx, depth_tokens);
  if (!at_depth.ok()) return Fail(at_depth.status(), err);
  if (s.n_prompt > 0) {
    std::vector<std::vector<int32_t>> tokens(1, std::vector<int32_t>(s.n_prompt));
    for (int32_t& t : tokens[0]) t = id(rng);
    absl::StatusOr<TestResult> r = Measure(s, /*prompt=*/true, engine, *at_depth, tokens);
    if (!r.ok()) return Fail(r.status(), err);
    results.push_back(*r);
  }
  if (s.n_gen > 0) {
    std::vector<std::vector<int32_t>> tokens(s.batch, std::vector<int32_t>(s.n_gen + 1));
    for (std::vector<int32_t>& stream : tokens) {
      for (int32_t& t : stream) t = id(rng);
    }
    absl::StatusOr<TestResult> r = Measure(s, /*prompt=*/false, engine, *at_depth, tokens);
    if (!r.ok()) return Fail(r.status(), err);
    results.push_back(*r);
  }

  const ModelConfig& c = model.config();
  const std::string name = c.name.empty() ? c.architecture : c.name;
  uint64_t bytes = 0, params = 0;
  for (const GgufTensorInfo& t : model.file().tensors()) {
    bytes += t.n_bytes;
    params += t.n_elements;
  }
  const std::string type = FileTypeName(model.file());
  if (p.GetFlag("json")) {
    nlohmann::json j = {{"model", name},        {"architecture", c.architecture},
                        {"type", type},         {"size_bytes", bytes},
                        {"params", params},     {"cpu_target", ActiveCpuTargetName()},
                        {"threads", s.threads}, {"repetitions", s.repetitions}};
    j["tests"] = nlohmann::json::array();
    for (const TestResult& r : results) {
      j["tests"].push_back({{"test", r.name},
                            {"n_prompt", r.n_prompt},
                            {"n_gen", r.n_gen},
                            {"n_depth", r.depth},
                            {"n_batch", r.batch},
                            {"avg_ts", r.mean},
                            {"stddev_ts", r.stddev},
                            {"samples_ts", r.samples}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  const std::string cpu = ActiveCpuTargetName();
  out << absl::StrFormat("| %-30s | %10s | %10s | %-14s | %-10s | %7s | %14s | %20s |\n", "model",
                         "size", "params", "type", "cpu", "threads", "test", "t/s");
  out << absl::StrFormat("| %s | %s: | %s: | %s | %s | %s: | %s: | %s: |\n",
                         std::string(30, '-').c_str(), std::string(9, '-').c_str(),
                         std::string(9, '-').c_str(), std::string(14, '-').c_str(),
                         std::string(10, '-').c_str(), std::string(6, '-').c_str(),
                         std::string(13, '-').c_str(), std::string(19, '-').c_str());
  for (const TestResult& r : results) {
    const std::string ts = absl::StrFormat("%.2f ± %.2f", r.mean, r.stddev);
    // "±" is two bytes but one column: pad by one more byte.
    out << absl::StrFormat("| %-30s | %10s | %10s | %-14s | %-10s | %7d | %14s | %21s |\n",
                           name.c_str(), Size(bytes).c_str(), Params(params).c_str(), type.c_str(),
                           cpu.c_str(), s.threads, r.name.c_str(), ts.c_str());
  }
  return 0;
}

}  // namespace ringlm
