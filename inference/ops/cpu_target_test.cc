// SetCpuTarget: every path this machine runs can be forced, is the one that
// runs, and computes the same bits; names it cannot run are refused.
#include "inference/ops/cpu_target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "inference/ops/matmul.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/qgemm_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// Restores "auto" however a test ends.
class CpuTargetTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(SetCpuTarget("auto").ok()); }
};

// MatMul of random weights of `type` over 5 tokens (the tiled kernels'
// shapes), on whatever path runs now.
std::vector<float> MatMulNow(TensorType type) {
  constexpr int64_t kRows = 24, kCols = 512, kTokens = 5;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> wf(kCols), x(kTokens * kCols), y(kTokens * kRows);
  std::vector<uint8_t> w(kRows * RowBytes(type, kCols));
  for (int64_t r = 0; r < kRows; ++r) {
    for (float& v : wf) v = dist(rng);
    QuantizeRow(type, wf.data(), w.data() + r * RowBytes(type, kCols), kCols);
  }
  for (float& v : x) v = dist(rng);
  MatMul(type, w.data(), kRows, kCols, x.data(), kTokens, y.data(), nullptr);
  return y;
}

TEST_F(CpuTargetTest, EveryRunnablePathIsTheOneThatRunsAndGivesTheSameBits) {
  const std::vector<std::string> names = RunnableCpuTargets();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names.back(), "auto");
#if defined(__x86_64__)
  EXPECT_NE(std::find(names.begin(), names.end(), "scalar"), names.end());
#endif
  const std::string best = ActiveCpuTargetName();
  EXPECT_EQ(best, names.front()) << "auto runs the best path";
  const TensorType types[] = {TensorType::kQ8_0, TensorType::kQ4_0,   TensorType::kQ5_0,
                              TensorType::kQ4_1, TensorType::kQ5_1,   TensorType::kQ2_K,
                              TensorType::kQ3_K, TensorType::kQ4_K,   TensorType::kQ5_K,
                              TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS,
                              TensorType::kF16};
  std::vector<std::vector<float>> expected;
  for (TensorType t : types) expected.push_back(MatMulNow(t));

  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(SetCpuTarget(name).ok());
    EXPECT_EQ(ActiveCpuTargetName(), name == "auto" ? best : name);
    for (size_t i = 0; i < std::size(types); ++i) {
      const std::vector<float> y = MatMulNow(types[i]);
      EXPECT_EQ(std::memcmp(y.data(), expected[i].data(), y.size() * sizeof(float)), 0)
          << TraitsOf(types[i]).name;
    }
  }
}

TEST_F(CpuTargetTest, CompiledNamesAreTheSameOnEveryCpuAndHoldTheRunnableOnes) {
  const std::vector<std::string> compiled = CompiledCpuTargets();
#if defined(__x86_64__)
  EXPECT_EQ(compiled, (std::vector<std::string>{"avx512vnni", "avx512", "avx2", "scalar", "auto"}));
#elif defined(__aarch64__)
  EXPECT_EQ(compiled, (std::vector<std::string>{"neon", "auto"}));
#endif
  for (const std::string& name : RunnableCpuTargets()) {
    EXPECT_NE(std::find(compiled.begin(), compiled.end(), name), compiled.end()) << name;
  }
}

bool IsRunnable(const std::string& name) {
  const std::vector<std::string> names = RunnableCpuTargets();
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST_F(CpuTargetTest, ScalarTurnsOffEverySimdKernel) {
  if (!IsRunnable("scalar"))
    GTEST_SKIP() << "no scalar path in this build (ARM: NEON is its baseline)";
  ASSERT_TRUE(SetCpuTarget("scalar").ok());
  EXPECT_EQ(ActiveQGemmTarget(), QGemmTarget::kNone);
  const int64_t t = DispatchedHwyTarget();
  EXPECT_TRUE(t == HWY_SCALAR || t == HWY_EMU128) << hwy::TargetName(t);
}

TEST_F(CpuTargetTest, AvxTwoUsesTheAvxTwoKernelsOnEveryX86) {
  if (!IsRunnable("avx2")) GTEST_SKIP() << "this CPU has no AVX2";
  ASSERT_TRUE(SetCpuTarget("avx2").ok());
  EXPECT_EQ(ActiveQGemmTarget(), QGemmTarget::kAvx2);
  EXPECT_EQ(DispatchedHwyTarget(), HWY_AVX2);
}

TEST_F(CpuTargetTest, NamesThisMachineCannotRunAreRefusedAndChangeNothing) {
  const std::string before = ActiveCpuTargetName();
  int refused = 0;
  for (const char* name : {"avx512vnni", "avx512", "avx2", "neon"}) {
    if (IsRunnable(name)) continue;
    const absl::Status s = SetCpuTarget(name);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_NE(s.message().find("it runs: "), std::string::npos) << s;
    EXPECT_EQ(ActiveCpuTargetName(), before);
    ++refused;
  }
  EXPECT_GE(refused, 1) << "no machine runs both x86 and ARM paths";
  EXPECT_EQ(SetCpuTarget("avx3").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetCpuTarget("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ActiveCpuTargetName(), before);
}

}  // namespace
}  // namespace ringlm
