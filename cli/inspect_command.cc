// `ringlm inspect`: what a GGUF file holds.
#include <map>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "gguf/gguf_file.h"
#include "inference/model_config.h"
#include "inference/stage_weights.h"

namespace ringlm {
namespace {

constexpr size_t kArrayPreview = 8;

std::string FormatValue(const GgufValue& v);

std::string FormatArray(const GgufValue& v) {
  std::string out = absl::StrCat("[", v.array_size(), " x ",
                                 std::string(GgufValueTypeName(v.array_type())), "] [");
  const size_t n = std::min<size_t>(v.array_size(), kArrayPreview);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += FormatValue(v.array_element(i));
  }
  if (v.array_size() > n) out += ", ...";
  return out + "]";
}

std::string FormatValue(const GgufValue& v) {
  switch (v.type()) {
    case GgufValueType::kString:
      return JsonString(std::string(v.AsString()));
    case GgufValueType::kArray:
      return FormatArray(v);
    case GgufValueType::kBool:
      return v.AsBool() ? "true" : "false";
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return absl::StrCat(v.AsDouble());
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return absl::StrCat(v.AsInt64());
    default:
      return absl::StrCat(v.AsUint64());
  }
}

std::string Mib(uint64_t bytes) { return absl::StrFormat("%.2f MiB", bytes / 1048576.0); }

}  // namespace

int RunInspect(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgParser p("ringlm inspect PATH", "Shows a GGUF file's metadata, tensors and sizes.");
  p.AddPositional("PATH", "GGUF model file");
  if (int rc = ParseOrExit(p, args, out, err); rc >= 0) return rc;
  absl::StatusOr<std::unique_ptr<GgufFile>> opened = GgufFile::Open(p.Positional(0));
  if (!opened.ok()) return Fail(opened.status(), err);
  const GgufFile& f = **opened;
  out << absl::StrFormat(
      "file: %s\nGGUF version %u, %zu metadata keys, %zu tensors, alignment %llu, %s\n\n",
      p.Positional(0).c_str(), f.version(), f.metadata().size(), f.tensors().size(),
      static_cast<unsigned long long>(f.alignment()), Mib(f.file_size()).c_str());
  out << "metadata:\n";
  for (const auto& [key, value] : f.metadata()) {
    out << absl::StrFormat("  %-44s %s\n", key.c_str(), FormatValue(value).c_str());
  }
  out << "\ntensors:\n";
  uint64_t params = 0;
  std::map<std::string, uint64_t> by_type;
  for (const GgufTensorInfo& t : f.tensors()) {
    params += t.n_elements;
    by_type[std::string(TraitsOf(t.type).name)] += t.n_elements;
    out << absl::StrFormat("  %-32s %-6s [%s] %llu bytes\n", t.name.c_str(),
                           std::string(TraitsOf(t.type).name).c_str(),
                           absl::StrJoin(t.dims, ", ").c_str(),
                           static_cast<unsigned long long>(t.n_bytes));
  }
  out << absl::StrFormat("\nparameters: %llu (", static_cast<unsigned long long>(params));
  bool first = true;
  for (const auto& [type, n] : by_type) {
    out << absl::StrFormat("%s%s %llu", first ? "" : ", ", type.c_str(),
                           static_cast<unsigned long long>(n));
    first = false;
  }
  out << ")\n";
  absl::StatusOr<ModelConfig> config = ModelConfig::FromGguf(f);
  if (!config.ok()) {
    out << absl::StrFormat("model: not runnable: %s\n", config.status().ToString().c_str());
    return 0;
  }
  absl::StatusOr<WeightFootprint> fp = ComputeFootprint(f, *config);
  out << absl::StrFormat(
      "model: %s, %u layers, n_embd %u, n_ff %u, heads %u (kv %u), head_dim %u, vocab %u, "
      "context %u\n",
      config->architecture.c_str(), config->n_layer, config->n_embd, config->n_ff, config->n_head,
      config->n_head_kv, config->head_dim, config->n_vocab, config->n_ctx_train);
  if (config->is_moe()) {
    out << absl::StrFormat("experts: %u, %u used per token, width %u", config->n_expert,
                           config->n_expert_used, config->n_ff_exp);
    if (config->n_ff_shexp > 0)
      out << absl::StrFormat(", shared expert width %u", config->n_ff_shexp);
    out << "\n";
  }
  if (fp.ok()) {
    out << absl::StrFormat("bytes per layer: %s\n", DescribeLayerBytes(fp->layer_bytes));
    out << absl::StrFormat("embedding %s, output head %s, total %s\n",
                           Mib(fp->embedding_bytes).c_str(), Mib(fp->head_bytes).c_str(),
                           Mib(fp->total_bytes).c_str());
    out << absl::StrFormat("KV cache per token: %s (f16, all layers)\n",
                           Mib(config->n_layer * config->kv_bytes_per_position()).c_str());
  }
  return 0;
}

}  // namespace ringlm
