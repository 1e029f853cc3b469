#include "partition/device_probe.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "partition/speed_cache.h"

namespace ringlm {
namespace {

constexpr std::string_view kWhitespace = " \t\r";

std::string_view Trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(kWhitespace);
  return s.substr(begin, end - begin + 1);
}

// Calls fn(key, value) for each "key: value" line, both trimmed; stops when fn
// returns false.
template <typename Fn>
void ForEachKeyValueLine(std::string_view text, Fn fn) {
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (!fn(Trim(line.substr(0, colon)), Trim(line.substr(colon + 1)))) return;
  }
}

// "16318412 kB" -> bytes.
absl::StatusOr<uint64_t> ParseKibValue(std::string_view key, std::string_view value) {
  uint64_t kib = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), kib);
  const std::string_view unit = Trim(value.substr(end - value.data()));
  if (ec != std::errc() || unit != "kB") {
    return absl::InvalidArgumentError(absl::StrCat("meminfo ", std::string(key), " value \"",
                                                   std::string(value),
                                                   "\" is not \"<number> kB\""));
  }
  if (kib > std::numeric_limits<uint64_t>::max() / 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("meminfo ", std::string(key), " value ", kib, " kB overflows"));
  }
  return kib * 1024;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  std::string contents;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) contents.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed) return absl::ErrnoToStatus(error, absl::StrCat("cannot read ", path));
  return contents;
}

// Hot loop: C += A * B for n x n row-major matrices, blocked over i and k so
// the B rows in use stay in cache; the inner j loop vectorizes.
void MatmulAccumulate(const float* a, const float* b, float* c, int n) {
  constexpr int kBlock = 64;
  for (int ii = 0; ii < n; ii += kBlock) {
    for (int kk = 0; kk < n; kk += kBlock) {
      for (int i = ii; i < ii + kBlock && i < n; ++i) {
        float* c_row = c + static_cast<size_t>(i) * n;
        for (int k = kk; k < kk + kBlock && k < n; ++k) {
          const float a_ik = a[static_cast<size_t>(i) * n + k];
          const float* b_row = b + static_cast<size_t>(k) * n;
          for (int j = 0; j < n; ++j) c_row[j] += a_ik * b_row[j];
        }
      }
    }
  }
}

// Hot loop: the sum of n words, in eight independent lanes so the loads, not
// the adds, set the pace.
uint64_t SumWords(const uint64_t* words, size_t n) {
  uint64_t lane[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lane[k] += words[i + k];
  }
  for (; i < n; ++i) lane[0] += words[i];
  uint64_t sum = 0;
  for (uint64_t v : lane) sum += v;
  return sum;
}

}  // namespace

absl::StatusOr<MemInfo> ParseMemInfo(std::string_view proc_meminfo_text) {
  std::optional<absl::StatusOr<uint64_t>> total;
  std::optional<absl::StatusOr<uint64_t>> available;
  ForEachKeyValueLine(proc_meminfo_text, [&](std::string_view key, std::string_view value) {
    if (key == "MemTotal" && !total) total = ParseKibValue(key, value);
    if (key == "MemAvailable" && !available) available = ParseKibValue(key, value);
    return !(total && available);
  });
  if (!total) return absl::InvalidArgumentError("meminfo has no MemTotal line");
  if (!total->ok()) return total->status();
  if (!available) {
    return absl::InvalidArgumentError(
        "meminfo has no MemAvailable line (kernel older than 3.14?); pass --memory-mb");
  }
  if (!available->ok()) return available->status();
  return MemInfo{**total, **available};
}

std::string ParseCpuModel(std::string_view proc_cpuinfo_text) {
  std::string model;
  ForEachKeyValueLine(proc_cpuinfo_text, [&](std::string_view key, std::string_view value) {
    if (key != "model name") return true;
    model = std::string(value);
    return false;
  });
  return model;
}

double MeasureMatmulGflops(absl::Duration budget) {
  constexpr int kN = 256;
  constexpr double kFlops = 2.0 * kN * kN * kN;
  std::vector<float> a(kN * kN), b(kN * kN), c(kN * kN);
  for (int i = 0; i < kN * kN; ++i) {
    // Small, varied values: no denormals, no overflow over repetitions.
    a[i] = static_cast<float>((i * 7) % 13) * 0.01f;
    b[i] = static_cast<float>((i * 5) % 11) * 0.01f;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + absl::ToChronoNanoseconds(budget);
  int64_t repetitions = 0;
  float checksum = 0;
  do {
    MatmulAccumulate(a.data(), b.data(), c.data(), kN);
    checksum += c[(kN * kN) / 2];  // keeps the product observable
    ++repetitions;
  } while (Clock::now() < deadline);
  const std::chrono::duration<double> elapsed = Clock::now() - start;
  volatile float sink = checksum;
  (void)sink;
  return elapsed.count() > 0 ? kFlops * static_cast<double>(repetitions) / elapsed.count() / 1e9
                             : 0.0;
}

double MeasureReadGbps(uint32_t threads, absl::Duration budget) {
  threads = std::max(1u, threads);
  constexpr size_t kWords = kReadProbeBytes / sizeof(uint64_t);
  std::vector<uint64_t> buffer(kWords);
  for (size_t i = 0; i < kWords; ++i) buffer[i] = i;  // every page mapped before timing
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + absl::ToChronoNanoseconds(budget);
  std::vector<uint64_t> passes(threads, 0);
  std::vector<uint64_t> sums(threads, 0);
  {
    std::vector<std::jthread> workers;
    for (uint32_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const uint64_t* begin = buffer.data() + kWords / threads * t;
        const size_t n = kWords / threads;
        do {
          sums[t] += SumWords(begin, n);
          ++passes[t];
        } while (Clock::now() < deadline);
      });
    }
  }  // joins
  const std::chrono::duration<double> elapsed = Clock::now() - start;
  uint64_t bytes = 0;
  uint64_t checksum = 0;
  for (uint32_t t = 0; t < threads; ++t) {
    bytes += passes[t] * (kWords / threads) * sizeof(uint64_t);
    checksum += sums[t];
  }
  volatile uint64_t sink = checksum;
  (void)sink;
  return elapsed.count() > 0 ? static_cast<double>(bytes) / elapsed.count() / 1e9 : 0.0;
}

absl::StatusOr<DeviceCapabilities> ProbeDevice(const ProbeOptions& options, SpeedSource* source) {
  absl::StatusOr<std::string> meminfo_text = ReadSmallFile(options.meminfo_path);
  if (!meminfo_text.ok()) return meminfo_text.status();
  absl::StatusOr<MemInfo> meminfo = ParseMemInfo(*meminfo_text);
  if (!meminfo.ok()) {
    return absl::Status(meminfo.status().code(),
                        absl::StrCat(options.meminfo_path, ": ", meminfo.status().message()));
  }

  DeviceCapabilities caps;
  caps.total_memory_bytes = meminfo->total_bytes;
  caps.usable_memory_bytes = options.memory_override_bytes.value_or(meminfo->available_bytes);
  if (absl::StatusOr<std::string> cpuinfo = ReadSmallFile(options.cpuinfo_path); cpuinfo.ok()) {
    caps.cpu_model = ParseCpuModel(*cpuinfo);
  }
  caps.threads = options.threads;
  if (caps.threads == 0) caps.threads = std::max(1u, std::thread::hardware_concurrency());
  SpeedSource from = SpeedSource::kNotMeasured;
  if (options.measure_speed) {
    std::optional<SpeedFigures> figures;
    if (!options.speed_cache_path.empty()) {
      figures = LoadSpeedFigures(options.speed_cache_path, caps.cpu_model, caps.threads);
    }
    from = figures ? SpeedSource::kCached : SpeedSource::kMeasured;
    if (!figures) {
      figures = SpeedFigures{MeasureMatmulGflops(options.speed_budget),
                             MeasureReadGbps(caps.threads, options.speed_budget)};
      // Not saving only means measuring again at the next start.
      if (!options.speed_cache_path.empty()) {
        (void)SaveSpeedFigures(options.speed_cache_path, caps.cpu_model, caps.threads, *figures);
      }
    }
    caps.matmul_gflops = figures->matmul_gflops;
    caps.read_gbps = figures->read_gbps;
  }
  if (source != nullptr) *source = from;
  return caps;
}

}  // namespace ringlm
