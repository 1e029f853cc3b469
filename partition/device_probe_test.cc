#include "partition/device_probe.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partition/speed_cache.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

constexpr char kMemInfo[] =
    "MemTotal:       16318412 kB\n"
    "MemFree:         1234567 kB\n"
    "MemAvailable:   12000000 kB\n"
    "Buffers:          123456 kB\n"
    "HugePages_Total:       0\n";

TEST(ParseMemInfoTest, ReadsTotalAndAvailableInBytes) {
  const auto info = ParseMemInfo(kMemInfo);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->total_bytes, uint64_t{16318412} * 1024);
  EXPECT_EQ(info->available_bytes, uint64_t{12000000} * 1024);
}

TEST(ParseMemInfoTest, ToleratesOrderTabsAndNoTrailingNewline) {
  const auto info = ParseMemInfo("Cached: 5 kB\nMemAvailable:\t2048 kB\r\nMemTotal: 4096 kB");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->total_bytes, 4096u * 1024);
  EXPECT_EQ(info->available_bytes, 2048u * 1024);
}

TEST(ParseMemInfoTest, MissingFieldsAreClearErrors) {
  auto no_available = ParseMemInfo("MemTotal: 4096 kB\nMemFree: 10 kB\n");
  EXPECT_EQ(no_available.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_available.status().message(), HasSubstr("no MemAvailable"));
  auto no_total = ParseMemInfo("MemAvailable: 4096 kB\n");
  EXPECT_EQ(no_total.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_total.status().message(), HasSubstr("no MemTotal"));
  EXPECT_FALSE(ParseMemInfo("").ok());
  EXPECT_FALSE(ParseMemInfo("garbage without colons\n\n").ok());
}

TEST(ParseMemInfoTest, MalformedValuesAreRejected) {
  for (const char* text : {
           "MemTotal: lots kB\nMemAvailable: 1 kB\n",
           "MemTotal: 4096\nMemAvailable: 1 kB\n",                     // no unit
           "MemTotal: 4096 MB\nMemAvailable: 1 kB\n",                  // wrong unit
           "MemTotal: -4096 kB\nMemAvailable: 1 kB\n",                 // negative
           "MemTotal: 4096 kB\nMemAvailable: 1 kB x\n",                // trailing junk
           "MemTotal: 99999999999999999999 kB\nMemAvailable: 1 kB\n",  // > 2^64
           "MemTotal: 18014398509481984 kB\nMemAvailable: 1 kB\n",     // 2^54 kB overflows
       }) {
    const auto info = ParseMemInfo(text);
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(ParseCpuModelTest, FirstModelNameOrEmpty) {
  EXPECT_EQ(ParseCpuModel("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n"
                          "processor\t: 1\nmodel name\t: Other\n"),
            "AMD EPYC 7B13");
  EXPECT_EQ(ParseCpuModel("processor : 0\nHardware : BCM2835\n"), "");
}

TEST(ProbeDeviceTest, SaneValuesOnThisMachine) {
  ProbeOptions options;
  options.speed_budget = absl::Milliseconds(50);
  const auto caps = ProbeDevice(options);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_GT(caps->total_memory_bytes, uint64_t{64} << 20);
  EXPECT_GT(caps->usable_memory_bytes, 0u);
  EXPECT_LE(caps->usable_memory_bytes, caps->total_memory_bytes);
  EXPECT_GT(caps->matmul_gflops, 0.0);
  EXPECT_LT(caps->matmul_gflops, 10000.0);
  EXPECT_GT(caps->read_gbps, 0.0);
  EXPECT_LT(caps->read_gbps, 10000.0);
  EXPECT_GE(caps->threads, 1u);
}

TEST(ProbeDeviceTest, HonoursOverridesAndSkipsTheSpeedFigures) {
  ProbeOptions options;
  options.memory_override_bytes = uint64_t{3} << 40;  // more than this machine has
  options.threads = 3;
  options.measure_speed = false;
  const auto caps = ProbeDevice(options);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->usable_memory_bytes, uint64_t{3} << 40);
  EXPECT_EQ(caps->threads, 3u);
  EXPECT_EQ(caps->matmul_gflops, 0.0);
  EXPECT_EQ(caps->read_gbps, 0.0);
  EXPECT_GT(caps->total_memory_bytes, 0u);
}

TEST(ProbeDeviceTest, ReadsGivenFilesAndReportsTheirErrors) {
  const std::string dir = ::testing::TempDir();
  const std::string meminfo = dir + "/probe_meminfo";
  const std::string cpuinfo = dir + "/probe_cpuinfo";
  std::ofstream(meminfo) << kMemInfo;
  std::ofstream(cpuinfo) << "model name : Test CPU 9000\n";
  ProbeOptions options;
  options.meminfo_path = meminfo;
  options.cpuinfo_path = cpuinfo;
  options.measure_speed = false;
  const auto caps = ProbeDevice(options);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->total_memory_bytes, uint64_t{16318412} * 1024);
  EXPECT_EQ(caps->usable_memory_bytes, uint64_t{12000000} * 1024);
  EXPECT_EQ(caps->cpu_model, "Test CPU 9000");

  options.meminfo_path = dir + "/does_not_exist";
  const auto missing = ProbeDevice(options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("does_not_exist"));

  std::ofstream(meminfo) << "MemTotal: 10 kB\n";
  options.meminfo_path = meminfo;
  const auto bad = ProbeDevice(options);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("probe_meminfo"));
  std::remove(meminfo.c_str());
  std::remove(cpuinfo.c_str());
}

TEST(MeasureMatmulGflopsTest, PositiveAndRespectsBudget) {
  const auto start = absl::Now();
  const double gflops = MeasureMatmulGflops(absl::Milliseconds(30));
  EXPECT_GT(gflops, 0.0);
  // One repetition may overrun the budget; allow generous slack for slow builds.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(MeasureReadGbpsTest, PositiveWithOneOrMoreThreadsAndRespectsBudget) {
  for (uint32_t threads : {0u, 1u, 3u}) {
    const auto start = absl::Now();
    EXPECT_GT(MeasureReadGbps(threads, absl::Milliseconds(20)), 0.0) << threads << " threads";
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  }
}

TEST(SpeedCacheTest, FiguresComeBackOnlyForTheSameCpuAndThreads) {
  const std::string path = ::testing::TempDir() + "/speed_cache_roundtrip";
  const SpeedFigures figures{12.345678901234567, 7.25};
  ASSERT_TRUE(SaveSpeedFigures(path, "Test CPU 9000", 4, figures).ok());
  EXPECT_EQ(LoadSpeedFigures(path, "Test CPU 9000", 4), figures);
  EXPECT_EQ(LoadSpeedFigures(path, "Other CPU", 4), std::nullopt);
  EXPECT_EQ(LoadSpeedFigures(path, "Test CPU 9000", 2), std::nullopt);
  EXPECT_EQ(LoadSpeedFigures(path + "-missing", "Test CPU 9000", 4), std::nullopt);
  std::remove(path.c_str());
}

TEST(SpeedCacheTest, AMalformedFileMeansMeasuringAgain) {
  const std::string path = ::testing::TempDir() + "/speed_cache_malformed";
  const std::string good =
      "ringlm speed figures 1\ncpu_model=X\nthreads=1\nmatmul_gflops=3\nread_gbps=2\n";
  for (const std::string& text :
       {std::string(""), good.substr(0, good.size() - 1), good + "extra\n",
        std::string(
            "ringlm speed figures 2\ncpu_model=X\nthreads=1\nmatmul_gflops=3\nread_gbps=2\n"),
        std::string(
            "ringlm speed figures 1\ncpu_model=X\nthreads=1\nmatmul_gflops=nan\nread_gbps=2\n"),
        std::string(
            "ringlm speed figures 1\ncpu_model=X\nthreads=1\nmatmul_gflops=3\nread_gbps=-2\n"),
        std::string(
            "ringlm speed figures 1\nthreads=1\ncpu_model=X\nmatmul_gflops=3\nread_gbps=2\n"),
        std::string(5000, 'x')}) {
    std::ofstream(path, std::ios::trunc) << text;
    EXPECT_EQ(LoadSpeedFigures(path, "X", 1), std::nullopt) << text.substr(0, 80);
  }
  std::ofstream(path, std::ios::trunc) << good;
  EXPECT_EQ(LoadSpeedFigures(path, "X", 1), (SpeedFigures{3, 2}));
  std::remove(path.c_str());
}

TEST(ProbeDeviceTest, MeasuresOnceThenKeepsTheFiguresInTheCacheFile) {
  const std::string path = ::testing::TempDir() + "/speed_cache_probe";
  std::remove(path.c_str());
  ProbeOptions options;
  options.speed_budget = absl::Milliseconds(20);
  options.speed_cache_path = path;
  SpeedSource source = SpeedSource::kNotMeasured;
  const auto first = ProbeDevice(options, &source);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(source, SpeedSource::kMeasured);
  const auto second = ProbeDevice(options, &source);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(source, SpeedSource::kCached);
  EXPECT_EQ(second->matmul_gflops, first->matmul_gflops);
  EXPECT_EQ(second->read_gbps, first->read_gbps);
  options.threads = first->threads + 1;  // another thread count: measured again
  ASSERT_TRUE(ProbeDevice(options, &source).ok());
  EXPECT_EQ(source, SpeedSource::kMeasured);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ringlm
