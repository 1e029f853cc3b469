#include "partition/speed_cache.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ringlm {
namespace {

constexpr absl::string_view kHeader = "ringlm speed figures 1";
constexpr size_t kMaxFileBytes = 4096;

bool Positive(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

std::optional<SpeedFigures> LoadSpeedFigures(const std::string& path, std::string_view cpu_model,
                                             uint32_t threads) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) return std::nullopt;
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // header, cpu_model, threads, gflops, gbps, and the empty rest after the
  // last newline.
  if (lines.size() != 6 || lines[0] != kHeader || !lines[5].empty()) return std::nullopt;
  auto value = [](absl::string_view line,
                  absl::string_view key) -> std::optional<absl::string_view> {
    if (!absl::StartsWith(line, key) || line.size() <= key.size() || line[key.size()] != '=') {
      return std::nullopt;
    }
    return line.substr(key.size() + 1);
  };
  const auto model = value(lines[1], "cpu_model");
  const auto thread_text = value(lines[2], "threads");
  const auto gflops_text = value(lines[3], "matmul_gflops");
  const auto gbps_text = value(lines[4], "read_gbps");
  uint32_t saved_threads = 0;
  SpeedFigures figures;
  if (!model || !thread_text || !gflops_text || !gbps_text ||
      std::string_view(model->data(), model->size()) != cpu_model ||
      !absl::SimpleAtoi(*thread_text, &saved_threads) || saved_threads != threads ||
      !absl::SimpleAtod(*gflops_text, &figures.matmul_gflops) ||
      !absl::SimpleAtod(*gbps_text, &figures.read_gbps) || !Positive(figures.matmul_gflops) ||
      !Positive(figures.read_gbps)) {
    return std::nullopt;
  }
  return figures;
}

absl::Status SaveSpeedFigures(const std::string& path, std::string_view cpu_model, uint32_t threads,
                              const SpeedFigures& figures) {
  std::ostringstream text;
  text.precision(17);
  text << std::string(kHeader) << "\ncpu_model=" << cpu_model << "\nthreads=" << threads
       << "\nmatmul_gflops=" << figures.matmul_gflops << "\nread_gbps=" << figures.read_gbps
       << "\n";
  const std::string temp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text.str();
    out.flush();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temp));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot rename ", temp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace ringlm
