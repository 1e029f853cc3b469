// `ringlm generate`: text generation on this machine.
#include <chrono>
#include <ostream>
#include <random>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/cli_common.h"
#include "cli/cluster_client.h"
#include "cli/commands.h"
#include "inference/generator.h"
#include "inference/kernel_flags.h"
#include "inference/ops/thread_pool.h"
#include "inference/sampling/speculation.h"

namespace ringlm {
namespace {

void AddGenerateOptions(ArgParser& p) {
  p.AddOption("model", "PATH",
              "GGUF model file; with --cluster, the name of a model the cluster serves (default: "
              "the node's first)");
  p.AddOption("prompt", "TEXT", "prompt text (BOS is added as the model says)", "");
  p.AddOption("n-predict", "N", "tokens to generate", "64");
  p.AddAlias("-n", "n-predict");
  p.AddOption("temp", "T", "temperature; 0 = greedy (ties go to the lowest id)", "0.8");
  p.AddOption("top-k", "K", "keep the K most likely tokens; 0 = off", "40");
  p.AddOption("top-p", "P", "nucleus sampling threshold; 1 = off", "0.95");
  p.AddOption("min-p", "P", "drop tokens below P x the top probability; 0 = off", "0.05");
  p.AddOption("presence-penalty", "X", "OpenAI-style presence penalty", "0");
  p.AddOption("frequency-penalty", "X", "OpenAI-style frequency penalty", "0");
  p.AddOption("seed", "S", "random seed; the same seed gives the same text (default: random)");
  p.AddOption("ctx-size", "N", "context size in tokens (default: the model's)");
  p.AddOption("threads", "N", "compute threads (default: physical cores)");
  p.AddAlias("-t", "threads");
  p.AddFlag("ignore-eos", "keep generating past the end-of-sequence token");
  AddKernelFlags(p);
  p.AddFlag("json", "print one JSON object {prompt_ids, ids, text} instead of streaming");
  p.AddFlag("timings", "print load, prompt and per-token times to stderr at the end");
  p.AddOption("cluster", "HOST:PORT", "generate through a running cluster via this node");
  p.AddOption("hidden-dtype", "f32|f16",
              "with --cluster: activations on the wire; f32 is exact, f16 halves the traffic",
              "f32");
  p.AddFlag("no-speculation",
            "with --cluster: no speculative decoding for this request (the same text; for "
            "measuring what it gains)");
  p.AddOption("steps-in-flight", "N",
              "with --cluster: speculative steps that may travel the ring at once (1 to 4; 0 = "
              "the head's --steps-in-flight)",
              "0");
  p.AddOption("timeout", "SECONDS", "with --cluster: give up after this long", "600");
  AddClientSecurityFlags(p);
}

absl::StatusOr<GenerateOptions> ReadGenerateOptions(const ArgParser& p) {
  GenerateOptions o;
  auto n = p.GetInt("n-predict", 0, 1 << 24);
  if (!n.ok()) return n.status();
  o.max_tokens = static_cast<int32_t>(*n);
  o.ignore_eos = p.GetFlag("ignore-eos");
  SamplingParams& s = o.sampling;
  auto temp = p.GetDouble("temp");
  auto top_k = p.GetInt("top-k", 0, 1 << 30);
  auto top_p = p.GetDouble("top-p");
  auto min_p = p.GetDouble("min-p");
  auto presence = p.GetDouble("presence-penalty");
  auto frequency = p.GetDouble("frequency-penalty");
  for (const absl::Status& st : {temp.status(), top_k.status(), top_p.status(), min_p.status(),
                                 presence.status(), frequency.status()}) {
    if (!st.ok()) return st;
  }
  s.temperature = static_cast<float>(*temp);
  s.top_k = static_cast<int32_t>(*top_k);
  s.top_p = static_cast<float>(*top_p);
  s.min_p = static_cast<float>(*min_p);
  s.presence_penalty = static_cast<float>(*presence);
  s.frequency_penalty = static_cast<float>(*frequency);
  if (p.Has("seed")) {
    auto seed = p.GetInt("seed", 0, INT64_MAX);
    if (!seed.ok()) return seed.status();
    s.seed = static_cast<uint64_t>(*seed);
  } else {
    s.seed = std::random_device{}();
  }
  if (absl::Status st = s.Validate(); !st.ok()) return st;
  return o;
}

std::string IdsJson(const std::vector<int32_t>& ids) {
  return absl::StrCat("[", absl::StrJoin(ids, ","), "]");
}

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// "prompt: 5 tokens, first token after 1.2 ms | generate: 63 tokens in ..."
void PrintTimings(size_t n_prompt, Clock::time_point start, Clock::time_point first,
                  Clock::time_point end, size_t n_generated, std::ostream& err) {
  const double ttft = Ms(first - start);
  const double decode = Ms(end - first);
  const size_t steps = n_generated > 0 ? n_generated - 1 : 0;
  err << absl::StrFormat(
      "timings: prompt %zu tokens, first token after %.1f ms | %zu more tokens in %.1f "
      "ms: %.2f ms/token, %.1f tokens/s\n",
      n_prompt, ttft, steps, decode, steps > 0 ? decode / steps : 0.0,
      steps > 0 && decode > 0 ? steps * 1000.0 / decode : 0.0);
}

void PrintJson(const std::vector<int32_t>& prompt, const std::vector<int32_t>& ids,
               const std::string& text, std::ostream& out) {
  out << absl::StrFormat("{\"prompt_ids\":%s,\"ids\":%s,\"text\":%s}\n", IdsJson(prompt).c_str(),
                         IdsJson(ids).c_str(), JsonString(text).c_str());
}

// The same generation, run by a cluster: the node at `address` tokenizes,
// streams tokens back, and reports errors from any stage.
int GenerateOnCluster(const ArgParser& p, const GenerateOptions& options, std::ostream& out,
                      std::ostream& err) {
  v1::GenerateRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.set_prompt(p.GetString("prompt"));
  const SamplingParams& s = options.sampling;
  v1::SamplingParams* sp = request.mutable_sampling();
  sp->set_temperature(s.temperature);
  sp->set_top_k(s.top_k);
  sp->set_top_p(s.top_p);
  sp->set_min_p(s.min_p);
  sp->set_presence_penalty(s.presence_penalty);
  sp->set_frequency_penalty(s.frequency_penalty);
  sp->set_seed(s.seed);
  request.mutable_limits()->set_max_tokens(options.max_tokens);
  request.mutable_limits()->set_ignore_eos(options.ignore_eos);
  const std::string dtype = p.GetString("hidden-dtype");
  if (dtype != "f32" && dtype != "f16") {
    return Fail(absl::InvalidArgumentError("--hidden-dtype must be f32 or f16"), err);
  }
  request.set_hidden_dtype(dtype == "f16" ? v1::DTYPE_F16 : v1::DTYPE_F32);
  request.set_no_speculation(p.GetFlag("no-speculation"));
  absl::StatusOr<int64_t> in_flight = p.GetInt("steps-in-flight", 0, kMaxStepsInFlight);
  if (!in_flight.ok()) return Fail(in_flight.status(), err);
  request.set_steps_in_flight(static_cast<uint32_t>(*in_flight));
  absl::StatusOr<int64_t> timeout = p.GetInt("timeout", 1, 86400);
  if (!timeout.ok()) return Fail(timeout.status(), err);

  const bool json = p.GetFlag("json");
  std::vector<int32_t> prompt_ids, ids;
  std::string text;
  absl::StatusOr<ClientSecurity> security = ReadClientSecurity(p);
  if (!security.ok()) return Fail(security.status(), err);
  ClusterClient client(p.GetString("cluster"), *security, p.GetString("model"));
  const Clock::time_point start = Clock::now();
  Clock::time_point first = start;
  absl::Status st =
      client.Generate(request, std::chrono::seconds(*timeout), [&](const v1::GenerateEvent& e) {
        if (e.has_token() && ids.empty()) first = Clock::now();
        if (e.prompt_ids_size() > 0) {
          prompt_ids.assign(e.prompt_ids().begin(), e.prompt_ids().end());
        }
        if (e.has_token()) ids.push_back(e.token());
        text += e.text();
        if (!json) {
          out << e.text() << std::flush;
        }
      });
  const Clock::time_point end = Clock::now();
  if (!json) out << '\n';
  if (!st.ok()) return Fail(st, err);
  if (json) PrintJson(prompt_ids, ids, text, out);
  if (p.GetFlag("timings")) PrintTimings(prompt_ids.size(), start, first, end, ids.size(), err);
  return 0;
}

}  // namespace

int RunGenerate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgParser p("ringlm generate (--model PATH | --cluster HOST:PORT) --prompt TEXT [options]",
              "Generates text from a prompt, streaming it as it comes: on this machine with\n"
              "--model, or through a running ringlm cluster with --cluster.");
  AddGenerateOptions(p);
  if (int rc = ParseOrExit(p, args, out, err); rc >= 0) return rc;
  absl::StatusOr<GenerateOptions> options = ReadGenerateOptions(p);
  if (!options.ok()) return Fail(options.status(), err);
  if (!p.Has("model") && !p.Has("cluster")) {
    return Fail(absl::InvalidArgumentError("--model (or --cluster) is required"), err);
  }
  if (p.Has("cluster")) return GenerateOnCluster(p, *options, out, err);
  if (absl::Status s = ApplyKernelFlags(p); !s.ok()) return Fail(s, err);
  uint32_t ctx = 0;
  if (p.Has("ctx-size")) {
    auto v = p.GetInt("ctx-size", 1, 1 << 20);
    if (!v.ok()) return Fail(v.status(), err);
    ctx = static_cast<uint32_t>(*v);
  }
  int threads = DefaultThreadCount();
  if (p.Has("threads")) {
    auto v = p.GetInt("threads", 1, 1024);
    if (!v.ok()) return Fail(v.status(), err);
    threads = static_cast<int>(*v);
  }
  const Clock::time_point load_start = Clock::now();
  absl::StatusOr<std::unique_ptr<Model>> model = LoadModelForCli(p.GetString("model"), ctx, err);
  const double load_ms = Ms(Clock::now() - load_start);
  if (!model.ok()) return Fail(model.status(), err);
  const Tokenizer& tok = (*model)->tokenizer();
  const std::vector<int32_t> prompt =
      tok.Encode(p.GetString("prompt"), /*add_special=*/true, /*parse_special=*/false);

  ThreadPool pool(threads);
  LocalGenerator generator(**model, &pool);
  const bool json = p.GetFlag("json");
  StreamingDecoder decoder(tok);
  const Clock::time_point start = Clock::now();
  Clock::time_point first = start;
  absl::StatusOr<std::vector<int32_t>> ids =
      generator.Generate(prompt, *options, [&](int32_t token) {
        if (first == start) first = Clock::now();
        if (!json) {
          out << decoder.Push(token) << std::flush;
        }
        return true;
      });
  if (!ids.ok()) return Fail(ids.status(), err);
  if (json) {
    PrintJson(prompt, *ids, JoinPieces(tok, *ids), out);
  } else {
    out << decoder.Flush() << "\n";
  }
  if (p.GetFlag("timings")) {
    err << absl::StrFormat(
        "timings: load %.1f ms (%s of weights)\n", load_ms,
        absl::StrFormat("%.2f MiB", (*model)->weights().bytes() / 1048576.0).c_str());
    PrintTimings(prompt.size(), start, first, Clock::now(), ids->size(), err);
  }
  return 0;
}

}  // namespace ringlm
