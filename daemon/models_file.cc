#include "daemon/models_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/openai_server.h"
#include "daemon/model_host.h"
#include "spdlog/spdlog.h"

namespace ringlm {

absl::StatusOr<std::vector<ModelsFileEntry>> ParseModelsFile(absl::string_view text,
                                                             absl::string_view source) {
  std::vector<ModelsFileEntry> entries;
  std::set<std::string> names;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", number, ": ", why));
    };
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.size() > 2) return bad("give [NAME=]PATH [memory_mb=N]");
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(words[0]);
    if (!spec.ok()) return bad(spec.status().message());
    ModelsFileEntry entry;
    entry.name =
        spec->name.empty() ? std::filesystem::path(spec->path).stem().string() : spec->name;
    entry.path = spec->path;
    if (words.size() == 2) {
      uint64_t mib = 0;
      if (!absl::ConsumePrefix(&words[1], "memory_mb=") || !absl::SimpleAtoi(words[1], &mib) ||
          mib == 0 || mib > (uint64_t{1} << 30)) {
        return bad("the second word must be memory_mb=N, N from 1 to 2^30");
      }
      entry.memory_bytes = mib << 20;
    }
    if (!names.insert(entry.name).second) {
      return bad(absl::StrCat("the name '", entry.name, "' is given twice"));
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::StatusOr<std::vector<ModelsFileEntry>> ReadModelsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the models file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a models file holds at most 1 MiB"));
  }
  return ParseModelsFile(text.str(), path);
}

void ApplyModelsFile(const std::vector<ModelsFileEntry>& wanted,
                     std::vector<std::string>& from_file, ModelHost& host, ApiServer* api) {
  auto listed = [&wanted](const std::string& name) {
    return std::any_of(wanted.begin(), wanted.end(),
                       [&name](const ModelsFileEntry& e) { return e.name == name; });
  };
  std::vector<std::string> kept;
  for (const std::string& name : from_file) {
    if (listed(name)) {
      kept.push_back(name);
      continue;
    }
    if (api != nullptr) {
      if (absl::Status s = api->RemoveModel(name); !s.ok()) {
        spdlog::error("models file: cannot remove {}: {}", name, s.ToString());
        kept.push_back(name);
        continue;
      }
    }
    absl::StatusOr<size_t> ended = host.Unload(name, std::chrono::seconds(30));
    if (!ended.ok())
      spdlog::error("models file: cannot remove {}: {}", name, ended.status().ToString());
  }
  for (const ModelsFileEntry& e : wanted) {
    if (std::find(kept.begin(), kept.end(), e.name) != kept.end()) continue;
    absl::StatusOr<ApiModel> loaded =
        host.Load(ModelLoadRequest{.name = e.name, .path = e.path, .memory_bytes = e.memory_bytes});
    if (loaded.ok() && api != nullptr) {
      if (absl::Status s = api->AddModel(*loaded); !s.ok()) {
        (void)host.Unload(e.name, std::chrono::seconds(0));
        loaded = s;
      }
    }
    if (!loaded.ok()) {
      spdlog::error("models file: cannot load {} from {}: {}", e.name, e.path,
                    loaded.status().ToString());
      continue;
    }
    kept.push_back(e.name);
  }
  from_file = std::move(kept);
}

}  // namespace ringlm
